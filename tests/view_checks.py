"""What every domain's compact view is checked for, shared by ``test_<domain>_view.py``: the module's
pool fixtures, episodes started and stepped through the view, the reference of every task played
through its candidates to a verified success, every token structural or a symbol, a re-skin rendering
the same tokens, views deterministic per seed, forks independent, and the tiny policy's features."""

from __future__ import annotations

import json
import random
import re
import statistics
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from domain_fixtures import every_spec, every_task

from axisrl.backends.tiny.encoding import EpisodeFeatures
from axisrl.backends.tiny.rollout import call_key
from axisrl.backends.tiny.vocab import GOAL_HEADS, UNK, classify
from axisrl.domains.canon import derive_seed


def fixtures(make_pool: Callable[[dict], Any]):
    """A view test module's module-scoped fixtures, to assign by these names: ``pool`` (``make_pool(schema)``),
    its ``specs`` by env id and its ``tasks`` (``domain_fixtures.every_spec``, ``every_task``)."""

    @pytest.fixture(scope="module")
    def pool(schema):
        return make_pool(schema)

    @pytest.fixture(scope="module")
    def specs(pool) -> dict[str, dict]:
        return every_spec(pool)

    @pytest.fixture(scope="module")
    def tasks(pool) -> list[dict]:
        return every_task(pool)

    return pool, specs, tasks


def start(domain: ModuleType, spec: dict, task: dict, seed: int):
    """The domain's environment, reset, and its compact view at the episode's start."""
    env = domain.Env(spec, task)
    env.reset()
    return env, domain.compact_view(spec, task, seed, env)


def keys(view) -> list[str]:
    return [call_key(view.call(k)) for k in range(len(view.candidates()))]


def take(env, view, k: int):
    call = view.call(k)
    result = env.step(call)
    view.push(call, result.observation)
    return result


def replay(domain: ModuleType, spec: dict, task: dict, seed: int, sizes: list[int] | None = None):
    """The reference played through the view: each call found among its candidates, stepped, pushed."""
    env, view = start(domain, spec, task, seed)
    for step, call in enumerate(json.loads(task["reference"])):
        offered = keys(view)
        assert call_key(call) in offered, (task["task_id"], step, call)
        if sizes is not None:
            sizes.append(len(offered))
        take(env, view, offered.index(call_key(call)))
    return env, view


def tokens(view) -> list[str]:
    values = [token for value in view.current().values for token in value]
    steps = [token for step in view.steps for part in step for token in part]
    return (
        [token for clause in view.goal for token in clause] + [t for tool in view.tools for t in tool] + steps + values
    )


def every_reference_succeeds(domain: ModuleType, specs: dict, tasks: list[dict]) -> None:
    sizes: list[int] = []
    clauses = []
    for n, task in enumerate(tasks):
        env, view = replay(domain, specs[task["env_id"]], task, n, sizes)
        assert env.done and env.verify().success, task["task_id"]
        assert view.candidates() == []
        clauses.append(len(view.goal))
    print(
        f"{domain.__name__} view: {len(tasks)} tasks, {statistics.mean(sizes):.1f} candidates per decision "
        f"(max {max(sizes)}), {statistics.mean(clauses):.2f} goal clauses per task"
    )


def every_token_is_structural_or_a_symbol(domain: ModuleType, specs: dict, tasks: list[dict], max_pairs: int) -> None:
    for n, task in enumerate(tasks):
        _, view = replay(domain, specs[task["env_id"]], task, n)
        for token in tokens(view):
            assert classify(token) != (-1, UNK), (task["task_id"], token)
        assert all(clause[0] in GOAL_HEADS and len(clause) <= 8 for clause in view.goal), view.goal
        assert all(len(step) - 1 <= max_pairs for step in view.steps)
        assert all(len(pair) == 2 for step in view.steps for pair in step[1:])


