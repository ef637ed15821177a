"""mathcode: determinism and prefixes, tiers, the verifier, harness semantics, signature grouping,
the default generators, and the episode API under the vLLM evaluation loop."""

from __future__ import annotations

import json
import sys
from collections import Counter

import pytest
import reasoning_gym
from domain_fixtures import ENV_ROW, TASK_ROW, Scripted, every_spec

from axisrl.backends.llm_eval import evaluate
from axisrl.domains import mathcode as mc
from axisrl.domains.canon import canonical_json
from axisrl.domains.mathcode import sandbox, verifier
from axisrl.domains.mathcode.verifier import SCORER
from axisrl.domains.toolworld import Pool

MATHCODE = {
    "generators": ["basic_arithmetic", "gcd", "bf"],
    "heldout_generators": ["lcm", "count_bits", "products"],
    "tools": ["answer", "calculator", "python"],
    "python_states": ["stateless", "persistent"],
    "python_outputs": ["stdout", "echo"],
    "grammars": ["plain", "tagged"],
    "python_timeout_s": 5,
}
CFG = {
    "seed": 0,
    "tasks_per_env": 4,
    "contents_per_variant": 2,
    "max_steps": 6,
    "placebo_contents": 3,
    "placebo_tasks_per_env": 4,
    "mathcode": MATHCODE,
    "heldout": {
        "seed": 1000003,
        "tasks_per_env": 3,
        "t0_envs": 3,
        "t1_envs": 2,
        "t2_worlds": 2,
        "t2_variants_per_world": 3,
    },
}
S1 = ("sig_api", "sig_schema", "sig_sem")


@pytest.fixture(scope="module")
def pool() -> Pool:
    return mc.generate_pool(CFG)


@pytest.fixture(scope="module")
def specs(pool) -> dict[str, dict]:
    return every_spec(pool)


def dump(pool) -> str:
    return canonical_json(
        [pool.envs, pool.tasks, pool.heldout_envs, pool.heldout_tasks, pool.placebo_envs, pool.placebo_tasks]
    )


def structure(spec: dict) -> tuple:
    harness = spec["harness"]
    return spec["generator"], harness["tools"], harness["python_state"], harness["python_output"]


def run(spec: dict, task: dict, calls: list[dict]) -> mc.MathcodeEnv:
    env = mc.MathcodeEnv(spec, task)
    env.reset()
    for call in calls:
        env.step(call)
    return env


def finish(answer: str | None) -> dict:
    return {"name": "finish", "arguments": {} if answer is None else {"answer": answer}}


def python(code: str) -> dict:
    return {"name": "python", "arguments": {"code": code}}


# ------------------------------------------------------------------------------------------ pool


def test_same_config_gives_an_identical_pool_and_another_seed_does_not(pool):
    assert dump(mc.generate_pool(CFG)) == dump(pool)
    assert dump(mc.generate_pool({**CFG, "seed": 1})) != dump(pool)


def test_more_tasks_per_env_extends_each_environments_tasks_as_a_prefix(pool):
    larger = mc.generate_pool({**CFG, "tasks_per_env": 8})
    assert [env["env_id"] for env in larger.envs] == [env["env_id"] for env in pool.envs]
    by_env = {env["env_id"]: [] for env in pool.envs}
    for task in larger.tasks:
        by_env[task["env_id"]].append(task["task_id"])
    for env_id, task_ids in by_env.items():
        assert len(task_ids) == 8
        assert [t["task_id"] for t in pool.tasks if t["env_id"] == env_id] == task_ids[:4]


def test_rows_have_toolworlds_columns_and_the_expected_counts(pool, specs):
    assert all(set(env) == ENV_ROW | {"generator"} for env in pool.envs + pool.heldout_envs + pool.placebo_envs)
    assert all(set(task) == TASK_ROW for task in pool.tasks + pool.heldout_tasks + pool.placebo_tasks)
    n_structures = len(MATHCODE["generators"]) * 6 - CFG["heldout"]["t1_envs"]
    assert len(pool.envs) == n_structures * 2 * CFG["contents_per_variant"]
    assert len({structure(specs[env["env_id"]]) for env in pool.envs}) == n_structures
    assert Counter(task["env_id"] for task in pool.tasks) == {env["env_id"]: 4 for env in pool.envs}
    assert {env["world_id"] for env in pool.envs + pool.heldout_envs} == {"mathcode"}
    assert Counter(env["tier"] for env in pool.heldout_envs) == {"T0": 3, "T1": 2, "T2": 6}
    assert len(pool.placebo_envs) == 3 and len({structure(specs[e["env_id"]]) for e in pool.placebo_envs}) == 1


