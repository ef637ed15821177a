"""toolworld: determinism, held-out disjointness, the task filter, signatures, env errors, the chat rendering."""

from __future__ import annotations

import json
import random
from dataclasses import replace

import jsonschema
import polars as pl
import pytest
from domain_fixtures import ENV_ROW, SMALL, TASK_ROW, every_spec, synthesize

from axisrl.config import validate_config
from axisrl.domains import levels
from axisrl.domains import toolworld as tw
from axisrl.domains.canon import canonical_json
from axisrl.domains.toolworld import drafts as tw_drafts
from axisrl.domains.toolworld import tasks as tw_tasks
from axisrl.domains.toolworld.lexicon import HELDOUT_MARKERS, SYLLABLES, make_word, word_pool
from axisrl.domains.toolworld.runtime import compile_spec

ENV_AXES = ("sig_api", "sig_schema", "sig_sem", "sig_ver")


@pytest.fixture(scope="module")
def cfg(schema) -> dict:
    return synthesize(schema, SMALL)


@pytest.fixture(scope="module")
def pool(cfg) -> tw.Pool:
    return tw.generate_pool(cfg)


@pytest.fixture(scope="module")
def specs(pool) -> dict[str, dict]:
    return every_spec(pool)


@pytest.fixture(scope="module")
def sigs(specs) -> dict[str, dict]:
    return {env: tw.signatures(spec) for env, spec in specs.items()}


def all_tasks(pool: tw.Pool) -> list[dict]:
    return pool.tasks + pool.heldout_tasks


def replay(spec: dict, task: dict, calls: list[dict]) -> tw.ToolworldEnv:
    env = tw.ToolworldEnv(spec, task)
    env.reset()
    for call in calls:
        env.step(call)
    return env


def first_spec(specs: dict, pool: tw.Pool, predicate) -> dict:
    for env in pool.envs:
        spec = specs[env["env_id"]]
        if predicate(compile_spec(spec)):
            return spec
    raise AssertionError("no training environment matches; enlarge SMALL")


# ------------------------------------------------------------------------------------------ pool


def test_same_config_gives_a_byte_identical_pool_and_another_seed_does_not(cfg, pool):
    def dump(p: tw.Pool) -> str:
        return canonical_json([p.envs, p.tasks, p.heldout_envs, p.heldout_tasks])

    assert dump(tw.generate_pool(cfg)) == dump(pool)
    assert dump(tw.generate_pool({**cfg, "seed": cfg["seed"] + 1})) != dump(pool)


def test_pool_rows_have_the_documented_columns_and_counts(cfg, pool):
    assert all(set(env) == ENV_ROW for env in pool.envs + pool.heldout_envs)
    assert all(set(task) == TASK_ROW for task in all_tasks(pool))
    envs = pl.DataFrame(pool.envs, infer_schema_length=None)
    tasks = pl.DataFrame(pool.tasks, infer_schema_length=None)
    assert envs.schema["edits"] == pl.List(pl.String) and envs.schema["vocabulary"] == pl.List(pl.String)
    assert tasks.schema["n_steps"] == pl.Int64 and tasks.schema["answer"] == pl.String

    expected = cfg["n_worlds"] * (cfg["variants_per_world"] * cfg["contents_per_variant"] + cfg["reskins_per_world"])
    assert envs.height == expected == envs["env_id"].n_unique()
    assert tasks["task_id"].n_unique() == tasks.height
    per_env = tasks.group_by("env_id").len()["len"]
    assert per_env.max() <= cfg["tasks_per_env"] and per_env.min() >= cfg["tasks_per_env"] // 2
    held = cfg["heldout"]
    tiers = pl.DataFrame(pool.heldout_envs)["tier"].value_counts().sort("tier")
    assert tiers.rows() == [
        ("T0", held["t0_envs"]),
        ("T1", held["t1_envs"]),
        ("T2", held["t2_worlds"] * held["t2_variants_per_world"]),
        ("V", held["validation_worlds"] * held["t2_variants_per_world"]),
    ]
    assert {t["split"] for t in pool.heldout_tasks} == {"heldout"} and {t["tier"] for t in pool.tasks} == {None}
    # a task's skill signature is finer than its bare skeleton
    assert tasks["skill_sig"].n_unique() > tasks["skeleton"].n_unique()


