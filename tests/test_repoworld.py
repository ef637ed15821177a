"""repoworld: the verifier runs the tests for real, tasks filter answer-first, baselines stay low on
unseen worlds, pools are deterministic with disjoint held-out tiers, signatures keep their levels,
and the chat rendering has toolworld's shape."""

from __future__ import annotations

import json
import random
import time

import jsonschema
import polars as pl
import pytest
from domain_fixtures import NO_PLACEBO_SWEEP, STAGE_COLUMNS, Scripted, every_spec, every_task, synthesize

from axisrl.domains import repoworld as rw
from axisrl.domains.canon import canonical_json
from axisrl.domains.repoworld import spec as rw_spec
from axisrl.domains.repoworld import world as rw_world
from axisrl.domains.repoworld.mutations import OPERATORS, Context, inverse_offered, rewrites
from axisrl.domains.repoworld.repo import compile_repo
from axisrl.domains.repoworld.runner import Limits, run_suite
from axisrl.domains.repoworld.tasks import mutation_sites
from axisrl.domains.toolworld.lexicon import word_pool
from axisrl.stages.pools import ENV_COLUMNS, TASK_COLUMNS

SMALL = {
    "n_worlds": 4,
    "variants_per_world": 2,
    "contents_per_variant": 2,
    "reskins_per_world": 1,
    "tasks_per_env": 6,
    "placebo_contents": 2,
    "placebo_tasks_per_env": 4,
    "heldout": {
        "tasks_per_env": 6,
        "t0_envs": 2,
        "t1_envs": 2,
        "t2_worlds": 12,
        "t2_variants_per_world": 2,
        "validation_worlds": 3,
    },
}
TINY = {
    "n_worlds": 2,
    "variants_per_world": 2,
    "contents_per_variant": 1,
    "reskins_per_world": 1,
    "tasks_per_env": 4,
    "placebo_contents": 1,
    "placebo_tasks_per_env": 3,
    "heldout": {
        "tasks_per_env": 3,
        "t0_envs": 1,
        "t1_envs": 1,
        "t2_worlds": 2,
        "t2_variants_per_world": 2,
        "validation_worlds": 1,
    },
}
AXES = ("sig_api", "sig_schema", "sig_sem")
EPISODES_PER_TASK = 2


def _cfg(schema: dict, section: dict) -> dict:
    return synthesize(schema, section, NO_PLACEBO_SWEEP)


@pytest.fixture(scope="module")
def cfg(schema) -> dict:
    return _cfg(schema, SMALL)


@pytest.fixture(scope="module")
def pool(cfg):
    return rw.generate_pool(cfg)


@pytest.fixture(scope="module")
def tiny_pools(schema) -> list:
    """Two more seeds (training and held-out streams both moved), for the property test."""
    return [
        rw.generate_pool(_cfg(schema, {**TINY, "seed": seed, "heldout": {**TINY["heldout"], "seed": 90 + seed}}))
        for seed in (7, 13)
    ]


@pytest.fixture(scope="module")
def specs(pool, tiny_pools) -> dict[str, dict]:
    return every_spec(pool, *tiny_pools)


@pytest.fixture(scope="module")
def sigs(pool, specs) -> dict[str, dict[str, str]]:
    return {e["env_id"]: rw.signatures(specs[e["env_id"]]) for e in pool.envs + pool.heldout_envs + pool.placebo_envs}


def _play(env: rw.Env, calls: list[dict]) -> None:
    for call in calls:
        env.step(call)


# ---------------------------------------------------------------------------------------------- pools


def test_same_config_gives_a_byte_identical_pool_and_another_seed_does_not(cfg, pool):
    again = rw.generate_pool(cfg)
    for name in ("envs", "tasks", "heldout_envs", "heldout_tasks", "placebo_envs", "placebo_tasks"):
        assert canonical_json(getattr(again, name)) == canonical_json(getattr(pool, name)), name
    other = rw.generate_pool({**cfg, "seed": 5, "heldout": {**cfg["heldout"], "t2_worlds": 1, "validation_worlds": 0}})
    assert {e["env_id"] for e in other.envs}.isdisjoint(e["env_id"] for e in pool.envs)