def reskin_renders_identically(
    domain: ModuleType,
    specs: dict,
    envs: list[dict],
    vocabulary: Callable[[dict], list[str]],
    same_task: Callable[[dict, dict, dict, dict], bool] | None = None,
) -> int:
    """Each environment and its re-skin: the same tasks in other words, no token holding a word of either
    vocabulary, and the same goal, tools and tokens at every step of the two references, for every pair of
    tasks (or those ``same_task(spec, skinned, task, other)`` finds to be one task). Returns the pairs compared."""
    compared = 0
    for env_row in envs:
        spec = specs[env_row["env_id"]]
        skinned = domain.reskin(spec, 9)
        assert skinned["lexicon"] != spec["lexicon"]
        words = set(vocabulary(spec)) | set(vocabulary(skinned))
        tasks, others = domain.generate_tasks(spec, "a", 4, 3), domain.generate_tasks(skinned, "b", 4, 3)
        for task, other in zip(tasks, others, strict=same_task is None):
            assert task["instruction"] != other["instruction"]
            seed = derive_seed(5, task["task_id"])
            _, view = replay(domain, spec, task, seed)
            _, view_b = replay(domain, skinned, other, seed)
            assert not words & set(tokens(view)) and not words & set(tokens(view_b))
            if same_task is not None and not same_task(spec, skinned, task, other):
                continue
            assert view_b.goal == view.goal and view_b.tools == view.tools
            assert view_b.steps == view.steps, task["task_id"]
            compared += 1
    print(f"{domain.__name__} reskin: {compared} tasks compared step by step")
    return compared


def deterministic_per_seed(domain: ModuleType, specs: dict, tasks: list[dict]) -> None:
    """The same (task, episode seed) renders the same view; another seed draws other slots only."""
    for task in tasks[::7]:
        spec = specs[task["env_id"]]
        _, one = replay(domain, spec, task, 11)
        _, two = replay(domain, spec, task, 11)
        assert (one.goal, one.tools, one.steps) == (two.goal, two.tools, two.steps)
        assert one.current().values == two.current().values
        _, other = replay(domain, spec, task, 12)
        assert other.goal != one.goal and other.steps != one.steps
        shape = [[re.sub(r"\d+", "", t) for t in clause] for clause in other.goal]
        assert shape == [[re.sub(r"\d+", "", t) for t in clause] for clause in one.goal]


def forks_step_independently(domain: ModuleType, specs: dict, tasks: list[dict], moves) -> None:
    """Half a reference in, a fork of the episode takes ``moves(its candidates' keys)`` (candidate
    indices); the original's candidates, steps and values do not change."""
    for n, task in enumerate(tasks[::9]):
        env, view = start(domain, specs[task["env_id"]], task, n)
        reference = json.loads(task["reference"])
        for call in reference[: len(reference) // 2]:
            take(env, view, keys(view).index(call_key(call)))
        before = (keys(view), list(view.candidates()))
        steps, values = list(view.steps), [list(v) for v in view.current().values]
        other_env = env.fork()
        other = view.fork(other_env)
        for k in moves(keys(other)):
            if other.candidates():
                take(other_env, other, k)
        assert (keys(view), view.candidates()) == before
        assert view.steps == steps and view.current().values == values
        assert len(other.steps) > len(view.steps)


def random_policy_builds_features(domain: ModuleType, specs: dict, tasks: list[dict]) -> None:
    """Episodes of a uniformly random policy encode as the tiny policy's features at every decision."""
    rng = np.random.default_rng(0)
    for n, task in enumerate(random.Random(0).sample(tasks, 12)):
        env, view = start(domain, specs[task["env_id"]], task, n)
        features = EpisodeFeatures(view, False)
        while not env.done:
            decision = features.decision()
            assert decision.candidates.count == len(view.candidates()) > 0
            take(env, view, int(rng.integers(len(view.candidates()))))
        features.decision()
        for token in tokens(view):
            assert classify(token) != (-1, UNK), token
