"""Tables as polars frames, written as Markdown (to read) and CSV (to reuse).

Each ``tableN`` function takes the collected runs (``collect``'s ``runs.parquet``) and returns the
frame; ``write_table`` writes it. Rows come only from measured runs: a design the study did not
run is absent, never filled in.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from axisrl.targets import LAW_TABLES, PRICING_TABLES, RECIPE_TABLES


def _sweep(runs: pl.DataFrame, axis: str, family: str = "axis_sweeps") -> pl.DataFrame:
    """The runs of one one-axis sweep (its points and their seeds), failed runs included."""
    return runs.filter(pl.col("sweeps").list.contains(f"{family}:{axis}"))


def table9(runs: pl.DataFrame) -> pl.DataFrame:
    """Training-signal accounting along the ``d_env`` sweep: per grid point, the mean over seeds of
    distinct tasks seen, trajectories, rollout steps (the env steps that stand in for rollout
    tokens), gradient steps (decisions that entered the loss), updates, and FLOPs normalised to the
    sweep's mean, so one can check that moving along ``d_env`` kept the training signal fixed."""
    sweep = _sweep(runs, "d_env").filter(pl.col("status") == "ok").with_columns(
        flops=pl.col("rollout_flops") + pl.col("train_flops"))
    table = (sweep.group_by("d_env").agg(
        runs=pl.len(),
        tasks=pl.col("distinct_tasks_seen").mean(),
        trajectories=pl.col("episodes").mean(),
        rollout_steps=pl.col("env_steps").mean(),
        gradient_steps=pl.col("gradient_steps").mean(),
        updates=pl.col("updates").mean(),
        flops=pl.col("flops").mean(),
    ).sort("d_env"))
    return table.with_columns(flops_normalized=pl.col("flops") / pl.col("flops").mean()).drop("flops")


def readable(frame: pl.DataFrame) -> pl.DataFrame:
    """A ``laws``, ``pricing`` or ``recipe`` result as a table: columns that are null throughout are dropped."""
    return frame.select(column for column in frame.columns if frame[column].null_count() < frame.height)


TABLES = {"table9": table9, **dict.fromkeys({**LAW_TABLES, **PRICING_TABLES, **RECIPE_TABLES}, readable)}
"""Target name -> builder from its source frame; every entry has a rule of the same name."""


def write_table(frame: pl.DataFrame, markdown: str | Path, csv: str | Path, title: str) -> None:
    """``frame`` as a Markdown table under ``title`` (floats to 3 significant digits) and as CSV."""
    shown = frame.with_columns(pl.selectors.float().map_elements(lambda x: float(f"{x:.3g}"), return_dtype=pl.Float64))
    with pl.Config(tbl_formatting="MARKDOWN", tbl_hide_column_data_types=True, tbl_hide_dataframe_shape=True,
                   tbl_rows=-1, tbl_cols=-1, tbl_width_chars=10_000, fmt_str_lengths=1_000):
        body = str(shown)
    Path(markdown).write_text(f"# {title}\n\n{body}\n")
    frame.write_csv(csv)