def test_rows_have_the_stage_columns_and_ids_are_tagged(pool):
    for rows, columns in ((pool.envs, ENV_COLUMNS), (pool.heldout_tasks, TASK_COLUMNS), (pool.tasks, TASK_COLUMNS)):
        assert set(rows[0]) == set(columns) - STAGE_COLUMNS
        frame = pl.DataFrame(rows, schema=columns)
        assert frame.height == len(rows)
    env = pool.envs[0]
    spec = json.loads(env["spec"])
    assert env["env_id"] == rw.env_id(spec) != canonical_json(spec)[:16]
    assert env["n_tables"] == len(spec["structure"]["modules"]) and env["n_rows"] == len(spec["structure"]["functions"])
    assert spec["max_steps"] == rw.HORIZON_LIMIT > SMALL.get("max_steps", 10)
    assert {t["tier"] for t in pool.heldout_tasks} == {"T0", "T1", "T2", "V"}
    assert all(t["answer"] is None for t in pool.tasks)


def test_raw_outputs_hold_signature_duplicates_that_dedup_collapses(pool, sigs):
    """Contents (L0) and reskins are new env_ids under a seen signature: the collapse is measurable."""
    identities = [tuple(sigs[e["env_id"]][k] for k in AXES) for e in pool.envs]
    assert len(set(e["env_id"] for e in pool.envs)) == len(pool.envs)
    assert len(set(identities)) < len(identities)
    first: dict[str, dict] = {}
    for env, identity in zip(pool.envs, identities):
        first.setdefault(env["world_id"], env)
        if env["skin_index"] > 0:
            base = first[env["world_id"]]
            assert identity == tuple(sigs[base["env_id"]][k] for k in AXES)
            assert sigs[env["env_id"]]["skin"] != sigs[base["env_id"]]["skin"]
    placebo = {tuple(sigs[e["env_id"]][k] for k in AXES) for e in pool.placebo_envs}
    assert len(placebo) == 1 and placebo < set(identities)


def test_t2_and_v_are_unseen_worlds_with_disjoint_vocabulary(pool, sigs):
    train_words = {w for e in pool.envs for w in e["vocabulary"]}
    train = {axis: {sigs[e["env_id"]][axis] for e in pool.envs} for axis in (*AXES, "skin")}
    by_tier = {tier: [e for e in pool.heldout_envs if e["tier"] == tier] for tier in ("T0", "T1", "T2", "V")}
    t2 = {axis: {sigs[e["env_id"]][axis] for e in by_tier["T2"]} for axis in (*AXES, "skin")}
    train_world_ids = {e["world_id"] for e in pool.envs}
    for tier in ("T2", "V"):
        for env in by_tier[tier]:
            assert not train_words & set(env["vocabulary"])
            assert all(word_pool(w) == "heldout" for w in env["vocabulary"])
            assert env["world_id"] not in train_world_ids
            for axis in (*AXES, "skin"):
                assert sigs[env["env_id"]][axis] not in train[axis]
                if tier == "V":
                    assert sigs[env["env_id"]][axis] not in t2[axis]
    train_identities = {tuple(sigs[e["env_id"]][k] for k in AXES) for e in pool.envs}
    for env in by_tier["T0"]:
        assert env["world_id"] in train_world_ids
        assert tuple(sigs[env["env_id"]][k] for k in AXES) in train_identities
    for env in by_tier["T1"]:
        assert env["world_id"] in train_world_ids
        assert tuple(sigs[env["env_id"]][k] for k in AXES) not in train_identities


# ---------------------------------------------------------------------------------------------- tasks


def test_every_reference_verifies_is_offered_and_a_noop_fails(pool, tiny_pools, specs):
    """The property test: every task of three pools (three seeds, every tier and the placebo)."""
    tasks = every_task(pool, *tiny_pools)
    assert {t["tier"] for t in tasks} >= {None, "T0", "T1", "T2", "V"}
    for task in tasks:
        spec = specs[task["env_id"]]
        noop = rw.Env(spec, task)
        noop.reset()
        verdict = noop.verify()
        assert not verdict.success and 0 < verdict.subgoals_met < verdict.subgoals_total
        env = rw.Env(spec, task)
        env.reset()
        calls = json.loads(task["reference"])
        assert len(calls) <= spec["max_steps"] and len(calls) == task["n_steps"] + 1
        assert task["skeleton"] == ">".join(c["name"] for c in calls[:-1])
        for call in calls:
            assert call in env.candidates(), (task["task_id"], call)
            assert "error" not in env.step(call).observation
        assert env.done and env.verify().success


