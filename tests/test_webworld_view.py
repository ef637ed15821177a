"""webworld's compact view (``webworld.lexicon``): every reference plays through the view's
candidates, every token is structural or a symbol, a re-skinned site renders identically, views are
deterministic per episode seed, forks are independent, and the tiny policy's features build."""

from __future__ import annotations

import json
import random
import re
import statistics

import numpy as np
import pytest

from axisrl.backends.tiny.encoding import EpisodeFeatures
from axisrl.backends.tiny.rollout import call_key
from axisrl.backends.tiny.vocab import GOAL_HEADS, UNK, classify
from axisrl.config import validate_config
from axisrl.domains import load
from axisrl.domains import webworld as ww
from axisrl.domains.toolworld.canon import derive_seed
from axisrl.domains.webworld.lexicon import MAX_PAIRS, constraints

SMALL = {
    "n_worlds": 6,
    "variants_per_world": 3,
    "contents_per_variant": 2,
    "reskins_per_world": 1,
    "tasks_per_env": 8,
    "heldout": {
        "tasks_per_env": 4,
        "t0_envs": 3,
        "t1_envs": 3,
        "t2_worlds": 3,
        "t2_variants_per_world": 2,
        "validation_worlds": 2,
    },
}
"""The small pool of ``test_webworld`` (every family, tier and optional tool shows up)."""
PLACEBO = {"placebo_contents": 2, "placebo_tasks_per_env": 4}


@pytest.fixture(scope="module")
def pool(schema):
    cfg = validate_config({"synthesize": SMALL}, schema)["synthesize"]
    return ww.generate_pool({**cfg, **PLACEBO, "seed": 0})


@pytest.fixture(scope="module")
def specs(pool) -> dict[str, dict]:
    return {env["env_id"]: json.loads(env["spec"]) for env in [*pool.envs, *pool.heldout_envs, *pool.placebo_envs]}


@pytest.fixture(scope="module")
def tasks(pool) -> list[dict]:
    return [*pool.tasks, *pool.placebo_tasks, *pool.heldout_tasks]


def _start(spec: dict, task: dict, seed: int):
    env = ww.Env(spec, task)
    env.reset()
    return env, ww.compact_view(spec, task, seed, env)


def _take(env, view, k: int):
    call = view.call(k)
    result = env.step(call)
    view.push(call, result.observation)
    return result


def _replay(spec: dict, task: dict, seed: int, sizes: list[int] | None = None):
    """The reference played through the view: each call found among its candidates, stepped, pushed."""
    env, view = _start(spec, task, seed)
    for step, call in enumerate(json.loads(task["reference"])):
        keys = [call_key(view.call(k)) for k in range(len(view.candidates()))]
        assert call_key(call) in keys, (task["task_id"], step, call)
        if sizes is not None:
            sizes.append(len(keys))
        _take(env, view, keys.index(call_key(call)))
    return env, view


def _tokens(view) -> list[str]:
    values = [token for value in view.current().values for token in value]
    steps = [token for step in view.steps for part in step for token in part]
    return (
        [token for clause in view.goal for token in clause] + [t for tool in view.tools for t in tool] + steps + values
    )


def test_the_domain_loads_the_view():
    assert load("webworld").compact_view is ww.compact_view


def test_every_reference_plays_through_the_view_and_succeeds(specs, tasks):
    sizes: list[int] = []
    clauses = []
    for n, task in enumerate(tasks):
        env, view = _replay(specs[task["env_id"]], task, n, sizes)
        assert env.done and env.verify().success, task["task_id"]
        assert view.candidates() == []
        clauses.append(len(view.goal))
    print(
        f"webworld view: {len(tasks)} tasks, {statistics.mean(sizes):.1f} candidates per decision "
        f"(max {max(sizes)}), {statistics.mean(clauses):.1f} goal clauses per task"
    )


def test_every_token_is_structural_or_a_symbol(specs, tasks):
    for n, task in enumerate(tasks):
        _, view = _replay(specs[task["env_id"]], task, n)
        for token in _tokens(view):
            assert classify(token) != (-1, UNK), (task["task_id"], token)
        assert all(clause[0] in GOAL_HEADS and len(clause) <= 8 for clause in view.goal), view.goal
        assert all(len(step) - 1 <= MAX_PAIRS for step in view.steps)
        assert all(len(pair) == 2 for step in view.steps for pair in step[1:])