def test_heldout_t2_shares_no_signature_vocabulary_word_or_skin_with_training(pool, sigs):
    train = [sigs[env["env_id"]] for env in pool.envs]
    t2 = [env for env in pool.heldout_envs if env["tier"] == "T2"]
    for axis in ("sig_api", "sig_schema", "sig_sem", "skin"):
        seen = {s[axis] for s in train}
        assert not [env for env in t2 if sigs[env["env_id"]][axis] in seen], axis
    train_words = {word for env in pool.envs for word in env["vocabulary"]}
    t2_words = {word for env in t2 for word in env["vocabulary"]}
    assert t2_words and not train_words & t2_words
    assert {word_pool(w) for w in train_words} == {"train"} and {word_pool(w) for w in t2_words} == {"heldout"}
    assert not {env["world_id"] for env in t2} & {env["world_id"] for env in pool.envs}


def test_validation_worlds_are_unseen_by_training_and_t2_and_leave_the_test_tiers_as_they_were(cfg, pool, sigs):
    """V is made like T2 from a seed range of its own: no signature, skin, training word or world
    in common with training or T2; asking for it changes no training or test row."""
    unseen = {tier: [env for env in pool.heldout_envs if env["tier"] == tier] for tier in ("T2", "V")}
    assert unseen["V"]
    for axis in ("sig_api", "sig_schema", "sig_sem", "skin"):
        taken = {sigs[env["env_id"]][axis] for env in pool.envs + unseen["T2"]}
        assert not [env for env in unseen["V"] if sigs[env["env_id"]][axis] in taken], axis
    train_words = {word for env in pool.envs for word in env["vocabulary"]}
    assert not train_words & {word for env in unseen["V"] for word in env["vocabulary"]}
    worlds = {env["world_id"] for env in pool.envs + unseen["T2"]}
    assert not worlds & {env["world_id"] for env in unseen["V"]}
    without = tw.generate_pool({**cfg, "heldout": {**cfg["heldout"], "validation_worlds": 0}})
    tested = [task for task in pool.heldout_tasks if task["tier"] != "V"]
    assert (without.envs, without.tasks, without.heldout_tasks) == (pool.envs, pool.tasks, tested)


def test_t0_is_seen_environment_new_content_and_t1_is_seen_world_unseen_variant(pool, sigs):
    train_full = {tuple(sigs[env["env_id"]][a] for a in ENV_AXES) for env in pool.envs}
    train_s1 = {full[:3] for full in train_full}
    train_worlds = {env["world_id"] for env in pool.envs}
    train_ids = {env["env_id"] for env in pool.envs}
    for env in pool.heldout_envs:
        full = tuple(sigs[env["env_id"]][a] for a in ENV_AXES)
        assert env["env_id"] not in train_ids
        if env["tier"] == "T0":
            assert full in train_full and env["world_id"] in train_worlds
        elif env["tier"] == "T1":
            assert full[:3] not in train_s1 and env["world_id"] in train_worlds and env["edits"]


def test_t2_rejection_sampling_fails_loudly_when_it_cannot_succeed(cfg, monkeypatch):
    monkeypatch.setattr(levels, "T2_WORLD_ATTEMPTS", 0)
    with pytest.raises(ValueError, match="T2"):
        tw.generate_pool({**cfg, "n_worlds": 1, "variants_per_world": 1})


# ----------------------------------------------------------------------------------------- tasks