def test_a_wrong_edit_fails_and_the_report_never_names_the_line(pool, specs):
    for task in pool.tasks + pool.heldout_tasks:
        goal = json.loads(task["goal"])
        path, line, text = goal["wrong_edit"].split(":", 2)
        env = rw.Env(specs[task["env_id"]], task)
        env.reset()
        observation = env.step({"name": "edit", "arguments": {"path": path, "line": int(line), "replacement": text}})
        assert "error" not in observation.observation
        assert not env.verify().success
        bug = goal["bug"]
        assert bug["text"].strip() not in task["instruction"] and bug["original"].strip() not in task["instruction"]
        assert f"line {bug['line']}" not in task["instruction"] and bug["path"] not in task["instruction"]


def test_the_verifier_runs_the_tests(pool, specs):
    """Fixing the bug and then breaking another function (another task's bug) fails the suite."""
    checked = 0
    by_env: dict[str, list[dict]] = {}
    for task in pool.tasks:
        by_env.setdefault(task["env_id"], []).append(task)
    for env_id, tasks in by_env.items():
        first, other = tasks[0], next((t for t in tasks[1:] if _bug(t)["line"] != _bug(tasks[0])["line"]), None)
        if other is None:
            continue
        env = rw.Env(specs[env_id], first)
        env.reset()
        _play(env, json.loads(first["reference"])[:-1])
        assert env.verify().success
        bug = _bug(other)
        read = "read_file" if specs[env_id]["structure"]["api"]["read"] == "file" else None
        if read:
            env.step({"name": "read_file", "arguments": {"path": bug["path"]}})
        env.step({"name": "edit", "arguments": {"path": bug["path"], "line": bug["line"], "replacement": bug["text"]}})
        verdict = env.verify()
        assert not verdict.success and verdict.subgoals_met < verdict.subgoals_total
        checked += 1
    assert checked >= 3


def _bug(task: dict) -> dict:
    return json.loads(task["goal"])["bug"]


def test_every_injected_bug_is_fixable_by_an_offered_rewrite(specs):
    """Each operator family is closed under its inverse on every site of every repository."""
    seen = set()
    for spec in list(specs.values())[:12]:
        repo = compile_repo(spec)
        for path, number, rewrite in mutation_sites(repo):
            assert inverse_offered(repo.lines[path][number - 1], rewrite.text, repo.context)
            seen.add(rewrite.operator)
    assert seen == set(OPERATORS)


@pytest.mark.parametrize(
    ("line", "operator", "rewritten"),
    [
        ("    if x.a > limit:", "flip_comparison", "    if x.a < limit:"),
        ("    if x.a > limit:", "boundary", "    if x.a >= limit:"),
        ("    return items[start:start + K]", "off_by_one", "    return items[start:start + K + 1]"),
        ("    return items[start:start + K + 1]", "off_by_one", "    return items[start:start + K]"),
        ("    value = clampo(total, low, high)", "swap_arguments", "    value = clampo(total, high, low)"),
        ("    total += x.a", "wrong_field", "    total += x.b"),
        ("        if not x.flag:", "negation", "        if x.flag:"),
        ("        if x.flag:", "negation", "        if not x.flag:"),
        ("SIZE = 3", "wrong_constant", "SIZE = 2"),
        ("    total += x.a", "wrong_operator", "    total -= x.a"),
        ("    return upper - lower", "wrong_operator", "    return upper + lower"),
    ],
)
def test_each_named_operator_rewrites_its_site(line, operator, rewritten):
    context = Context({"a": ("b",), "b": ("a",), "flag": ()}, frozenset({"clampo"}))
    offered = rewrites(line, context)
    assert rw.Rewrite(operator, rewritten) in offered
    assert any(r.text == line for r in rewrites(rewritten, context))
    assert rewrites('    """The a of x."""', context) == () == rewrites("def clampo(value, low, high):", context)


# ---------------------------------------------------------------------------------------------- time limit


