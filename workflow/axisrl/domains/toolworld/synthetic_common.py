"""What the synthetic method families share: the pool they fill, the shape of a synthetic task
row, replaying calls and the filters built on it, and drafting fresh tasks for an environment.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from axisrl.domains.canon import canonical_json, derive_seed, short_hash
from axisrl.domains.toolworld.env import ToolworldEnv
from axisrl.domains.toolworld.methods import METHODS
from axisrl.domains.toolworld.model import FINISH
from axisrl.domains.toolworld.tasks import generate_tasks, verifier_shape
from axisrl.domains.toolworld.world import Spec

TASK_KEYS = (
    "task_id",
    "env_id",
    "skeleton",
    "skill_sig",
    "verifier_sig",
    "instruction",
    "reference",
    "goal",
    "answer",
    "n_steps",
    "n_distractors",
    "id_depth",
    "split",
    "tier",
)
"""The columns pool.py writes for real task rows (a copied real row may carry more, e.g. its
``source``); synthetic rows add ``source`` and ``defect``."""
SPLIT = "synthetic"
DRAFT_ROUNDS = 8
"""``generate_tasks`` rounds (fresh seeds) per environment before it counts as exhausted."""


@dataclass
class SyntheticPool:
    """Rows of every requested method (``source`` says which) and per-method generation
    statistics: ``drafts`` made and ``kept`` (in the method's unit), ``injected_<defect>`` among
    the drafts and ``defect_<defect>`` among the kept rows."""

    envs: list[dict[str, Any]] = field(default_factory=list)
    tasks: list[dict[str, Any]] = field(default_factory=list)
    trajectories: list[dict[str, Any]] = field(default_factory=list)
    stats: dict[str, dict[str, Any]] = field(default_factory=dict)


def method_stats(
    method: str, drafts: int, kept: int, injected: Mapping[str, int], defects: Mapping[str, int]
) -> dict[str, Any]:
    """One method's entry of ``SyntheticPool.stats``."""
    return {
        "unit": METHODS[method].unit,
        "drafts": drafts,
        "kept": kept,
        **{f"injected_{d}": n for d, n in injected.items()},
        **{f"defect_{d}": n for d, n in defects.items()},
    }


def replay(spec: Spec, task: Mapping[str, Any], calls: Sequence[Mapping[str, Any]]) -> tuple[ToolworldEnv, bool]:
    """The environment after playing ``calls`` (stopping when the episode ends) and whether every
    call ran without an error observation."""
    env = ToolworldEnv(spec, task)
    env.reset()
    clean = True
    for call in calls:
        if env.done:
            break
        clean &= "error" not in env.step(call).observation
    return env, clean


def filter_passes(spec: Spec, task: Mapping[str, Any], name: str) -> bool:
    """Whether ``task`` survives the filter ``name`` (see ``methods.FILTERS``)."""
    calls = json.loads(task["reference"])
    env, clean = replay(spec, task, calls)
    if name == "executes":
        return clean
    if not (clean and env.verify().success):
        return False
    if name == "solution":
        return True
    tool_calls = [c for c in calls if c["name"] != FINISH]
    failures = ([], tool_calls[:-1])  # a no-op run and the truncated reference, neither answering
    return not any(replay(spec, task, failure)[0].verify().success for failure in failures)


def fresh_tasks(
    spec: Spec, env_id: str, batch: int, seed: int, exclude: set[tuple[str, str]]
) -> Iterator[dict[str, Any]]:
    """New tasks for one environment: ``generate_tasks`` rounds on fresh seeds, skipping any task
    (reference and goal) seen before or in ``exclude``; exhausted after a round brings nothing new."""
    seen = set(exclude)
    for round_index in range(DRAFT_ROUNDS):
        fresh = [
            t
            for t in generate_tasks(spec, env_id, batch, derive_seed(seed, round_index))
            if (t["reference"], t["goal"]) not in seen
        ]
        if not fresh:
            return
        seen.update((t["reference"], t["goal"]) for t in fresh)
        yield from fresh


def task_row(task: Mapping[str, Any], method: str, defect: str | None) -> dict[str, Any]:
    """A synthetic task row: the real columns, a synthetic id, source and defect. The id hashes a
    tagged list, never the plain string real ids hash, so the two cannot collide."""
    row = {key: task.get(key) for key in TASK_KEYS} | {"split": SPLIT, "tier": None}
    row["task_id"] = short_hash(
        ["toolworld-synthetic-task", method, row["env_id"], row["instruction"], row["reference"], row["goal"]]
    )
    return {**row, "source": method, "defect": defect}


def with_goal(task: Mapping[str, Any], goal: Mapping[str, Any] | str, answer: str | None) -> dict[str, Any]:
    """``task`` with another goal and expected answer, and the verifier signature of that goal."""
    goal = json.loads(goal) if isinstance(goal, str) else goal
    return {**task, "goal": canonical_json(goal), "answer": answer, "verifier_sig": short_hash(verifier_shape(goal))}