def test_every_reference_verifies_and_a_noop_run_fails(pool, specs):
    for task in all_tasks(pool):
        spec = specs[task["env_id"]]
        calls = json.loads(task["reference"])
        result = replay(spec, task, calls).verify()
        assert result.success and result.reward == 1.0 and result.subgoals_met == result.subgoals_total, task
        noop = replay(spec, task, [{"name": "finish", "arguments": {}}]).verify()
        assert not noop.success and noop.reward == 0.0, task
        assert task["n_steps"] == len(calls) - 1 and calls[-1]["name"] == "finish"


def test_every_truncated_reference_fails(pool, specs):
    for task in all_tasks(pool):
        calls = json.loads(task["reference"])
        for k in range(1, len(calls) - 1):
            env = replay(specs[task["env_id"]], task, calls[:k] + [{"name": "finish", "arguments": {}}])
            assert not env.verify().success, (task["skeleton"], k)


def test_rebinding_a_write_task_to_another_row_fails(pool, specs):
    """The wrong-entity check, redone from outside: the same calls on every other row of the table."""
    checked = 0
    for task in pool.tasks:
        calls = json.loads(task["reference"])
        spec = specs[task["env_id"]]
        rt = compile_spec(spec)
        tool = rt.tool_by_name[calls[0]["name"]]
        if task["answer"] is not None or tool.prim != "lookup":
            continue
        env = replay(spec, task, [])
        original = env.step(calls[0]).observation["result"][rt.id_name]
        key = calls[0]["arguments"]
        for row in rt.initial[tool.table].values():
            if row["f0"] == next(iter(key.values())):
                continue
            env = replay(spec, task, [])
            swapped = env.step({"name": calls[0]["name"], "arguments": {k: row["f0"] for k in key}})
            new_id = swapped.observation["result"][rt.id_name]
            for call in calls[1:]:
                env.step(json.loads(json.dumps(call).replace(json.dumps(original), json.dumps(new_id))))
            assert not env.verify().success, (task["instruction"], row["f0"])
            checked += 1
    assert checked > 50


def test_read_tasks_need_the_right_answer(pool, specs):
    reads = [t for t in pool.tasks if t["answer"] is not None]
    assert reads
    for task in reads:
        calls = json.loads(task["reference"])
        wrong = calls[:-1] + [{"name": "finish", "arguments": {"answer": task["answer"] + "x"}}]
        assert not replay(specs[task["env_id"]], task, wrong).verify().success


def test_references_fit_the_step_limit(pool, specs):
    env = pool.envs[0]
    spec = {**specs[env["env_id"]], "max_steps": 3}
    tasks = tw.generate_tasks(spec, env["env_id"], 10, seed=1)
    assert tasks and max(t["n_steps"] for t in tasks) <= 2
    for task in tasks:
        assert replay(spec, task, json.loads(task["reference"])).verify().success


def test_answer_matching_follows_the_verifier_mode(pool, specs):
    task = next(t for t in pool.tasks if t["answer"] is not None and t["answer"].isdigit())
    calls = json.loads(task["reference"])[:-1] + [{"name": "finish", "arguments": {"answer": f" {task['answer']}.0 "}}]
    spec = specs[task["env_id"]]
    assert replay(tw.with_verifier(spec, answer_mode="normalized"), task, calls).verify().success
    assert not replay(tw.with_verifier(spec, answer_mode="exact"), task, calls).verify().success


def test_the_filter_rejects_drafts_whose_wrong_entity_or_prefix_passes(pool, specs):
    spec = specs[pool.envs[0]["env_id"]]
    rt = compile_spec(spec)
    ctx = tw_drafts.Context(rt)
    drafts = [
        builder(ctx, random.Random(k), *binding)
        for k, (builder, binding) in enumerate(b for group in tw_drafts.bindings(ctx).values() for b in group)
    ]
    kept = [d for d in drafts if d is not None and tw_tasks._filter(rt, d) is not None]
    writes = [replace(d) for d in kept if d.answer is None]
    assert kept and writes
    for draft in kept:
        draft.wrong_plan, draft.wrong_answer = draft.plan, draft.answer
        assert tw_tasks._filter(rt, draft) is None
    for draft in writes:
        draft.plan = draft.plan + draft.plan[:1]  # a redundant trailing read: its prefix already passes
        assert tw_tasks._filter(rt, draft) is None


