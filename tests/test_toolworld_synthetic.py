"""Synthetic sources: determinism, real-row shape, fidelity 1.0 = faithful generator, each
injected defect does what it says, defect rates near the configured ones, filters, SWiRL's
judge, and the DreamGym simulator (exact at zero error, forks deterministic and independent)."""

from __future__ import annotations

import json
import random

import pytest
from domain_fixtures import ENV_ROW, STAGE_COLUMNS

from axisrl.domains import toolworld as tw
from axisrl.domains.toolworld.compact import CompactEpisode
from axisrl.domains.toolworld.defects import reword
from axisrl.domains.toolworld.methods import TASK_DEFECTS
from axisrl.domains.toolworld.model import copy_state
from axisrl.domains.toolworld.synthetic_common import replay

TRAJECTORY_KEYS = {
    "task_id",
    "env_id",
    "source",
    "trajectory_index",
    "calls",
    "label",
    "true_success",
    "n_steps",
    "step_errors",
    "defect",
}
ZERO = {
    "awm": {"description_mismatch": 0.0, "unverifiable_goal": 0.0},
    "genenv": {"description_mismatch": 0.0, "unverifiable_goal": 0.0},
    **{m: {"unsolvable": 0.0, "mislabelled": 0.0, "near_duplicate": 0.0} for m in ("autoplay", "sca", "rlve")},
    "swirl": {"step_error": 0.0},
}


@pytest.fixture(scope="module")
def real(smoke_config) -> tw.Pool:
    return tw.generate_pool(smoke_config["synthesize"])


@pytest.fixture(scope="module")
def base(smoke_config) -> dict:
    """The smoke study's ``sources`` section as ``generate_synthetic`` takes it."""
    sources = smoke_config["sources"]
    return {
        **sources,
        "common_core": False,
        "methods": {m: {k: v for k, v in f.items() if k != "unit_cost"} for m, f in sources["methods"].items()},
    }


@pytest.fixture(scope="module")
def default(real, base) -> tw.SyntheticPool:
    return tw.generate_synthetic(real.envs, real.tasks, base)


def make(real: tw.Pool, base: dict, methods: dict, **sizes) -> tw.SyntheticPool:
    return tw.generate_synthetic(real.envs, real.tasks, {**base, **sizes, "methods": methods})


def specs_of(*pools) -> dict[str, dict]:
    return {env["env_id"]: json.loads(env["spec"]) for pool in pools for env in pool.envs}


def reference_run(spec: dict, task: dict) -> tuple[bool, bool]:
    """(the reference ran without an error, it passed the task's verifier)."""
    env, clean = replay(spec, task, json.loads(task["reference"]))
    return clean, env.verify().success


def test_registry_and_fidelity_validation():
    assert {m.name: (m.axis, m.kind, m.unit, m.unit_cost) for m in tw.METHODS.values()} == {
        "awm": ("d_env", "env", "env", 4.10),
        "genenv": ("d_env", "env", "env", 3.80),
        "dreamgym": ("d_traj", "simulator", "trajectory", 0.04),
        "autoplay": ("d_task", "task", "task", 0.18),
        "sca": ("d_task", "task", "task", 0.21),
        "rlve": ("d_task", "task", "task", 0.15),
        "swirl": ("d_traj", "trajectory", "trajectory", 0.05),
    }
    assert tw.method_fidelity("sca", {"filter_recall": 0.5, "unit_cost": 9.0})["filter_recall"] == 0.5
    core = tw.method_fidelity("sca", common_core=True)
    assert (core["filter"], core["filter_recall"], core["unsolvable"]) == ("solution", 1.0, 0.2)
    assert tw.method_fidelity("swirl", common_core=True)["judge_recall"] == 1.0
    for name, bad in (
        ("awm", {"typo": 0.1}),
        ("rlve", {"unsolvable": 1.5}),
        ("sca", {"filter": "vibes"}),
        ("autoplay", {"unsolvable": 0.6, "mislabelled": 0.6}),
        ("nope", {}),
    ):
        with pytest.raises(ValueError):
            tw.method_fidelity(name, bad)


