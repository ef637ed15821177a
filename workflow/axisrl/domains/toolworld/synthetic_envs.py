"""Environment synthesis (``awm``, ``genenv``; axis ``d_env``): new worlds, drawn within the real
pool's ranges from their own seed stream, each with its tasks; an environment's documentation may
disagree with what its tools do, and a task's goal may be made unreachable.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from axisrl.domains.canon import canonical_json, derive_seed, short_hash
from axisrl.domains.toolworld.defects import mismatch, unreachable_goal
from axisrl.domains.toolworld.pool import world_id
from axisrl.domains.toolworld.runtime import compile_spec
from axisrl.domains.toolworld.synthetic_common import (
    SPLIT,
    SyntheticPool,
    filter_passes,
    fresh_tasks,
    method_stats,
    task_row,
    with_goal,
)
from axisrl.domains.toolworld.world import Spec, build_spec, sample_state, sample_variant, sample_world


class WorldShape(NamedTuple):
    """Ranges of the real pool that synthetic worlds are drawn within."""

    tables: tuple[int, int]
    """Fewest and most tables per world."""
    rows: tuple[int, int]
    """Fewest and most rows per table."""
    max_steps: int


def world_shape(specs: Iterable[Spec]) -> WorldShape:
    """Table count range, rows-per-table range and step limit of the real pool, which synthetic
    worlds are drawn within (the pool's own config is not passed here)."""
    tables, rows, steps = [], [], []
    for spec in specs:
        tables.append(len(spec["tables"]))
        rows += [len(r) for r in spec["state"].values()]
        steps.append(spec["max_steps"])
    return WorldShape((min(tables), max(tables)), (min(rows), max(rows)), max(steps))


def env_method(
    method: str,
    fid: Mapping[str, Any],
    core: bool,
    seed: int,
    n_envs: int,
    n_tasks: int,
    shape: WorldShape,
    out: SyntheticPool,
) -> dict[str, Any]:
    """New worlds (one unedited variant and one content each) with their tasks. World seeds
    ``derive_seed(seed, "synthetic", method, i)`` never coincide with real or held-out ones."""
    tables, rows, max_steps = shape
    injected = {"description_mismatch": 0, "unverifiable_goal": 0}
    kept_defects = dict(injected)
    task_drafts = tasks_kept = 0
    for i in range(n_envs):
        world_seed = derive_seed(seed, "synthetic", method, i)
        rng = random.Random(derive_seed(world_seed, "fidelity"))
        structure, _ = sample_variant(sample_world(world_seed, tables), None)
        content_seed = derive_seed(world_seed, "content")
        spec = build_spec(
            structure,
            sample_state(structure, content_seed, "train", rows),
            "train",
            derive_seed(world_seed, "skin"),
            max_steps,
        )
        documented, actual, defect = spec, spec, None
        if rng.random() < fid["description_mismatch"]:
            confused = mismatch(spec, rng)
            if confused is not None:
                (documented, actual), defect = confused, "description_mismatch"
        spec_json = canonical_json(documented)
        rt = compile_spec(documented)
        env = short_hash(spec_json)
        out.envs.append(
            {
                "env_id": env,
                "world_id": world_id(world_seed),
                "world_seed": world_seed,
                "variant_index": 0,
                "variant_seed": None,
                "content_seed": content_seed,
                "skin_index": 0,
                "split": SPLIT,
                "tier": None,
                "n_tables": len(rt.tables),
                "n_tools": len(rt.tools),
                "n_rows": sum(len(r) for r in rt.initial.values()),
                "edits": [],
                "vocabulary": rt.vocabulary(),
                "spec": spec_json,
                "source": method,
                "defect": defect,
            }
        )
        if defect:
            injected[defect] += 1
            kept_defects[defect] += 1
        kept = 0
        candidates = fresh_tasks(actual, env, n_tasks, derive_seed(world_seed, "tasks"), set())
        for _, task in zip(range(4 * n_tasks + 16), candidates):
            if kept == n_tasks:
                break
            task_drafts += 1
            task_defect = None
            if rng.random() < fid["unverifiable_goal"]:
                task_defect = "unverifiable_goal"
                injected[task_defect] += 1
                task = with_goal(
                    task, unreachable_goal(compile_spec(actual), json.loads(task["goal"]), rng), task["answer"]
                )
            if core and not filter_passes(documented, task, "solution"):
                continue
            out.tasks.append(task_row(task, method, task_defect))
            kept += 1
            kept_defects["unverifiable_goal"] += task_defect is not None
        tasks_kept += kept
    stats = method_stats(method, n_envs, n_envs, injected, kept_defects)
    return {**stats, "task_drafts": task_drafts, "tasks_kept": tasks_kept}
