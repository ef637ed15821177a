"""Tables as polars frames, written as Markdown (to read) and CSV (to reuse).

Most tables are a stage's frame made readable (``readable``); Table 9 is built here from the collected
runs; ``write_table`` writes each. Rows come only from measured runs: a design the study did not
run is absent, never filled in.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from axisrl.budget import visits_per_run
from axisrl.recipe.study import accounting, cost_model, drivers_table, with_charged_compute

DESIGN_COLUMNS = ("d_env", "d_task", "d_traj", "width", "budget")


def table9(
    runs: pl.DataFrame,
    costs: Mapping[str, Any],
    domain: str,
    train: Mapping[str, Any],
    measured: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Training-signal accounting (the paper's Table 9, as a check): per point of every one-axis sweep
    and per strategy and validation run, the mean over seeds of task visits (cells), distinct tasks
    and environments seen, trajectories, rollout steps (env steps, the rollout tokens), gradient
    steps (decisions in the loss), updates, executed FLOPs, the compute its budget is charged (the
    domain's cost model ``costs[domain]`` over the runs' measured drivers, declared synthesis prices
    excluded; none without a cost model) and their ratio, so a reader sees what moving along an axis
    or up a compute level actually bought."""
    cost = costs.get(domain, {})
    model = cost_model(cost, drivers_table(runs).row(0, named=True), visits_per_run(train)) if cost else None
    sweeps = (
        with_charged_compute(runs.filter(pl.col("sweeps").list.len() > 0), model)
        .explode("sweeps")
        .rename({"sweeps": "row"})
    )
    table = accounting(sweeps, ["row", *DESIGN_COLUMNS])
    if measured is not None:
        strategies = measured.with_columns(
            row=pl.format("{}:{} at {}x", "role", "strategy", pl.col("compute_factor").round(3)), runs=pl.col("n_seeds")
        )
        table = pl.concat([table, strategies.select(table.columns)], how="vertical_relaxed")
    return table


def readable(frame: pl.DataFrame) -> pl.DataFrame:
    """A ``laws``, ``pricing`` or ``recipe`` frame as a table: columns that are null throughout are dropped."""
    return frame.select(column for column in frame.columns if frame[column].null_count() < frame.height)


def write_table(frame: pl.DataFrame, markdown: str | Path, csv: str | Path, title: str) -> None:
    """``frame`` as a Markdown table under ``title`` (floats to 3 significant digits) and as CSV."""
    shown = frame.with_columns(pl.selectors.float().map_elements(lambda x: float(f"{x:.3g}"), return_dtype=pl.Float64))
    with pl.Config(
        tbl_formatting="MARKDOWN",
        tbl_hide_column_data_types=True,
        tbl_hide_dataframe_shape=True,
        tbl_rows=-1,
        tbl_cols=-1,
        tbl_width_chars=10_000,
        fmt_str_lengths=1_000,
    ):
        body = str(shown)
    Path(markdown).write_text(f"# {title}\n\n{body}\n")
    frame.write_csv(csv)