def test_deterministic_and_shaped_like_real_rows(real, base, default):
    again = tw.generate_synthetic(real.envs, real.tasks, base)
    assert (default.envs, default.tasks, default.trajectories, default.stats) == (
        again.envs,
        again.tasks,
        again.trajectories,
        again.stats,
    )
    assert set(real.envs[0]) == ENV_ROW
    sources = {m for m, method in tw.METHODS.items() if method.kind != "simulator"}
    assert {r["source"] for r in default.envs + default.tasks + default.trajectories} == sources
    assert {row["split"] for row in default.envs + default.tasks} == {"synthetic"}
    assert all(set(row) == ENV_ROW | STAGE_COLUMNS and row["tier"] is None for row in default.envs)
    assert all(set(row) == set(real.tasks[0]) | STAGE_COLUMNS and row["tier"] is None for row in default.tasks)
    assert all(set(row) == TRAJECTORY_KEYS for row in default.trajectories)
    env_ids, task_ids = [e["env_id"] for e in default.envs], [t["task_id"] for t in default.tasks]
    assert len(set(env_ids)) == len(env_ids) and len(set(task_ids)) == len(task_ids)
    assert not set(env_ids) & {e["env_id"] for e in real.envs + real.heldout_envs + real.placebo_envs}
    assert not set(task_ids) & {t["task_id"] for t in real.tasks + real.heldout_tasks + real.placebo_tasks}
    targets = {e["env_id"] for e in real.envs[: base["task_envs"]]}
    for task in default.tasks:  # task methods write for real environments, env methods for their own
        assert task["env_id"] in (env_ids if tw.METHODS[task["source"]].kind == "env" else targets)
    assert {t["task_id"] for t in default.trajectories} <= {t["task_id"] for t in real.tasks if t["env_id"] in targets}
    assert set(default.stats) == sources and all(s["kept"] <= s["drafts"] for s in default.stats.values())


def test_zero_error_sources_are_a_faithful_generator(real, base):
    pool = make(real, base, ZERO, envs=3)
    specs = specs_of(real, pool)
    assert {row["defect"] for row in pool.envs + pool.tasks + pool.trajectories} == {None}
    assert all(tw.description_mismatches(specs[e["env_id"]]) == [] for e in real.envs + pool.envs)
    assert all(reference_run(specs[t["env_id"]], t) == (True, True) for t in pool.tasks)
    assert all(t["true_success"] and t["label"] == 1.0 and t["step_errors"] == 0 for t in pool.trajectories)
    references = {t["task_id"]: t["reference"] for t in real.tasks}
    assert all(json.loads(t["calls"]) == json.loads(references[t["task_id"]]) for t in pool.trajectories)
    for task in pool.tasks:  # every task, goal checks included, renders in the compact view
        CompactEpisode(specs[task["env_id"]], task, 0).view()


def test_description_mismatch_documents_what_never_runs(real, base):
    pool = make(real, base, {"genenv": {"description_mismatch": 1.0, "unverifiable_goal": 0.0}}, envs=4)
    specs = specs_of(pool)
    assert {e["defect"] for e in pool.envs} == {"description_mismatch"}
    for env in pool.envs:
        spec = specs[env["env_id"]]
        shadowed = set(tw.description_mismatches(spec))
        assert shadowed
        schemas = tw.tool_schemas(spec)
        names = [s["function"]["name"] for s in schemas]
        assert len(set(names)) < len(names)  # a name documented twice, with two descriptions
        tw.signatures(spec)  # the rest of the pipeline still reads it
    assert pool.tasks and all(reference_run(specs[t["env_id"]], t) == (True, True) for t in pool.tasks)


