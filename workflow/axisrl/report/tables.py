"""Tables as polars frames, written as compact Markdown (to read) and CSV (to reuse).

Most tables are a stage's frame as it was computed (``copied``); Table 9 is built here from the
collected runs; ``write_table`` writes each, the Markdown in its compact form (``compact``: the
paper's columns) and the CSV with every column. Rows come only from measured runs: a design the
study did not run is absent, never filled in.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from axisrl.budget import visits_per_run
from axisrl.recipe.efficiency import accounting, with_charged_compute
from axisrl.recipe.study import DRIVERS, cost_model, drivers_table
from axisrl.report.compact import compact_table, markdown, readable

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
    excluded; none without a cost model, or for runs that measured no cost drivers: verl's) and their
    ratio, so a reader sees what moving along an axis or up a compute level actually bought."""
    cost = costs.get(domain, {})
    model = None
    if cost and set(DRIVERS) <= set(runs.columns):  # the tiny backend's drivers; a verl run measures none
        model = cost_model(cost, drivers_table(runs).row(0, named=True), visits_per_run(train))
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


def copied(frame: pl.DataFrame) -> pl.DataFrame:
    """A table that is its stage's frame, as computed: ``write_table`` picks the columns the Markdown shows."""
    return frame


def write_table(frame: pl.DataFrame, markdown_path: str | Path, csv: str | Path, title: str, name: str = "") -> None:
    """``frame`` as a Markdown table under ``title``, in the compact form of table ``name``
    (``compact_table``; the whole frame for a name without one), and as CSV with every column that
    holds a value, so a reader gets the paper's columns and a script the rest."""
    write_markdown(compact_table(name, frame), markdown_path, title)
    readable(frame).write_csv(csv)


def write_markdown(shown: pl.DataFrame, markdown_path: str | Path, title: str) -> None:
    """``shown`` as a Markdown table under ``title``, with the note on the CSV beside it."""
    note = "The CSV beside this file holds every column; intervals are 95%, written value [lo, hi]."
    Path(markdown_path).write_text(f"# {title}\n\n{note}\n\n{markdown(shown)}\n", encoding="utf-8")
