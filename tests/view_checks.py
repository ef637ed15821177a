"""What every domain's compact view is checked for, shared by ``test_<domain>_view.py``: episodes
started and stepped through the view, the reference of every task played through its candidates to
a verified success, and every token structural or a symbol."""

from __future__ import annotations

import json
import random
import re
import statistics
from types import ModuleType

import numpy as np

from axisrl.backends.tiny.encoding import EpisodeFeatures
from axisrl.backends.tiny.rollout import call_key
from axisrl.backends.tiny.vocab import GOAL_HEADS, UNK, classify


def every_spec(pool) -> dict[str, dict]:
    """Every environment's spec of a pool (training, held-out and placebo), by env id."""
    return {env["env_id"]: json.loads(env["spec"]) for env in [*pool.envs, *pool.heldout_envs, *pool.placebo_envs]}


def every_task(pool) -> list[dict]:
    return [*pool.tasks, *pool.placebo_tasks, *pool.heldout_tasks]


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