def test_collateral_changes_fail_only_when_the_verifier_checks_them(pool, specs):
    checked = 0
    for task in pool.tasks:
        spec = specs[task["env_id"]]
        rt = compile_spec(spec)
        calls = json.loads(task["reference"])
        if task["answer"] is not None or rt.tool_by_name[calls[0]["name"]].prim != "lookup":
            continue
        # one extra row created after the reference: outside the footprint
        creators = [t for t in rt.tools if t.prim == "create"]
        if not creators:
            continue
        create = creators[0]
        extra = {
            "name": create.name,
            "arguments": {
                p.name: (
                    "Zzzz"
                    if p.kind == "key"
                    else 1
                    if p.kind == "int"
                    else rt.tables[create.table].by_sym[p.field].words[0]
                )
                for p in create.params
            },
        }
        polluted = calls[:-1] + [extra, calls[-1]]
        assert replay(tw.with_verifier(spec, collateral=False), task, polluted).verify().success
        result = replay(tw.with_verifier(spec, collateral=True), task, polluted).verify()
        assert not result.success and result.subgoals_met == result.subgoals_total - 1
        checked += 1
    assert checked > 5


def test_lexicon_pools_are_disjoint_by_construction():
    train, held = SYLLABLES["train"], SYLLABLES["heldout"]
    assert all(not HELDOUT_MARKERS & set(s) for s in train)
    assert all(HELDOUT_MARKERS & set(s) for s in held)
    rng = random.Random(0)
    words = {pool: {make_word(rng, pool) for _ in range(2000)} for pool in SYLLABLES}
    assert not words["train"] & words["heldout"]
    assert {word_pool(w) for w in words["heldout"]} == {"heldout"}


# ------------------------------------------------------------------------------------ signatures


def test_a_reskin_keeps_every_signature_but_the_skin(pool, specs, sigs):
    spec = specs[pool.envs[0]["env_id"]]
    skinned = tw.reskin(spec, 11)
    original, other = sigs[pool.envs[0]["env_id"]], tw.signatures(skinned)
    assert all(original[a] == other[a] for a in ENV_AXES)
    assert original["skin"] != other["skin"] and tw.env_id(skinned) != tw.env_id(spec)
    assert set(compile_spec(skinned).vocabulary()).isdisjoint(compile_spec(spec).vocabulary())
    # the pool's own re-skins too
    for env in pool.envs:
        if env["skin_index"]:
            base = next(b for b in pool.envs if b["world_id"] == env["world_id"] and b["skin_index"] == 0)
            assert all(sigs[env["env_id"]][a] == sigs[base["env_id"]][a] for a in ENV_AXES)
            assert sigs[env["env_id"]]["skin"] != sigs[base["env_id"]]["skin"]


def test_structurally_different_worlds_get_different_api_and_schema_signatures(pool, sigs):
    bases = list({env["world_id"]: sigs[env["env_id"]] for env in pool.envs if env["variant_index"] == 0}.values())
    assert len({s["sig_api"] for s in bases}) > len(bases) // 2
    assert len({s["sig_schema"] for s in bases}) > len(bases) // 2


