"""Task synthesis (``autoplay``, ``sca``, ``rlve``; axis ``d_task``): new tasks for real
environments, corrupted per the method's mix (``unsolvable``, ``mislabelled``, ``near_duplicate``)
and then passed through the method's own filter.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from axisrl.domains.canon import derive_seed
from axisrl.domains.toolworld.defects import reword, unreachable_goal
from axisrl.domains.toolworld.env import ToolworldEnv
from axisrl.domains.toolworld.methods import TASK_DEFECTS
from axisrl.domains.toolworld.model import Goal
from axisrl.domains.toolworld.runtime import compile_spec
from axisrl.domains.toolworld.synthetic_common import (
    SyntheticPool,
    filter_passes,
    fresh_tasks,
    method_stats,
    replay,
    task_row,
    with_goal,
)
from axisrl.domains.toolworld.world import Spec

DONORS = 8
"""Other tasks tried as the wrong verifier of a mislabelled draft."""


def task_method(
    method: str,
    fid: Mapping[str, Any],
    seed: int,
    n_tasks: int,
    targets: Sequence[Mapping[str, Any]],
    specs: Mapping[str, Spec],
    real_tasks: Mapping[str, list[dict[str, Any]]],
    out: SyntheticPool,
) -> dict[str, Any]:
    """Up to ``n_tasks`` synthetic tasks per target environment: drafts (new ``generate_tasks``
    tasks, or re-worded copies of the environment's real tasks), corrupted per the mix, then the
    method's filter, which rejects a draft it flags with probability ``filter_recall``. Rejected
    drafts are replaced by new ones, at most ``4 * n_tasks + 16`` drafts per environment."""
    injected = dict.fromkeys(TASK_DEFECTS, 0)
    kept_defects = dict(injected)
    drafts = kept_total = 0
    for env in targets:
        env_id, spec = env["env_id"], specs[env["env_id"]]
        rng = random.Random(derive_seed(seed, "synthetic", method, env_id))
        own = real_tasks.get(env_id, [])
        fresh = fresh_tasks(
            spec,
            env_id,
            n_tasks,
            derive_seed(seed, "synthetic", method, env_id, "drafts"),
            {(t["reference"], t["goal"]) for t in own},
        )
        kept: list[dict[str, Any]] = []
        seen: set[str] = set()
        for _ in range(4 * n_tasks + 16):
            if len(kept) == n_tasks:
                break
            draft = _draft(rng, fid, spec, own, kept, fresh)
            if draft is None:
                break
            task, defect = draft
            drafts += 1
            if defect:
                injected[defect] += 1
            caught = task is not None and not filter_passes(spec, task, fid["filter"])
            if task is None or (caught and rng.random() < fid["filter_recall"]):
                continue
            row = task_row(task, method, defect)
            if row["task_id"] in seen:
                continue
            seen.add(row["task_id"])
            kept.append(row)
            if defect:
                kept_defects[defect] += 1
        out.tasks += kept
        kept_total += len(kept)
    return method_stats(method, drafts, kept_total, injected, kept_defects)


def _draft(
    rng: random.Random,
    fid: Mapping[str, Any],
    spec: Spec,
    own: Sequence[Mapping[str, Any]],
    kept: Sequence[Mapping[str, Any]],
    fresh: Iterator[dict[str, Any]],
) -> tuple[dict[str, Any] | None, str | None] | None:
    """One draft and its defect; the task is None when no wrong verifier fits a mislabelled
    draft (a wasted draft). None when the environment has no new task left to draft."""
    u = rng.random()
    if u < fid["unsolvable"]:
        defect: str | None = "unsolvable"
    elif u < fid["unsolvable"] + fid["mislabelled"]:
        defect = "mislabelled"
    elif u < fid["unsolvable"] + fid["mislabelled"] + fid["near_duplicate"] and own:
        original = rng.choice(own)
        return {**original, "instruction": reword(original["instruction"], rng)}, "near_duplicate"
    else:
        defect = None
    task = next(fresh, None)
    if task is None:
        return None
    if defect == "unsolvable":
        goal = unreachable_goal(compile_spec(spec), json.loads(task["goal"]), rng)
        return with_goal(task, goal, task["answer"]), defect
    if defect == "mislabelled":
        return _mislabel(rng, spec, task, [*own, *kept]), defect
    return task, None


def _mislabel(
    rng: random.Random, spec: Spec, task: Mapping[str, Any], others: Sequence[Mapping[str, Any]]
) -> dict[str, Any] | None:
    """``task`` with the goal and expected answer of another task of its environment that its
    own reference does not satisfy (so the reward asks for something the instruction did not)."""
    env, _ = replay(spec, task, json.loads(task["reference"]))
    donors = [o for o in others if o["goal"] != task["goal"]]
    for donor in rng.sample(donors, min(DONORS, len(donors))):
        if not _meets(env, donor["goal"], donor["answer"]):
            return with_goal(task, donor["goal"], donor["answer"])
    return None


def _meets(env: ToolworldEnv, goal: str, answer: str | None) -> bool:
    """Whether the state and answer ``env`` ended with satisfy another goal than its task's."""
    rt = env.runtime
    final = rt.initial if env.state is None else env.state
    met, total = rt.check(Goal.parse(goal), answer, rt.initial, final, env.answer)
    return met == total
