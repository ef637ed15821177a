"""The pools family: the training, held-out and placebo pools of the domain, and the synthetic sources."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import polars as pl

from axisrl import domains
from axisrl.artifacts import read_artifact, write_artifact
from axisrl.config import StageSpec
from axisrl.domains import toolworld

log = logging.getLogger("axisrl")

SPLIT_FILES = {
    "train": ("envs", "tasks"),
    "heldout": ("heldout_envs", "heldout_tasks"),
    "placebo": ("placebo_envs", "placebo_tasks"),
}
"""Each pool's env and task files; dedup treats every pool on its own (no task is dropped as a
near-duplicate of another pool's)."""
ENV_COLUMNS = {
    "env_id": pl.String,
    "world_id": pl.String,
    "world_seed": pl.Int64,
    "variant_index": pl.Int64,
    "variant_seed": pl.Int64,
    "content_seed": pl.Int64,
    "skin_index": pl.Int64,
    "split": pl.String,
    "tier": pl.String,
    "n_tables": pl.Int64,
    "n_tools": pl.Int64,
    "n_rows": pl.Int64,
    "edits": pl.List(pl.String),
    "vocabulary": pl.List(pl.String),
    "spec": pl.String,
    "source": pl.String,
    "defect": pl.String,
}
TASK_COLUMNS = {
    "task_id": pl.String,
    "env_id": pl.String,
    "skeleton": pl.String,
    "skill_sig": pl.String,
    "verifier_sig": pl.String,
    "instruction": pl.String,
    "reference": pl.String,
    "goal": pl.String,
    "answer": pl.String,
    "n_steps": pl.Int64,
    "n_distractors": pl.Int64,
    "id_depth": pl.Int64,
    "split": pl.String,
    "tier": pl.String,
    "source": pl.String,
    "defect": pl.String,
}
"""Synthesized columns, fixed so empty pools and all-null columns keep their types. ``source`` is
``"real"`` or the synthetic method that made the row; ``defect`` names the failure a synthetic
source injected (null when faithful; for measuring sources only, training never reads it)."""
TRAJECTORY_COLUMNS = {
    "task_id": pl.String,
    "env_id": pl.String,
    "source": pl.String,
    "trajectory_index": pl.Int64,
    "calls": pl.String,
    "label": pl.Float64,
    "true_success": pl.Boolean,
    "n_steps": pl.Int64,
    "step_errors": pl.Int64,
    "defect": pl.String,
}


def synthesize(
    spec: StageSpec, settings: Mapping[str, Any], inputs: Mapping[str, str], outputs: Mapping[str, str]
) -> None:
    """Generate the training and held-out pools of the configured domain."""
    log.info("synthesizing %s pool", settings["domain"])
    pool = domains.load(settings["domain"]).generate_pool(settings["synthesize"])
    for env_file, task_file in SPLIT_FILES.values():
        for name, columns in ((env_file, ENV_COLUMNS), (task_file, TASK_COLUMNS)):
            frame = pl.DataFrame(getattr(pool, name), schema=columns).with_columns(source=pl.lit("real"))
            write_artifact(frame, outputs[name], spec)
            log.info("wrote %s: %d rows", outputs[name], frame.height)


def sources(
    spec: StageSpec, settings: Mapping[str, Any], inputs: Mapping[str, str], outputs: Mapping[str, str]
) -> None:
    """Every synthetic source the mixtures family reads: environments, tasks and trajectories with a
    ``source`` column (a common-core variant ``<method>_core`` when the study asks for one), and
    per-method generation statistics (drafts made, kept, defects)."""
    from axisrl.synthesis import CORE_SUFFIX

    envs = read_artifact(inputs["envs"], "synthesize").to_dicts()
    tasks = read_artifact(inputs["tasks"], "synthesize").to_dicts()
    sources = settings["sources"]
    rows: dict[str, list[dict[str, Any]]] = {"envs": [], "tasks": [], "trajectories": []}
    stats = []
    for common_core in (False, True) if settings["common_core"] else (False,):
        cfg = {
            **sources,
            "common_core": common_core,
            "methods": {m: sources["methods"][m] for m in settings["methods"]},
        }
        log.info("synthesizing sources %s%s", sorted(cfg["methods"]), " (common core)" if common_core else "")
        pool = toolworld.generate_synthetic(envs, tasks, cfg)
        suffix = CORE_SUFFIX if common_core else ""
        for name in rows:
            rows[name] += [{**row, "source": row["source"] + suffix} for row in getattr(pool, name)]
        stats += [{"source": method + suffix, **values} for method, values in pool.stats.items()]
    for name, columns in (("envs", ENV_COLUMNS), ("tasks", TASK_COLUMNS), ("trajectories", TRAJECTORY_COLUMNS)):
        frame = pl.DataFrame(rows[name], schema=columns)
        write_artifact(frame, outputs[f"synthetic_{name}"], spec)
        log.info("wrote %s: %d rows", outputs[f"synthetic_{name}"], frame.height)
    write_artifact(pl.DataFrame(stats, infer_schema_length=None), outputs["source_stats"], spec)