@pytest.mark.parametrize(
    ("needs", "change"),
    [
        (lambda rt: any(t.prim == "update" for t in rt.tools), "update_mode"),
        (lambda rt: any(t.prim == "delete" for t in rt.tools), "delete_mode"),
        (lambda rt: any(t.prim == "transition" for t in rt.tools) and len(rt.edges) < 6, "guard"),
    ],
)
def test_semantic_fingerprint_separates_variants_that_differ_only_in_semantics(pool, specs, needs, change):
    spec = first_spec(specs, pool, needs)
    values = {"update_mode": ("overwrite", "increment"), "delete_mode": ("hard", "soft"), "guard": (True, False)}
    a, b = (tw.signatures(tw.with_semantics(spec, **{change: v})) for v in values[change])
    assert a["sig_api"] == b["sig_api"] and a["sig_schema"] == b["sig_schema"] and a["sig_ver"] == b["sig_ver"]
    assert a["sig_sem"] != b["sig_sem"]
    tokens = [tw.transition_tokens(tw.with_semantics(spec, **{change: v})) for v in values[change]]
    assert tokens[0] != tokens[1]
    assert tw.tool_tokens(tw.with_semantics(spec, **{change: values[change][0]})) == tw.tool_tokens(
        tw.with_semantics(spec, **{change: values[change][1]})
    )


def test_extending_an_enum_is_a_schema_change_not_an_api_change(pool, specs):
    spec = first_spec(specs, pool, lambda rt: any(t.of_type("enum") for t in rt.tables.values()))
    wider = json.loads(json.dumps(spec))
    table = next(t for t in wider["tables"] if any(f["type"] == "enum" for f in t["fields"]))
    field = next(f for f in table["fields"] if f["type"] == "enum")
    wider["lexicon"][f"{table['sym']}.{field['sym']}.v{field['size']}"] = "zzextra"
    field["size"] += 1
    a, b = tw.signatures(spec), tw.signatures(wider)
    assert a["sig_api"] == b["sig_api"] and a["sig_schema"] != b["sig_schema"]


def test_token_sets_are_name_free(pool, specs):
    spec = specs[pool.envs[0]["env_id"]]
    skinned = tw.reskin(spec, 5)
    for tokens in (tw.tool_tokens, tw.schema_tokens, tw.transition_tokens):
        assert tokens(spec) == tokens(skinned) and tokens(spec)
    assert any(token.startswith(("update/", "lookup/")) for token in tw.tool_tokens(spec))


# ------------------------------------------------------------------------------------------- env


def test_env_errors_come_back_as_observations(pool, specs):
    spec = first_spec(
        specs,
        pool,
        lambda rt: (
            any(t.prim == "transition" for t in rt.tools) and any(t.prim == "get" for t in rt.tools) and rt.guard
        ),
    )
    rt = compile_spec(spec)
    task = {"instruction": "probe", "goal": {"checks": [], "footprint": [], "answer_type": None, "query": None}}
    get = next(t for t in rt.tools if t.prim == "get")
    move = next(t for t in rt.tools if t.prim == "transition")
    status = rt.tables[move.table].by_sym[rt.status_field]
    ident, row = next(iter(rt.initial[move.table].items()))
    blocked = next(s for s in range(status.size) if (row[rt.status_field], s) not in rt.edges)
    missing = max(rt.initial[get.table]) + 1
    bad_calls = [
        {"name": "no_such_tool", "arguments": {}},
        "not a call",
        {"name": get.name, "arguments": "{not json"},
        {"name": get.name, "arguments": {}},
        {"name": get.name, "arguments": {rt.id_name: "??"}},
        {"name": get.name, "arguments": {rt.id_name: rt.render_id(get.table, missing)}},
        {"name": get.name, "arguments": {rt.id_name: rt.render_id(get.table, 1), "extra": 1}},
        {"name": move.name, "arguments": {rt.id_name: rt.render_id(move.table, ident), move.params[1].name: "zzz"}},
        {
            "name": move.name,
            "arguments": {rt.id_name: rt.render_id(move.table, ident), move.params[1].name: status.words[blocked]},
        },
    ]
    env = tw.ToolworldEnv({**spec, "max_steps": len(bad_calls) + 1}, task)
    env.reset()
    for call in bad_calls:
        result = env.step(call)
        assert set(result.observation) == {"error"} and not result.done, call
    ok = env.step({"name": get.name, "arguments": json.dumps({rt.id_name: rt.render_id(move.table, ident)})})
    assert "result" in ok.observation and ok.done  # the step limit ends the episode
    assert "error" in env.step({"name": "finish", "arguments": {}}).observation