def test_tiers_are_seen_structure_unseen_harness_and_unseen_generator(pool, specs):
    trained = {structure(specs[env["env_id"]]) for env in pool.envs}
    trained_generators = {generator for generator, *_ in trained}
    tiers = {tier: [specs[e["env_id"]] for e in pool.heldout_envs if e["tier"] == tier] for tier in ("T0", "T1", "T2")}
    assert all(structure(spec) in trained for spec in tiers["T0"])
    assert all(structure(spec) not in trained and spec["generator"] in trained_generators for spec in tiers["T1"])
    assert {spec["generator"] for spec in tiers["T2"]} == {"lcm", "count_bits"}
    train_contents = {env["content_seed"] for env in pool.envs}
    assert not train_contents & {env["content_seed"] for env in pool.heldout_envs}
    train_s1 = {tuple(mc.signatures(specs[e["env_id"]])[k] for k in S1) for e in pool.envs}
    train_skins = {mc.signatures(specs[e["env_id"]])["skin"] for e in pool.envs}
    for spec in tiers["T2"]:
        sig = mc.signatures(spec)
        assert tuple(sig[k] for k in S1) not in train_s1 and sig["skin"] not in train_skins


def test_misconfigured_generators_fail_loudly():
    with pytest.raises(ValueError, match="not reasoning-gym generators"):
        mc.generate_pool({**CFG, "mathcode": {**MATHCODE, "generators": ["basic_arithmetic", "no_such_thing"]}})
    with pytest.raises(ValueError, match="also trained on"):
        mc.generate_pool({**CFG, "mathcode": {**MATHCODE, "heldout_generators": ["gcd", "lcm"]}})
    with pytest.raises(ValueError, match="T1"):
        mc.generate_pool({**CFG, "mathcode": {**MATHCODE, "tools": ["answer"]}})


def test_default_generators_are_disjoint_and_each_yields_verified_tasks():
    assert not set(mc.GENERATORS) & set(mc.HELDOUT_GENERATORS)
    assert len(set(mc.GENERATORS)) == len(mc.GENERATORS)
    for generator in mc.GENERATORS + mc.HELDOUT_GENERATORS:
        spec = {
            "domain": "mathcode",
            "generator": generator,
            "harness": mc.Harness("answer").as_dict(),
            "content_seed": 777,
            "max_steps": 4,
            "python_timeout_s": 5,
        }
        tasks = mc.generate_tasks(spec, "env", 2)
        assert len(tasks) == 2, generator
        assert mc.generate_tasks(spec, "env", 2) == tasks, generator


# -------------------------------------------------------------------------------------- verifier


def test_the_reference_verifies_and_a_wrong_or_missing_answer_does_not(pool, specs):
    for task in pool.tasks + pool.heldout_tasks:
        spec = specs[task["env_id"]]
        verdict = run(spec, task, json.loads(task["reference"])).verify()
        assert verdict.success and verdict.reward == 1.0 and verdict.score == 1.0
        assert (verdict.subgoals_met, verdict.subgoals_total) == (1, 1)
        for calls in ([finish("definitely wrong")], [finish(None)], []):
            verdict = run(spec, task, calls).verify()
            assert not verdict.success and verdict.reward == 0.0 and verdict.score < 1.0


def test_the_grammar_decides_how_the_answer_is_read(pool, specs):
    for grammar in ("plain", "tagged"):
        env = next(e for e in pool.envs if specs[e["env_id"]]["harness"]["grammar"] == grammar)
        spec, task = specs[env["env_id"]], next(t for t in pool.tasks if t["env_id"] == env["env_id"])
        plain, tagged = f"  {task['answer']} ", f"work... <answer>{task['answer']}</answer>"
        assert run(spec, task, [finish(plain)]).verify().success == (grammar == "plain")
        assert run(spec, task, [finish(tagged)]).verify().success == (grammar == "tagged")


def test_scoring_runs_answers_in_another_process_and_gives_up_after_the_time_limit(monkeypatch):
    entry = json.loads(canonical_json(reasoning_gym.create_dataset("spiral_matrix", seed=1, size=1)[0]))
    # spiral_matrix's scorer eval()s the answer: here that would set a module in the evaluator
    planted = "__import__('sys').modules.__setitem__('axisrl_planted', None) or [1]"
    assert SCORER.score("spiral_matrix", planted, entry) == 0.0 and "axisrl_planted" not in sys.modules
    monkeypatch.setattr(verifier, "SCORE_TIMEOUT_S", 1.0)
    assert SCORER.score("spiral_matrix", "[0 for _ in iter(int, 1)]", entry) == 0.0  # never returns
    assert SCORER.score("spiral_matrix", entry["answer"], entry) == 1.0  # a fresh scorer took over


# --------------------------------------------------------------------------------------- harness


def harness_spec(tools: str, state: str | None = None, output: str | None = None, timeout: float = 5) -> dict:
    return {
        "domain": "mathcode",
        "generator": "gcd",
        "harness": mc.Harness(tools, state, output).as_dict(),
        "content_seed": 1,
        "max_steps": 5,
        "python_timeout_s": timeout,
    }


def observations(spec: dict, calls: list[dict]) -> list[dict]:
    env = mc.MathcodeEnv(spec, {"instruction": "", "goal": "{}"})
    env.reset()
    return [env.step(call).observation for call in calls]


