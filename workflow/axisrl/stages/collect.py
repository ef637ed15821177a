"""The collect family: the plan's runs, and one row per run of everything the study measured."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from axisrl.artifacts import read_artifact, write_artifact
from axisrl.config import StageSpec
from axisrl.laws.data import TIERS as LAW_TIERS
from axisrl.laws.data import VALIDATION_TIER

log = logging.getLogger("axisrl")


def plan(spec: StageSpec, settings: Mapping[str, Any], inputs: Mapping[str, str], outputs: Mapping[str, str]) -> None:
    """One row per run of the study's plan: its design, seed, run key and the families that ask for it."""
    from axisrl.plan import plan_designs, plan_rows

    study = settings["study"]
    rows = plan_rows(plan_designs(study), study, settings["domain"])
    frame = pl.DataFrame(
        rows,
        schema_overrides={
            "worlds": pl.Int64,
            "families": pl.List(pl.String),
            "sweeps": pl.List(pl.String),
            "base": pl.String,
        },
    )
    write_artifact(frame, outputs["runs"], spec)
    log.info("plan: %d runs over %d grid points", frame.height, frame["point_key"].n_unique())


TIERS = (*LAW_TIERS, VALIDATION_TIER)


def success_by_tier(episodes: pl.DataFrame) -> pl.DataFrame:
    """Pooled held-out success per run and tier with its binomial SE and the loss ``L = -ln p``;
    "all" pools the test tiers T0-T2, never the validation tier V.

    ``p`` is clipped to [1/(2n), 1 - 1/(2n)] before the log, so a run with no success has a finite loss.
    """
    tested = episodes.filter(pl.col("tier") != VALIDATION_TIER)
    tiers = pl.concat([episodes, tested.with_columns(tier=pl.lit("all"))])
    stats = tiers.group_by("run_key", "tier").agg(n=pl.len(), p=pl.col("success").cast(pl.Float64).mean())
    stats = stats.with_columns(
        se=(pl.col("p") * (1 - pl.col("p")) / pl.col("n")).sqrt(),
        loss=-(pl.col("p").clip(1 / (2 * pl.col("n")), 1 - 1 / (2 * pl.col("n")))).log(),
    )
    wide = stats.pivot(on="tier", index="run_key", values=["n", "p", "se", "loss"], separator="_")
    return wide.select(
        "run_key",
        *(f"{stat}_{tier}" for tier in TIERS for stat in ("n", "p", "se", "loss") if f"{stat}_{tier}" in wide.columns),
    )


def collect(
    spec: StageSpec, settings: Mapping[str, Any], inputs: Mapping[str, str], outputs: Mapping[str, str]
) -> None:
    """One row per run (design, held-out success per tier, train success, compute, cost drivers,
    status), and every test episode's success (the task-level bootstrap reads it; validation
    episodes are in the runs' ``p_V`` only, so no law can read them)."""
    planned = read_artifact(inputs["plan"], "plan")
    if "second_wave" in inputs:  # an adaptive study: the runs its allocation placed, in the plan's columns
        planned = pl.concat(
            [planned.with_columns(wave=pl.lit(1)), read_artifact(inputs["second_wave"], "allocate")],
            how="diagonal_relaxed",
        )
    frame, episodes = collected(planned, inputs["train_runs"], inputs["episodes"], settings["episodes_stage"])
    tested = episodes.filter(pl.col("tier") != VALIDATION_TIER)
    write_artifact(frame, outputs["runs"], spec)
    write_artifact(tested.select("run_key", "seed", "task_id", "tier", "success"), outputs["episodes"], spec)
    if "curves" in inputs:  # learning curves on V (``learning_curves.points``), each row with its run's point
        curves = pl.concat([read_artifact(path, "train") for path in inputs["curves"]])
        points = frame.select("run_key", "point_key")
        write_artifact(points.join(curves, on="run_key", how="inner"), outputs["learning_curves"], spec)
    log.info("collect: %d runs, %d failed", frame.height, int((frame["status"] != "ok").sum()))


def collected(
    planned: pl.DataFrame, train_runs: Sequence[str], episode_files: Sequence[str], episodes_stage: str
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The ``planned`` runs joined with what their train jobs measured and their held-out success
    per tier, and every held-out episode (V's too) of those jobs."""
    trained = pl.concat([read_artifact(p, "train") for p in train_runs], how="diagonal_relaxed")
    episodes = pl.concat([read_artifact(p, episodes_stage) for p in episode_files], how="diagonal_relaxed")
    steps = (
        episodes.filter(pl.col("tier") != VALIDATION_TIER)
        .group_by("run_key")
        .agg(steps_per_trajectory=pl.col("steps").mean())
    )
    frame = (
        planned.join(trained.drop("seed"), on="run_key", how="left")
        .join(success_by_tier(episodes), on="run_key", how="left")
        .join(steps, on="run_key", how="left")
    )
    return frame, episodes


def base_success(episodes: pl.DataFrame) -> dict[str, float]:
    """The base's held-out success per tier as ``p_<tier>_base`` (a run's reference point), and
    ``p_all_base`` pooled over the test tiers as collect pools a run's (never V)."""
    wide = success_by_tier(episodes).row(0, named=True)
    return {f"{column}_base": wide[column] for column in wide if column.startswith("p_")}