def _looping_env(pool, specs) -> tuple[rw.Env, dict]:
    """An episode in a repository with a ``while`` loop whose step can be rewritten to ``+= 0``
    (one of the pool's, else the first sampled world that has one)."""
    episodes = [(specs[t["env_id"]], t) for t in pool.tasks]
    for seed in range(200):
        structure = rw_world.sample_world(seed)
        if any(f["template"] == "locate" for f in structure["functions"]):
            spec = rw_spec.build_spec(structure, rw_world.sample_content(structure, 1, "train"), "train", 1, 10)
            episodes.append((spec, rw.generate_tasks(spec, rw.env_id(spec), 1, 1)[0]))
            break
    for spec, task in episodes:
        for path, text in spec["files"].items():
            lines = text.split("\n")
            for k, line in enumerate(lines):
                if line.lstrip().startswith("while ") and lines[k + 1].rstrip().endswith("+= 1"):
                    env = rw.Env(spec, task)
                    env.reset()
                    stepped = lines[k + 1].strip().replace("+= 1", "+= 0")
                    return env, {"path": path, "line": k + 2, "replacement": stepped}
    raise AssertionError("no world with a loop")


def test_an_edit_that_loops_forever_is_stopped_and_fails(pool, specs):
    env, edit = _looping_env(pool, specs)
    if env.repo.api["read"] == "file":
        env.step({"name": "read_file", "arguments": {"path": edit["path"]}})
    assert "error" not in env.step({"name": "edit", "arguments": edit}).observation
    start = time.perf_counter()
    verdict = env.verify()
    assert time.perf_counter() - start < 10 * Limits().seconds
    assert not verdict.success
    result = env.suite(None)
    assert result.timed_out and not result.success


def test_the_runner_stops_on_its_line_budget_and_on_its_cpu_backstop():
    files = {
        "pkg/spin.py": "def spin(n):\n    while n >= 0:\n        n += 0\n    return n\n",
        "tests/test_spin.py": "from pkg.spin import spin\n\n\ndef test_spin():\n    assert spin(1) == 1\n\n\n"
        "def test_after():\n    assert 1 == 1\n",
    }
    tests = ["tests/test_spin.py"]
    by_lines = run_suite(files, tests, Limits(lines=5_000, seconds=60.0), cache=False)
    assert by_lines.timed_out and by_lines.passed == 0 and by_lines.total == 2
    start = time.perf_counter()
    by_clock = run_suite(files, tests, Limits(lines=10**12, seconds=0.3), cache=False)
    assert by_clock.timed_out and by_clock.out_of_time and time.perf_counter() - start < 3.0
    assert not by_lines.out_of_time
    fixed = {**files, "pkg/spin.py": "def spin(n):\n    return n\n"}
    assert run_suite(fixed, tests, cache=False).success


# ---------------------------------------------------------------------------------------------- baselines


def _baseline(pool, specs, memoriser) -> tuple[int, int]:
    rng = random.Random(0)
    t2 = [t for t in pool.heldout_tasks if t["tier"] == "T2"]
    successes = episodes = 0
    for _ in range(EPISODES_PER_TASK):
        for task in t2:
            env = rw.Env(specs[task["env_id"]], task)
            env.reset()
            history: tuple[str, ...] = ()
            while not env.done:
                candidates = env.candidates()
                keys = [canonical_json(c) for c in candidates]
                choice = None if memoriser is None else memoriser.choose(task["instruction"], history, keys)
                k = rng.randrange(len(candidates)) if choice is None else choice
                history += (keys[k],)
                env.step(candidates[k])
            successes += env.verify().success
            episodes += 1
    return successes, episodes


def test_a_random_policy_scores_below_a_tenth_on_t2(pool, specs):
    successes, episodes = _baseline(pool, specs, None)
    print(f"random policy on T2: {successes}/{episodes}")
    assert episodes >= 250 and successes / episodes < 0.10


def test_a_memoriser_of_training_references_scores_below_two_percent_on_t2(pool, specs):
    from axisrl.backends.tiny.evaluate import Memoriser

    memoriser = Memoriser(pool.tasks)
    successes, episodes = _baseline(pool, specs, memoriser)
    print(f"memoriser on T2: {successes}/{episodes}")
    assert episodes >= 250 and successes / episodes < 0.02


def test_candidates_are_a_few_dozen_and_edits_need_a_read(pool, specs):
    task = next(t for t in pool.heldout_tasks if t["tier"] == "T2")
    env = rw.Env(specs[task["env_id"]], task)
    env.reset()
    first = env.candidates()
    assert not any(c["name"] == "edit" for c in first) and first[-1] == {"name": "finish", "arguments": {}}
    assert first == env.candidates()
    sizes = []
    rng = random.Random(1)
    for task in [t for t in pool.heldout_tasks if t["tier"] == "T2"][:40]:
        env = rw.Env(specs[task["env_id"]], task)
        env.reset()
        while not env.done:
            candidates = env.candidates()
            sizes.append(len(candidates))
            env.step(rng.choice(candidates))
    assert max(sizes) <= 80 and sum(sizes) / len(sizes) <= 40