def test_reset_restores_the_initial_state(pool, specs):
    task = next(t for t in pool.tasks if t["answer"] is None)
    spec = specs[task["env_id"]]
    env = replay(spec, task, json.loads(task["reference"]))
    assert env.verify().success
    env.reset()
    assert not env.verify().success and env.state == compile_spec(spec).initial


# ------------------------------------------------------------------------------------------ chat


def test_chat_tools_are_json_schema_and_accept_the_reference_calls(pool, specs):
    by_env: dict[str, list[dict]] = {}
    for task in pool.tasks:
        by_env.setdefault(task["env_id"], []).append(task)
    for env_id, tasks in by_env.items():
        chat = tw.render_chat(specs[env_id], tasks[0])
        assert [m["role"] for m in chat["messages"]] == ["system", "user"]
        assert chat["messages"][1]["content"] == tasks[0]["instruction"]
        schemas = {}
        for tool in chat["tools"]:
            assert tool["type"] == "function"
            jsonschema.Draft202012Validator.check_schema(tool["function"]["parameters"])
            schemas[tool["function"]["name"]] = tool["function"]["parameters"]
        assert "finish" in schemas and len(schemas) == len(chat["tools"])
        for task in tasks:
            for call in json.loads(task["reference"]):
                jsonschema.validate(call["arguments"], schemas[call["name"]])
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({"unexpected": 1}, next(iter(schemas.values())))
    assert tw.observation_json({"result": {"b": 1, "a": [1, 2]}}) == '{"result":{"a":[1,2],"b":1}}'


# ----------------------------------------------------------------------------------------- pretraining pool


def test_the_pretraining_pool_shares_no_signature_word_or_world_with_the_studys_pools(cfg, pool, schema):
    """Tier P, from its own seed range: none of its sig_api, sig_schema, sig_sem or skin occurs in
    the training, placebo or held-out pools (T0-T2 and V) or in another of its worlds; no word in
    common with the unseen tiers (T2, V: it is named from the training lexicon); every task has a
    reference solution to clone."""
    pretrain = {**validate_config({}, schema)["pretrain"], "worlds": 3, "tasks_per_env": 4}
    study = pool.envs + pool.placebo_envs + pool.heldout_envs
    study_sigs = [tw.signatures(json.loads(env["spec"])) for env in study]
    taken = {axis: {sig[axis] for sig in study_sigs} for axis in ("sig_api", "sig_schema", "sig_sem", "skin")}
    envs, tasks = tw.generate_pretrain_pool(cfg, pretrain, taken)
    assert len(envs) == 3 * pretrain["variants_per_world"]
    assert {env["tier"] for env in envs} == {task["tier"] for task in tasks} == {tw.PRETRAIN_TIER}
    own = [tw.signatures(json.loads(env["spec"])) for env in envs]
    for axis in taken:
        assert not {sig[axis] for sig in own} & taken[axis], axis
    worlds = {env["world_id"]: [] for env in envs}
    for env, sig in zip(envs, own):
        worlds[env["world_id"]].append(sig["sig_api"])
    for world, apis in worlds.items():
        others = {api for other, seen in worlds.items() if other != world for api in seen}
        assert not set(apis) & others
    heldout_words = {word for env in pool.heldout_envs if env["tier"] in ("T2", "V") for word in env["vocabulary"]}
    assert not heldout_words & {word for env in envs for word in env["vocabulary"]}
    assert not {env["world_id"] for env in study} & set(worlds)
    assert all(json.loads(task["reference"]) for task in tasks)
    assert tw.generate_pretrain_pool(cfg, pretrain, taken) == (envs, tasks)