def test_goal_clauses_state_what_the_instruction_does(specs, tasks):
    """The constraints read from the instruction hold for the target, one per phrase; form values,
    the quantity and the question are clauses."""
    kinds = set()
    for n, task in enumerate(tasks):
        spec = specs[task["env_id"]]
        env, view = _start(spec, task, n)
        goal, site = json.loads(task["goal"]), env.site
        heads = [clause[0] for clause in view.goal]
        kinds.add(goal["kind"])
        assert heads.count("eq") >= len(goal.get("fields", {}))
        if goal["kind"] == "register":
            assert "exists" in heads and "ask_find" not in heads
            continue
        stated = constraints(site, task["instruction"], goal)
        phrases = re.findall(r" is (?:under |over )?\S+?(?=,|\.|\?| and |$)", task["instruction"].split(" whose ")[1])
        assert len(stated) == len(phrases) == heads.count("ask_find") >= 1, task["instruction"]
        item = site.items[goal["item"]]
        for sym, op, value in stated:
            actual = item.values[sym]
            a = site.attribute[sym]
            assert actual < value if op == "lt" else actual > value if op == "gt" else a.words[actual] == value
        if goal["kind"] == "buy":
            assert ["eq", view.name(site.quantity.name, "F"), f"#{goal['quantity']}"] in view.goal
        else:
            assert heads.count("ask") + heads.count("ask_aggregate") == 1 and "absent" in heads
    assert kinds == {"buy", "register", "lookup", "compare"}


def test_a_reskinned_site_renders_identically(specs, pool):
    """Same structure and content under another skin: the same tasks in other words, and the same
    tokens at every step of their references; no token holds a word of either vocabulary."""
    compared = 0
    for env_row in pool.envs[::4]:
        spec = specs[env_row["env_id"]]
        skinned = ww.reskin(spec, 9)
        assert skinned["lexicon"] != spec["lexicon"]
        words = set(ww.compile_site(spec).vocabulary()) | set(ww.compile_site(skinned).vocabulary())
        for task, other in zip(ww.generate_tasks(spec, "a", 4, 3), ww.generate_tasks(skinned, "b", 4, 3), strict=True):
            assert task["instruction"] != other["instruction"]
            seed = derive_seed(5, task["task_id"])
            _, view = _replay(spec, task, seed)
            _, view_b = _replay(skinned, other, seed)
            assert view_b.goal == view.goal and view_b.tools == view.tools and view_b.steps == view.steps
            assert not words & set(_tokens(view))
            compared += 1
    assert compared >= 8


def test_views_are_deterministic_and_another_seed_draws_other_slots(specs, tasks):
    for task in tasks[::7]:
        spec = specs[task["env_id"]]
        _, one = _replay(spec, task, 11)
        _, two = _replay(spec, task, 11)
        assert (one.goal, one.tools, one.steps) == (two.goal, two.tools, two.steps)
        assert one.current().values == two.current().values
        _, other = _replay(spec, task, 12)
        assert other.goal != one.goal and other.steps != one.steps
        shape = [[re.sub(r"\d+", "", t) for t in clause] for clause in other.goal]
        assert shape == [[re.sub(r"\d+", "", t) for t in clause] for clause in one.goal]


def test_a_forked_view_steps_independently(specs, tasks):
    for n, task in enumerate(tasks[::9]):
        spec = specs[task["env_id"]]
        env, view = _start(spec, task, n)
        reference = json.loads(task["reference"])
        for call in reference[: len(reference) // 2]:
            keys = [call_key(view.call(k)) for k in range(len(view.candidates()))]
            _take(env, view, keys.index(call_key(call)))
        before = ([call_key(view.call(k)) for k in range(len(view.candidates()))], list(view.candidates()))
        steps, values = list(view.steps), [list(v) for v in view.current().values]
        other_env = env.fork()
        other = view.fork(other_env)
        for _ in range(3):
            if other.candidates():
                _take(other_env, other, 0)
        assert ([call_key(view.call(k)) for k in range(len(view.candidates()))], view.candidates()) == before
        assert view.steps == steps and view.current().values == values
        assert len(other.steps) > len(view.steps)


def test_a_random_policy_builds_the_tiny_features(specs, tasks):
    rng = np.random.default_rng(0)
    pick = random.Random(0)
    for n, task in enumerate(pick.sample(tasks, 12)):
        env, view = _start(specs[task["env_id"]], task, n)
        features = EpisodeFeatures(view, False)
        while not env.done:
            decision = features.decision()
            assert decision.candidates.count == len(view.candidates()) > 0
            _take(env, view, int(rng.integers(len(view.candidates()))))
        features.decision()
        for token in _tokens(view):
            assert classify(token) != (-1, UNK), token