@pytest.mark.parametrize("method", ["awm", "autoplay", "rlve"])
def test_unreachable_goals_fail_every_reference(real, base, method):
    key = "unverifiable_goal" if method == "awm" else "unsolvable"
    fidelity = {**ZERO[method], key: 1.0}
    pool = make(real, base, {method: fidelity}, envs=2)
    specs = specs_of(real, pool)
    assert pool.tasks and {t["defect"] for t in pool.tasks} == {key}
    assert all(reference_run(specs[t["env_id"]], t) == (True, False) for t in pool.tasks)


def test_mislabelled_and_near_duplicate_tasks(real, base):
    specs = specs_of(real)
    mislabelled = make(real, base, {"autoplay": {**ZERO["autoplay"], "mislabelled": 1.0}})
    assert mislabelled.tasks and {t["defect"] for t in mislabelled.tasks} == {"mislabelled"}
    assert all(reference_run(specs[t["env_id"]], t) == (True, False) for t in mislabelled.tasks)
    goals = {t["goal"] for t in real.tasks} | {t["goal"] for t in mislabelled.tasks}
    assert all(t["goal"] in goals for t in mislabelled.tasks)

    copies = make(real, base, {"rlve": {**ZERO["rlve"], "near_duplicate": 1.0}})
    originals = {(t["env_id"], t["reference"], t["goal"]): t for t in real.tasks}
    assert copies.tasks and {t["defect"] for t in copies.tasks} == {"near_duplicate"}
    for task in copies.tasks:
        original = originals[(task["env_id"], task["reference"], task["goal"])]
        assert task["instruction"] != original["instruction"] and task["task_id"] != original["task_id"]
        assert reference_run(specs[task["env_id"]], task) == (True, True)


def test_reword_keeps_the_slots():
    rng = random.Random(0)
    text = "Set the size of the box 'Kabo' to 7."
    other = reword(text, rng)
    assert other != text and "size" in other and "Kabo" in other and "7" in other
    assert reword("Something unusual.", rng).endswith("Something unusual.")


def test_defect_rates_near_configured(real, base):
    pool = make(
        real,
        base,
        {m: {} for m in ("genenv", "autoplay", "rlve", "swirl")},
        envs=40,
        env_tasks=20,
        tasks_per_env=40,
        task_envs=len(real.envs),
        trajectories_per_task=24,
    )
    for method in ("autoplay", "rlve"):
        stats, fid = pool.stats[method], tw.METHODS[method].fidelity
        for defect in TASK_DEFECTS:
            assert abs(stats[f"injected_{defect}"] / stats["drafts"] - fid[defect]) < 0.08, (method, defect)
    genenv, fid = pool.stats["genenv"], tw.METHODS["genenv"].fidelity
    assert abs(genenv["injected_description_mismatch"] / genenv["drafts"] - fid["description_mismatch"]) < 0.15
    assert abs(genenv["injected_unverifiable_goal"] / genenv["task_drafts"] - fid["unverifiable_goal"]) < 0.04
    swirl = pool.stats["swirl"]
    assert abs(swirl["injected_step_error"] / swirl["error_prone_steps"] - 0.15) < 0.03
    assert swirl["drafts"] > swirl["kept"]  # the judge rejected some


def test_sca_filter_and_the_common_core(real, base):
    specs = specs_of(real)
    mix = {"unsolvable": 0.3, "mislabelled": 0.3, "near_duplicate": 0.0}
    strict = make(real, base, {"sca": {**mix, "filter_recall": 1.0}})
    assert strict.tasks and {t["defect"] for t in strict.tasks} == {None}
    assert strict.stats["sca"]["drafts"] > strict.stats["sca"]["kept"]
    leaky = make(real, base, {"sca": {**mix, "filter_recall": 0.0}})
    assert {t["defect"] for t in leaky.tasks} > {None}

    core = make(real, base, {"rlve": mix, "awm": {"unverifiable_goal": 0.5}}, common_core=True, envs=2)
    core_specs = specs_of(core)
    assert core.tasks and {t["defect"] for t in core.tasks} == {None}
    assert all(reference_run({**specs, **core_specs}[t["env_id"]], t) == (True, True) for t in core.tasks)


