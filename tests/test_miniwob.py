"""MiniWoB++ as a web domain: real episodes on real MiniWoB pages in a headless Chromium.

A scripted policy that reads the page it is shown solves instances of two tasks, a ``finish`` without
an action fails, episodes that share a browser tab are rebuilt by replay, and the pool has toolworld's
row shape. Then a few episodes run through the held-out evaluation loop with the transformers engine
and the tiny CPU model of ``test_hf_eval`` (it answers every turn with one known tool call), scored
exactly as the same text from a scripted engine and as the same call stepped by hand. Every test that
needs Chromium skips, naming why, where it (or chromedriver) is not installed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import gymnasium
import polars as pl
import pytest
from test_hf_eval import engine_of, model_dir  # noqa: F401 (model_dir: the tiny model fixture, built for `call`)
from test_vllm_eval import RECORD_KEYS, ScriptedEngine, script_key

from axisrl.backends.llm_eval import evaluate
from axisrl.domains import DOMAINS
from axisrl.domains import miniwob as mw
from axisrl.domains.canon import canonical_json
from axisrl.domains.miniwob.browser import shared_browser, task_url
from axisrl.domains.miniwob.pool import instance_key, make_spec, open_instance
from axisrl.domains.miniwob.tasks import family_tasks
from axisrl.domains.pool import Pool
from axisrl.domains.toolworld.model import FINISH
from axisrl.stages.pools import ENV_COLUMNS, TASK_COLUMNS

POOL_CONFIG = {
    "seed": 0,
    "n_worlds": 5,
    "variants_per_world": 2,
    "contents_per_variant": 1,
    "reskins_per_world": 0,
    "tasks_per_env": 3,
    "placebo_contents": 2,
    "placebo_tasks_per_env": 1,
    "tables": {"min": 2, "max": 4},
    "rows_per_table": {"min": 4, "max": 8},
    "max_steps": 6,
    "heldout": {
        "seed": 1000003,
        "tasks_per_env": 2,
        "t0_envs": 2,
        "t1_envs": 1,
        "t2_worlds": 1,
        "t2_variants_per_world": 1,
        "validation_worlds": 1,
    },
}
"""The first five training families (click-button to enter-text), one environment of each held-out tier."""
STAGE_ADDS = {"source", "defect"}
"""Columns no domain's rows carry: the synthesize stage adds ``source``, and ``defect`` is null for real rows."""


@pytest.fixture(scope="module")
def chromium() -> None:
    try:
        mw.chromium_paths()
    except mw.ChromiumUnavailable as error:
        pytest.skip(f"chromium not installed: {error}")


@pytest.fixture(scope="module")
def pool(chromium) -> Pool:
    return mw.generate_pool(POOL_CONFIG)


def spec_of(pool, task: Mapping[str, Any]) -> dict[str, Any]:
    envs = pool.envs + pool.heldout_envs + pool.placebo_envs
    return json.loads(next(env["spec"] for env in envs if env["env_id"] == task["env_id"]))


def instances(pool, name: str) -> list[dict[str, Any]]:
    """The training instances of task ``name``."""
    return [task for task in pool.tasks if spec_of(pool, task)["task"] == name]


