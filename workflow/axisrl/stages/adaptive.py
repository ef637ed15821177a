"""The allocate stage of an adaptive study (``study.adaptive``, ``axisrl.adaptive``): after the axis
sweeps' first wave, where its second wave of seeds goes and what it is expected to buy."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from axisrl import adaptive
from axisrl.artifacts import read_artifact, write_artifact
from axisrl.config import StageSpec
from axisrl.plan import run_key
from axisrl.report.compact import markdown

log = logging.getLogger("axisrl")

FIRST_WAVE_FAMILY = "axis_sweeps"
HEADLINE_TIER = "T2"
"""The tier whose episodes per run the predicted half-widths are for (its count; never its outcomes)."""


def allocate(
    spec: StageSpec, settings: Mapping[str, Any], inputs: Mapping[str, Any], outputs: Mapping[str, str]
) -> None:
    """The second wave: per axis-sweep point its extra seeds (``allocation``), the expected headline
    half-widths before and after (``predicted``), the runs it adds in the plan's columns
    (``second_wave``, which collect appends to the plan), and a readable table of both."""
    from axisrl.stages.collect import collected

    planned = read_artifact(inputs["plan"], "plan")
    first, _ = collected(planned, inputs["train_runs"], inputs["episodes"], settings["episodes_stage"])
    # the plan's runs that these jobs trained (a failed run has a status too), on the axis sweeps
    first = first.filter(pl.col("status").is_not_null(), pl.col("families").list.contains(FIRST_WAVE_FAMILY))
    cost, unit = run_cost(first, settings)
    episodes = round(float(first[f"n_{HEADLINE_TIER}"].mean()))
    result = adaptive.allocate(first, settings["study"], cost, unit, episodes)
    second = second_wave_rows(result.allocation, planned)
    write_artifact(result.allocation, outputs["allocation"], spec)
    write_artifact(result.predicted, outputs["predicted"], spec)
    write_artifact(second, outputs["second_wave"], spec)
    write_table(outputs["table"], result)
    spent = float(result.allocation["cost"].sum())
    log.info(
        "allocate: %d second-wave runs over %d points, %.4g of %.4g %s",
        second.height,
        int((result.allocation["extra_seeds"] > 0).sum()),
        spent,
        result.budget,
        unit,
    )


def run_cost(first: pl.DataFrame, settings: Mapping[str, Any]) -> tuple[Callable[[pl.DataFrame], np.ndarray], str]:
    """What one run costs at each point, and its unit: GPU-hours of the cost model at the point's
    ``d_traj`` (verl), or CPU-seconds (tiny) fitted to the first wave's own runs, ``a + b * rollouts``
    (rollouts, training and held-out evaluation, as measured), at the point's mean rollouts."""
    if settings["train"]["backend"] != "tiny":
        from axisrl.cluster_cost import run_gpu_hours

        return (lambda points: np.array([run_gpu_hours(settings, int(d)) for d in points["d_traj"]])), "gpu_hours"
    ok = first.filter(pl.col("status") == "ok")
    if "training_cpu_seconds" not in ok.columns or ok["training_cpu_seconds"].is_null().any():
        raise ValueError(
            "some first-wave runs were trained before runs recorded their training_cpu_seconds, which the "
            "allocation prices a run from: rerun their train jobs (snakemake --forcerun train)"
        )
    held_out = sum(pl.col(c).fill_null(0) for c in ok.columns if c.startswith("n_") and c != "n_all")
    ok = ok.with_columns(seconds=pl.col("training_cpu_seconds") + pl.col("heldout_seconds_per_episode") * held_out)
    rollouts = ok["episodes"].to_numpy().astype(np.float64)
    (base, per_rollout), *_ = np.linalg.lstsq(
        np.column_stack((np.ones_like(rollouts), rollouts)), ok["seconds"].to_numpy(), rcond=None
    )
    at_point = dict(ok.group_by("point_key").agg(pl.col("episodes").mean()).iter_rows())

    def cost(points: pl.DataFrame) -> np.ndarray:
        per_run = base + per_rollout * np.array([at_point[key] for key in points["point_key"]])
        return np.maximum(per_run, float(ok["seconds"].min()))

    return cost, "cpu_seconds"


def second_wave_rows(allocation: pl.DataFrame, planned: pl.DataFrame) -> pl.DataFrame:
    """One plan row per second-wave run: its point's design, the axis sweeps alone as its family
    (another family's analysis keeps the seeds it planned), its seed and run key, ``wave`` 2."""
    placed = allocation.select("point_key", seed="seeds").explode("seed").drop_nulls()
    designs = planned.unique("point_key", keep="first").drop("run_key", "seed")
    rows = placed.join(designs, on="point_key", how="left").with_columns(
        families=pl.lit([FIRST_WAVE_FAMILY]),
        sweeps=pl.col("sweeps").list.eval(pl.element().filter(pl.element().str.starts_with(f"{FIRST_WAVE_FAMILY}:"))),
        run_key=pl.struct("point_key", "seed").map_elements(
            lambda r: run_key(r["point_key"], r["seed"]), return_dtype=pl.String
        ),
        wave=pl.lit(2),
    )
    return rows.select(*planned.columns, "wave")


def write_table(path: str | Path, result: adaptive.AllocationResult) -> None:
    """The allocation as a person reads it: each point's seeds and cost, then each quantity's
    expected half-width after the first wave and after both."""
    points = result.allocation.select(
        point=pl.format("d_env {} d_task {} d_traj {}", "d_env", "d_task", "d_traj"),
        sweeps=pl.col("sweeps").list.join(", "),
        first_wave="first_seeds",
        second_wave="extra_seeds",
        cost="cost",
    ).rename({"cost": f"cost ({result.unit})"})
    widths = result.predicted.select(
        "quantity", "name", after_first_wave="half_width_first", after_both="half_width_after"
    )
    spent = float(result.allocation["cost"].sum())
    Path(path).write_text(
        f"# Allocation of the second wave\n\n{spent:.4g} of the budget's {result.budget:.4g} {result.unit} spent "
        f"on {int(result.allocation['extra_seeds'].sum())} runs.\n\n{markdown(points)}\n\n"
        f"## Expected 95 % half-widths\n\n{markdown(widths)}\n",
        encoding="utf-8",
    )