# ---------------------------------------------------------------------------------------------- signatures


def test_a_reskin_keeps_every_signature_but_the_skin(pool, specs, sigs):
    for env in pool.envs:
        if env["skin_index"] == 0 or env["variant_index"] != 0:
            continue
        first = next(e for e in pool.envs if e["world_id"] == env["world_id"] and e["skin_index"] == 0)
        a, b = sigs[first["env_id"]], sigs[env["env_id"]]
        assert {k for k in a if a[k] != b[k]} == {"skin"}
        assert env["vocabulary"] != first["vocabulary"]
        skinned, base = specs[env["env_id"]], specs[first["env_id"]]
        assert rw.tool_tokens(skinned) == rw.tool_tokens(base) and rw.schema_tokens(skinned) == rw.schema_tokens(base)

        def bugs(env_id: str) -> list[tuple]:
            goals = [json.loads(t["goal"]) for t in pool.tasks if t["env_id"] == env_id]
            return [(g["operator"], g["bug"]["line"], g["bug"]["original"].count(" ")) for g in goals]

        assert bugs(env["env_id"]) == bugs(first["env_id"])  # the same bugs, in the reskin's names


@pytest.mark.parametrize("world_seed", [3, 11])
def test_each_declared_edit_changes_its_own_level_and_only_it(world_seed):
    structure = rw_world.sample_world(world_seed)
    base = rw.signatures(rw_spec.build_spec(structure, rw_world.sample_content(structure, 2, "train"), "train", 4, 10))
    level_of = {"api": "sig_api", "schema": "sig_schema", "semantics": "sig_sem"}
    for level, edits in rw_world.edit_options(structure).items():
        assert edits, level
        for edit in edits:
            edited = rw_world.with_edit(structure, edit)
            content = rw_world.sample_content(edited, 2, "train")
            sig = rw.signatures(rw_spec.build_spec(edited, content, "train", 4, 10))
            assert {k for k in AXES if sig[k] != base[k]} == {level_of[level]}, edit


def test_token_sets_are_name_free(pool, specs):
    for env in pool.envs[:6] + [e for e in pool.heldout_envs if e["tier"] == "T2"][:6]:
        spec = specs[env["env_id"]]
        text = " ".join(rw.tool_tokens(spec) | rw.schema_tokens(spec) | rw.transition_tokens(spec))
        assert not set(env["vocabulary"]) & set(text.replace("/", " ").replace(".", " ").split())


# ---------------------------------------------------------------------------------------------- env and chat


def test_errors_come_back_as_observations(pool, specs):
    task = pool.tasks[0]
    env = rw.Env(specs[task["env_id"]], task)
    assert "error" in env.step({"name": "list_files", "arguments": {}}).observation
    env.reset()
    test_file = next(p for p in env.files if p.startswith("tests/"))
    source = env.repo.records_path
    for call in (
        {"name": "no_such_tool", "arguments": {}},
        {"name": "list_files", "arguments": "{not json"},
        {"name": "list_files", "arguments": {"extra": 1}},
        {"name": "edit", "arguments": {"path": test_file, "line": 1, "replacement": "x"}},
        {"name": "edit", "arguments": {"path": "nowhere.py", "line": 1, "replacement": "x"}},
        {"name": "edit", "arguments": {"path": source, "line": 10_000, "replacement": "x"}},
        {"name": "run_tests", "arguments": {"path": source}},
        "not a call",
    ):
        assert "error" in env.step(call).observation, call
    bug = _bug(task)
    refused = env.step({"name": "edit", "arguments": {"path": bug["path"], "line": bug["line"], "replacement": "pass"}})
    assert "offered" in refused.observation["error"]
    env.step({"name": "finish", "arguments": {}})
    assert env.done and "error" in env.step({"name": "list_files", "arguments": {}}).observation


def test_arguments_may_be_a_json_string_and_fork_is_independent(pool, specs):
    task = pool.tasks[0]
    calls = json.loads(task["reference"])
    as_dicts, as_strings = rw.Env(specs[task["env_id"]], task), rw.Env(specs[task["env_id"]], task)
    as_dicts.reset()
    as_strings.reset()
    at = next(k for k, c in enumerate(calls) if c["name"] == "edit")
    for call in calls[:at]:
        one = as_dicts.step(call).observation
        two = as_strings.step({"name": call["name"], "arguments": json.dumps(call["arguments"])}).observation
        assert one == two
    fork = as_dicts.fork()
    edit = calls[at]
    before = as_dicts.candidates()
    as_dicts.step(edit)
    assert as_dicts.verify().success and not fork.verify().success and fork.candidates() == before