def test_swirl_judge(real, base):
    specs = specs_of(real)
    strict = make(real, base, {"swirl": {"step_error": 0.5, "judge_recall": 1.0}})
    assert strict.trajectories and all(t["step_errors"] == 0 and t["true_success"] for t in strict.trajectories)
    blind = make(real, base, {"swirl": {"step_error": 1.0, "judge_recall": 0.0}})
    assert {t["defect"] for t in blind.trajectories} == {"step_error"}
    assert all(t["label"] == 1.0 and t["step_errors"] > 0 for t in blind.trajectories)
    assert not all(t["true_success"] for t in blind.trajectories)
    tasks = {t["task_id"]: t for t in real.tasks}
    for row in blind.trajectories:  # true_success is what a replay in the real environment verifies
        env, _ = replay(specs[row["env_id"]], tasks[row["task_id"]], json.loads(row["calls"]))
        assert env.verify().success == row["true_success"]


def run(env: tw.ToolworldEnv, calls: list[dict]) -> list[dict]:
    return [env.step(call).observation for call in calls]


@pytest.fixture(scope="module")
def episodes(real) -> list[tuple[dict, dict, list[dict]]]:
    specs = specs_of(real)
    return [(specs[t["env_id"]], t, json.loads(t["reference"])) for t in real.tasks]


def test_simulated_env_without_error_is_the_real_one(episodes):
    for k, (spec, task, calls) in enumerate(episodes):
        real_env, sim = (
            tw.ToolworldEnv(spec, task),
            tw.SimulatedEnv(spec, task, {"transition_error": 0.0, "reward_error": 0.0}, k),
        )
        assert sim.reset() == real_env.reset()
        assert run(sim, calls) == run(real_env, calls)
        assert sim.verify() == real_env.verify() and sim.verify().success


def test_simulated_env_errors(episodes):
    flipped = 0
    for k, (spec, task, calls) in enumerate(episodes):
        real_env, sim = (
            tw.ToolworldEnv(spec, task),
            tw.SimulatedEnv(spec, task, {"transition_error": 1.0, "reward_error": 0.0}, k),
        )
        real_env.reset(), sim.reset()
        for call in calls[:-1]:  # every tool call is simulated wrong (finish never is)
            real_obs, sim_obs = real_env.step(call).observation, sim.step(call).observation
            assert sim_obs != real_obs or sim.state != real_env.state or real_obs["result"] in ([], {})
            sim.state = copy_state(real_env.state)
        flip = tw.SimulatedEnv(spec, task, {"transition_error": 0.0, "reward_error": 1.0}, k)
        flip.reset()
        run(flip, calls)
        flipped += not flip.verify().success
    assert flipped == len(episodes)


def test_simulated_forks_are_deterministic_and_independent(episodes):
    spec, task, calls = max(episodes, key=lambda e: len(e[2]))
    fidelity = {"transition_error": 0.5, "reward_error": 0.5}
    expected = run_from_start(spec, task, fidelity, 3, calls)
    sim = tw.SimulatedEnv(spec, task, fidelity, 3)
    sim.reset()
    assert sim.step(calls[0]).observation == expected[0]
    a, b = sim.fork(), sim.fork()
    run(a, calls[1:][::-1])  # a diverges first; b and the original must not notice
    a.verify()
    assert run(b, calls[1:]) == expected[1:] == run(sim, calls[1:])
    assert b.verify() == sim.verify() and b.state == sim.state
    outcomes = {json.dumps(run_from_start(spec, task, fidelity, seed, calls)) for seed in range(16)}
    assert len(outcomes) > 1  # the seed matters


def run_from_start(spec: dict, task: dict, fidelity: dict, seed: int, calls: list[dict]) -> list[dict]:
    env = tw.SimulatedEnv(spec, task, fidelity, seed)
    env.reset()
    return run(env, calls)