def scripted_calls(name: str, instruction: str, page: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A correct solution read off the page: click the button the utterance quotes, or type the quoted
    word (in the case it asks for) into the text field and click the button."""
    word = re.search(r'"([^"]*)"', instruction).group(1)
    buttons = {e["text"]: e["ref"] for e in page if e.get("tag") == "button"}
    if name == "click-button":
        return [{"name": "click", "arguments": {"ref": buttons[word]}}]
    field = next(e["ref"] for e in page if e.get("tag") == "input_text")
    return [
        {"name": "type", "arguments": json.dumps({"ref": field, "text": word})},
        {"name": "click", "arguments": {"ref": buttons["Submit"]}},
    ]


def play(env: mw.MiniwobEnv, calls: list[dict[str, Any]]) -> list[Any]:
    return [env.step(call) for call in calls]


# ------------------------------------------------------------------------------ without a browser


def test_a_missing_chromium_or_driver_is_named_with_how_to_install_it(monkeypatch, tmp_path):
    monkeypatch.setenv("MINIWOB_CHROME_BINARY", str(tmp_path / "no-chromium"))
    monkeypatch.setenv("MINIWOB_CHROMEDRIVER", str(tmp_path / "no-chromedriver"))
    task = {"task_id": "t", "env_id": "e", "instruction": "Click.", "goal": canonical_json({"seed": 1, "page": []})}
    with pytest.raises(mw.ChromiumUnavailable, match="Chromium browser.*chromedriver.*apt-get install"):
        mw.MiniwobEnv(make_spec("click-button", 1, 5), task)


def test_the_chosen_tasks_are_installed_pages_in_disjoint_families_deterministic_where_miniwob_says_so():
    for name in mw.TASKS:
        assert task_url(name).startswith("file://")
    families = (mw.TRAIN_FAMILIES, mw.HELDOUT_FAMILIES, mw.VALIDATION_FAMILIES)
    assert sum(map(len, families)) == len(set().union(*families)) == len({t.family for t in mw.TASKS.values()})
    nondeterministic = {name for name in mw.TASKS if gymnasium.spec(f"miniwob/{name}-v1").nondeterministic}
    assert nondeterministic == {"search-engine", "social-media", "social-media-some", "social-media-all"}


def test_signatures_are_the_task_at_every_level_and_the_renderings_need_no_browser():
    one, content, other = (make_spec("enter-text", 1, 5), make_spec("enter-text", 2, 9), make_spec("login-user", 1, 5))
    assert mw.signatures(one) == mw.signatures(content)
    assert set(mw.signatures(one)) == {"sig_api", "sig_schema", "sig_sem", "sig_ver", "skin"}
    assert all(a != b for a, b in zip(mw.signatures(one).values(), mw.signatures(other).values()))
    assert mw.tool_tokens(one) == mw.tool_tokens(other)
    assert mw.schema_tokens(one) == {"task/enter-text", "family/enter-text"}
    assert mw.transition_tokens(other) == {"skill/type", "skill/click", "skill/several"}

    page = [{"ref": 5, "tag": "input_text", "value": ""}, {"ref": 6, "tag": "button", "text": "Submit"}]
    task = {"instruction": 'Enter "Ada" into the text field.', "goal": canonical_json({"seed": 3, "page": page})}
    chat = mw.render_chat(one, task)
    assert [m["role"] for m in chat["messages"]] == ["system", "user"]
    assert chat["messages"][1]["content"].startswith(task["instruction"])
    assert json.dumps(page, separators=(",", ":")) in chat["messages"][1]["content"]
    assert [tool["function"]["name"] for tool in chat["tools"]] == ["click", "type", "select", "press_key", FINISH]
    assert chat["tools"] == mw.tool_schemas(one)


# --------------------------------------------------------------------------------- real episodes


def test_a_scripted_policy_reading_the_page_solves_click_button_and_enter_text(pool):
    for name in ("click-button", "enter-text"):
        for task in instances(pool, name):
            env = mw.MiniwobEnv(spec_of(pool, task), task)
            start = env.reset()
            assert start["instruction"] == task["instruction"]
            calls = scripted_calls(name, start["instruction"], start["page"])
            results = play(env, calls)
            assert [r.done for r in results] == [False] * (len(calls) - 1) + [True]
            assert results[-1].observation == {"result": "the task ended"}
            verdict = env.verify()
            assert (verdict.success, verdict.reward, verdict.raw_reward, env.steps) == (True, 1.0, 1.0, len(calls))
            if name == "enter-text":  # the field shows what was typed
                typed = json.loads(calls[0]["arguments"])
                field = next(e for e in results[0].observation["page"] if e.get("ref") == typed["ref"])
                assert field["value"] == typed["text"]


def test_typing_replaces_the_fields_text_as_keystrokes_would(pool):
    task = instances(pool, "enter-text")[1]
    env = mw.MiniwobEnv(spec_of(pool, task), task)
    calls = scripted_calls("enter-text", task["instruction"], env.reset()["page"])
    field = json.loads(calls[0]["arguments"])["ref"]
    first = env.step({"name": "type", "arguments": {"ref": field, "text": "wrong words"}}).observation
    assert next(e for e in first["page"] if e.get("ref") == field)["value"] == "wrong words"
    play(env, calls)
    assert env.verify().success and env.steps == 3


def test_finishing_without_acting_or_clicking_the_wrong_button_fails(pool):
    task = instances(pool, "click-button")[0]
    env = mw.MiniwobEnv(spec_of(pool, task), task)
    page = env.reset()["page"]
    assert env.step({"name": FINISH, "arguments": {}}).done
    verdict = env.verify()
    assert (verdict.success, verdict.reward, verdict.raw_reward) == (False, 0.0, None)

    word = re.search(r'"([^"]*)"', task["instruction"]).group(1)
    wrong = next(e["ref"] for e in page if e.get("tag") == "button" and e["text"] != word)
    env.reset()
    assert env.step({"name": "click", "arguments": {"ref": wrong}}).done
    verdict = env.verify()
    assert (verdict.success, verdict.raw_reward) == (False, -1.0)


def test_bad_calls_are_observations_and_the_step_limit_ends_the_episode(pool):
    task = instances(pool, "enter-text")[0]
    spec = spec_of(pool, task)
    env = mw.MiniwobEnv(spec, task)
    page = env.reset()["page"]
    field = next(e["ref"] for e in page if e.get("tag") == "input_text")
    button = next(e["ref"] for e in page if e.get("tag") == "button")
    errors = [
        {"name": "click", "arguments": {"ref": 999}},
        {"name": "type", "arguments": {"ref": button, "text": "x"}},
        {"name": "select", "arguments": {"ref": field, "option": "x"}},
        {"name": "hover", "arguments": {}},
        {"name": "click", "arguments": "{not json"},
    ]
    for call in errors:
        result = env.step(call)
        assert set(result.observation) == {"error"} and not result.done
    result = env.step({"name": "click", "arguments": {"ref": field}})  # the sixth call: the limit
    assert result.done and "page" in result.observation
    assert env.steps == spec["max_steps"] and not env.verify().success
    assert env.step({"name": "click", "arguments": {"ref": field}}).observation == {"error": "the episode is over"}


def test_episodes_sharing_tabs_are_rebuilt_by_replay_and_a_fork_goes_its_own_way(pool):
    tasks = instances(pool, "enter-text")
    browser = shared_browser()
    tabs = browser.max_tabs
    browser.max_tabs = 2
    try:
        envs = [mw.MiniwobEnv(spec_of(pool, task), task) for task in tasks]
        pages = [env.reset()["page"] for env in envs]
        plans = [scripted_calls("enter-text", task["instruction"], page) for task, page in zip(tasks, pages)]
        for env, plan in zip(envs, plans):  # three episodes on two tabs: each type evicts another episode
            env.step(plan[0])
        forked = envs[0].fork()
        assert [env.step(plan[1]).done for env, plan in zip(envs, plans)] == [True] * 3
        assert all(env.verify().success for env in envs)
        assert forked.step({"name": "click", "arguments": {"ref": 999}}).observation["error"].startswith("no element")
        assert forked.step(plans[0][1]).observation == {"result": "the task ended"}
        assert forked.verify().success and forked.steps == 3
    finally:
        browser.max_tabs = tabs


def test_the_pool_has_toolworlds_row_shape_and_keeps_held_out_tasks_apart(pool):
    for rows, columns in (
        (pool.envs + pool.heldout_envs + pool.placebo_envs, ENV_COLUMNS),
        (pool.tasks + pool.heldout_tasks + pool.placebo_tasks, TASK_COLUMNS),
    ):
        assert all(set(row) == set(columns) - STAGE_ADDS for row in rows)
        pl.DataFrame(rows, schema=columns)  # the synthesize stage's frame
    trained = [family_tasks(family)[0] for family in mw.TRAIN_FAMILIES[:5]]
    assert [json.loads(env["spec"])["task"] for env in pool.envs] == trained
    assert {env["tier"] for env in pool.heldout_envs} == {"T0", "T1", "T2", "V"}
    assert all(t["reference"] == "[]" and t["answer"] is None for t in pool.tasks + pool.heldout_tasks)
    assert len(pool.tasks) == 5 * 3 and len(pool.placebo_envs) == 2

    train = {json.loads(env["spec"])["task"] for env in pool.envs}
    by_tier = {
        tier: {spec_of(pool, t)["task"] for t in pool.heldout_tasks if t["tier"] == tier} for tier in ("T0", "T1", "T2")
    }
    assert by_tier["T0"] <= train and not by_tier["T1"] & train and not by_tier["T2"] & train
    assert {mw.TASKS[name].family for name in by_tier["T1"]} <= set(mw.TRAIN_FAMILIES[:5])
    seen = {instance_key(open_instance(spec_of(pool, t)["task"], json.loads(t["goal"])["seed"])) for t in pool.tasks}
    for task in pool.heldout_tasks:
        if task["tier"] == "T0":
            state = open_instance(spec_of(pool, task)["task"], json.loads(task["goal"])["seed"])
            assert instance_key(state) not in seen and state.utterance == task["instruction"]


def test_generating_the_same_environment_twice_gives_the_same_tasks(pool):
    env = pool.envs[0]
    again, _ = mw.generate_tasks(json.loads(env["spec"]), env["env_id"], POOL_CONFIG["tasks_per_env"])
    assert again == [{k: v for k, v in t.items() if k not in ("split", "tier")} for t in pool.tasks[:3]]


# --------------------------------------------------------------- the evaluation loop and the HF engine


@pytest.fixture(scope="module")
def eval_tasks(pool) -> list[dict[str, Any]]:
    """Two click-button instances and an enter-text one (training) and a click-option one (T2)."""
    held_out = next(task for task in pool.heldout_tasks if task["tier"] == "T2")
    return [*instances(pool, "click-button")[:2], instances(pool, "enter-text")[0], held_out]


@pytest.fixture(scope="module")
def call(eval_tasks) -> dict[str, Any]:
    """What the tiny model calls every turn: the right click for the first instance."""
    task = eval_tasks[0]
    return scripted_calls("click-button", task["instruction"], json.loads(task["goal"])["page"])[0]


def stepped_by_hand(pool, task: Mapping[str, Any], call: Mapping[str, Any], max_turns: int) -> tuple[bool, int]:
    """Success and steps of ``call`` repeated as the loop executes it (not on the last turn)."""
    env = mw.MiniwobEnv(spec_of(pool, task), task)
    env.reset()
    for _ in range(max_turns - 1):
        if env.step({"name": call["name"], "arguments": json.dumps(call["arguments"])}).done:
            break
    return env.verify().success, env.steps


def test_real_episodes_through_the_hf_evaluation_loop_with_the_tiny_model(pool, eval_tasks, call, model_dir):  # noqa: F811
    """Needs "miniwob" in ``axisrl.domains.DOMAINS``: the loop reaches a domain only by name."""
    assert "miniwob" in DOMAINS, 'the miniwob domain is not registered: add "miniwob" to DOMAINS in axisrl.domains'
    envs = pool.envs + pool.heldout_envs
    rows = evaluate(engine_of(model_dir), envs, eval_tasks, "miniwob", max_turns=3)
    assert [row["task_id"] for row in rows] == [task["task_id"] for task in eval_tasks]
    assert all(set(row) == RECORD_KEYS for row in rows)
    assert [row["env_id"] for row in rows] == [task["env_id"] for task in eval_tasks]
    assert [row["tier"] for row in rows] == [None, None, None, "T2"]
    first = rows[0]
    assert (first["success"], first["reward"], first["steps"], first["tool_calls"]) == (True, 1.0, 1, 1)
    for row, task in zip(rows, eval_tasks):
        assert (row["success"], row["steps"]) == stepped_by_hand(pool, task, call, max_turns=3)
        assert row["reward"] == float(row["success"])

    answer = f"<tool_call>{json.dumps(call)}</tool_call>"
    chats = [mw.render_chat(spec_of(pool, task), task)["messages"] for task in eval_tasks]
    scripted = ScriptedEngine({script_key(chat): [answer] * 3 for chat in chats})
    assert rows == evaluate(scripted, envs, eval_tasks, "miniwob", max_turns=3)