def test_chat_rendering_has_toolworlds_shape_and_accepts_the_reference(pool, specs):
    for task in pool.tasks[:10] + [t for t in pool.heldout_tasks if t["tier"] == "T2"][:10]:
        spec = specs[task["env_id"]]
        chat = rw.render_chat(spec, task)
        assert set(chat) == {"messages", "tools"}
        assert [m["role"] for m in chat["messages"]] == ["system", "user"]
        assert chat["messages"][1]["content"] == task["instruction"]
        assert chat["tools"] == rw.tool_schemas(spec) and chat["tools"][-1]["function"]["name"] == "finish"
        by_name = {}
        for tool in chat["tools"]:
            assert tool["type"] == "function" and set(tool["function"]) == {"name", "description", "parameters"}
            jsonschema.Draft202012Validator.check_schema(tool["function"]["parameters"])
            by_name[tool["function"]["name"]] = tool["function"]["parameters"]
        env = rw.Env(spec, task)
        assert set(by_name) == set(env.tools)
        for call in json.loads(task["reference"]):
            jsonschema.validate(call["arguments"], by_name[call["name"]])


def test_the_verifier_is_the_dear_part(pool, specs):
    """Seconds per uncached suite run (what a verify costs): reported, and bounded loosely."""
    seconds = []
    for env in pool.heldout_envs[:10]:
        repo = compile_repo(specs[env["env_id"]])
        result = run_suite(repo.files, repo.test_paths, cache=False)
        assert result.success
        seconds.append(result.seconds)
    print(f"verifier: {sum(seconds) / len(seconds) * 1000:.1f} ms per uncached suite run")
    assert sum(seconds) / len(seconds) < 0.5


# ---------------------------------------------------------------------------------------------- the pipeline


@pytest.fixture
def registered():
    """repoworld as every stage and backend finds it (``axisrl.domains.load``)."""
    from axisrl import domains

    return domains.load("repoworld")


def test_dedup_reads_the_pool_and_collapses_its_raw_duplicates(pool, registered):
    from axisrl import dedup

    train = dedup.env_signatures(pl.DataFrame(pool.envs, schema=ENV_COLUMNS), "repoworld")
    heldout = dedup.env_signatures(pl.DataFrame(pool.heldout_envs, schema=ENV_COLUMNS), "repoworld")
    dedup.check_heldout_disjoint(train, heldout)
    stats = dedup.pool_stats(train, "train", "repoworld")
    print(f"dedup: {stats['n_raw']} raw training environments, {stats['n_distinct']} distinct at S1")
    assert stats["n_distinct"] < stats["n_raw"] and stats["n_worlds"] == SMALL["n_worlds"]
    assert 0 < stats["jaccard_tools"] <= 1 and 0 < stats["jaccard_schema"] <= 1


def test_the_llm_evaluation_loop_runs_the_domain_unchanged(pool, registered):
    """``llm_eval.evaluate`` with a scripted engine that writes each reference call as a hermes
    tool call: every episode verifies; an engine that finishes at once fails every one."""
    from axisrl.backends import llm_eval

    counts: dict[str, int] = {}
    for task in pool.heldout_tasks:
        counts[task["instruction"]] = counts.get(task["instruction"], 0) + 1
    tasks = [t for t in pool.heldout_tasks if t["tier"] == "T2" and counts[t["instruction"]] == 1][:8]
    envs = [e for e in pool.heldout_envs if e["env_id"] in {t["env_id"] for t in tasks}]
    references = {t["instruction"]: json.loads(t["reference"]) for t in tasks}

    rows = llm_eval.evaluate(Scripted(references), envs, tasks, "repoworld", max_turns=rw.HORIZON_LIMIT, workers=2)
    assert len(rows) == len(tasks) and all(r["success"] and r["errors"] == 0 for r in rows)
    rows = llm_eval.evaluate(
        Scripted(references, finish_at_once=True), envs, tasks, "repoworld", max_turns=rw.HORIZON_LIMIT, workers=2
    )
    assert not any(r["success"] for r in rows) and all(0 < r["partial"] < 1 for r in rows)