def test_python_state_and_output_change_what_the_agent_observes():
    cells = [python("x = 6 * 7"), python("x + 1"), python("print(x)")]
    stateless = observations(harness_spec("python", "stateless", "stdout"), cells)
    persistent = observations(harness_spec("python", "persistent", "echo"), cells)
    assert "NameError" in stateless[1]["error"] and "NameError" in stateless[2]["error"]
    assert [o["output"] for o in persistent] == ["", "43\n", "42\n"] and not any("error" in o for o in persistent)
    assert observations(harness_spec("python", "persistent", "stdout"), cells)[1] == {"output": ""}


def test_tool_errors_and_timeouts_are_observations():
    calc, answer = harness_spec("calculator"), harness_spec("answer")
    assert observations(calc, [{"name": "calculate", "arguments": {"expression": "sqrt(16) * 2"}}]) == [
        {"output": "8.0\n"}
    ]
    [blocked] = observations(calc, [{"name": "calculate", "arguments": {"expression": "__import__('os')"}}])
    assert "NameError" in blocked["error"]
    assert "unknown tool" in observations(answer, [python("1")])[0]["error"]
    assert "unknown argument" in observations(calc, [{"name": "calculate", "arguments": {"x": "1"}}])[0]["error"]
    assert "not valid JSON" in observations(calc, [{"name": "calculate", "arguments": "{oops"}])[0]["error"]
    slow = harness_spec("python", "persistent", "stdout", timeout=1)
    timed_out, after = observations(slow, [python("while True: pass"), python("print('alive')")])
    assert timed_out["error"].startswith("timed out") and after == {"output": "alive\n"}
    assert len(sandbox.run("print('a' * 10000)", mode="exec", timeout_s=5)["output"]) < 4200


def test_the_step_limit_ends_an_episode():
    env = mc.MathcodeEnv(harness_spec("calculator"), {"instruction": "", "goal": "{}"})
    env.reset()
    dones = [env.step({"name": "calculate", "arguments": {"expression": "1"}}).done for _ in range(5)]
    assert dones == [False] * 4 + [True]
    assert env.step(finish("1")).observation == {"error": "the episode is over"}


# ------------------------------------------------------------------------------------ signatures


def test_signatures_group_harness_variants(pool, specs):
    sigs = {env_id: mc.signatures(spec) for env_id, spec in specs.items()}
    by_structure: dict[tuple, set] = {}
    for env in pool.envs:
        by_structure.setdefault(structure(specs[env["env_id"]]), set()).add(tuple(sigs[env["env_id"]][k] for k in S1))
    # grammars and contents of one structure share one S1 identity; structures never share one
    assert all(len(identities) == 1 for identities in by_structure.values())
    assert len(set().union(*by_structure.values())) == len(by_structure)

    def differing(a: dict, b: dict) -> set[str]:
        return {k for k in ("sig_api", "sig_schema", "sig_sem", "sig_ver", "skin") if a[k] != b[k]}

    base = harness_spec("python", "stateless", "stdout")
    variant = {**base, "harness": {**base["harness"]}}
    cases = {
        ("content_seed", 2): set(),
        ("grammar", "tagged"): {"sig_ver"},
        ("python_state", "persistent"): {"sig_sem"},
        ("python_output", "echo"): {"sig_sem"},
        ("generator", "lcm"): {"sig_schema", "sig_ver", "skin"},
    }
    for (key, value), expected in cases.items():
        changed = (
            {**variant, key: value}
            if key in ("content_seed", "generator")
            else {**variant, "harness": {**variant["harness"], key: value}}
        )
        assert differing(mc.signatures(base), mc.signatures(changed)) == expected, key
    assert "sig_api" in differing(mc.signatures(base), mc.signatures(harness_spec("calculator")))
    assert mc.signatures(harness_spec("answer"))["sig_api"] != mc.signatures(harness_spec("calculator"))["sig_api"]


# ------------------------------------------------------------------------------ evaluation loop


def test_the_vllm_loop_plays_mathcode_episodes(pool, specs):
    python_envs = [e for e in pool.heldout_envs if specs[e["env_id"]]["harness"]["tools"] == "python"]
    tasks = [next(t for t in pool.heldout_tasks if t["env_id"] == e["env_id"]) for e in python_envs]
    assert tasks
    scripts = {}
    for task in tasks:
        grammar = specs[task["env_id"]]["harness"]["grammar"]
        answer = f"<answer>{task['answer']}</answer>" if grammar == "tagged" else task["answer"]
        scripts[task["instruction"]] = [python(f"print({task['answer']!r})"), finish(answer)]
    rows = evaluate(Scripted(scripts), pool.heldout_envs, tasks, "mathcode", max_turns=4, workers=2)
    assert all(row["success"] and row["steps"] == 2 and row["tool_calls"] == 1 and row["errors"] == 0 for row in rows)
