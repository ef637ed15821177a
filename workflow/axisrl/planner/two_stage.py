"""The two-stage (adaptive) design in simulation: a first wave, the allocation ``axisrl.adaptive.allocate``
makes from it, the second wave it places (``two_stage_study``), its predicted half-widths and cost
(``predict_adaptive``) and the fixed design at the same cost (``against_fixed``). Apart from the fixed
design's predictions, which it reuses, and named apart from ``axisrl.adaptive``, the allocation it runs."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, NamedTuple

import numpy as np
import polars as pl

from axisrl import adaptive
from axisrl.laws.data import AXES
from axisrl.laws.simulate import NoiseModel, SweepNoise, simulate_study
from axisrl.planner.cost import RunCost
from axisrl.planner.model import SweepDesign, Truth
from axisrl.planner.simulate import _widths, headline_intervals, predict

FIRST_WAVE_TIER = "T0"
"""The tier a simulated first wave's noise is read from: in simulated studies T0 is a draw of its
own, independent of T2, as the validation tier V is in a real study (simulations draw no V)."""


class TwoStage(NamedTuple):
    """One simulated two-stage study: both waves' runs, the allocation, and the truth's points."""

    runs: pl.DataFrame
    allocation: adaptive.AllocationResult
    points: pl.DataFrame


def two_stage_study(
    design: SweepDesign,
    truth: Truth | Callable[[pl.DataFrame], np.ndarray],
    noise: NoiseModel | SweepNoise,
    settings: Mapping[str, Any],
    cost: RunCost,
    seed: int,
) -> TwoStage:
    """A study of ``design``'s sweeps under ``study.adaptive`` ``settings``: its first wave
    (``first_seeds`` a point), the allocation ``adaptive.allocate`` makes from that wave's
    ``FIRST_WAVE_TIER`` success at ``cost``, and the second wave it places. Each point's runs are
    drawn up to the cap at once and the waves take the seeds they name: a run does not depend on
    which others are run."""
    loss = truth.loss if isinstance(truth, Truth) else truth
    full = simulate_study(
        loss,
        grids=design.grids,
        centre=design.centre,
        seeds=tuple(range(settings["max_seeds"])),
        n_tasks=3 * design.episodes,
        noise=noise,
        seed=seed,
        with_episodes=False,
    )
    first = full.runs.filter(pl.col("seed") < settings["first_seeds"])
    study = {
        "adaptive": settings,
        "centre": dict(design.centre),
        "seeds": list(range(settings["first_seeds"])),
        "families": {"axis_sweeps": {"extra_seeds": []}},
    }
    allocation = adaptive.allocate(
        first,
        study,
        lambda points: np.array([cost.per_run(d) for d in points["d_traj"]]),
        cost.unit,
        design.episodes,
        tier=FIRST_WAVE_TIER,
    )
    placed = allocation.allocation.select("point_key", seed="seeds").explode("seed").drop_nulls()
    second = full.runs.join(placed, on=["point_key", "seed"], how="semi")
    return TwoStage(pl.concat([first, second]), allocation, full.points)


class AdaptivePrediction(NamedTuple):
    """``predict``'s frame for the two-stage design, with the mean runs and cost a study spends and
    each sweep point's mean extra seeds."""

    predicted: pl.DataFrame
    runs: float
    runs_se: float
    cost: float
    extra: pl.DataFrame


def predict_adaptive(
    design: SweepDesign,
    truth: Truth,
    noise: NoiseModel | SweepNoise,
    settings: Mapping[str, Any],
    cost: RunCost,
    n_sims: int = 200,
    seed: int = 0,
) -> AdaptivePrediction:
    """``predict`` for the two-stage design: ``n_sims`` simulated studies through ``two_stage_study``."""
    rows, runs, spent, extra = [], [], [], []
    for study in range(n_sims):
        simulated = two_stage_study(design, truth, noise, settings, cost, seed + study)
        rows += headline_intervals(simulated.runs)
        runs.append(simulated.runs.height)
        spent.append(float(simulated.allocation.allocation["cost"].sum()))
        extra.append(simulated.allocation.allocation.select(*AXES, "sweeps", "first_seeds", "extra_seeds", "run_cost"))
    points = (
        pl.concat(extra)
        .group_by(*AXES, maintain_order=True)
        .agg(
            pl.col("sweeps").first(),
            pl.col("first_seeds").mean(),
            pl.col("extra_seeds").mean(),
            pl.col("run_cost").mean(),
        )
        .sort(*AXES)
    )
    first_cost = sum(cost.per_run(d) * n for d, n in zip(points["d_traj"], points["first_seeds"], strict=True))
    return AdaptivePrediction(
        _widths(rows, n_sims),
        float(np.mean(runs)),
        float(np.std(runs) / np.sqrt(n_sims)),
        float(first_cost + np.mean(spent)),
        points,
    )


def against_fixed(
    design: SweepDesign,
    truth: Truth,
    noise: NoiseModel | SweepNoise,
    settings: Mapping[str, Any],
    cost: RunCost,
    n_sims: int = 200,
) -> tuple[AdaptivePrediction, pl.DataFrame]:
    """The two-stage design of ``settings`` (``study.adaptive``; budget 0: what the fixed ``design``
    spends beyond the first wave) against the fixed design at the same cost: per quantity the
    adaptive half-width, the fixed design's at as many seeds as that cost buys (interpolated
    linearly between the whole seed counts around it, simulated with the same studies' seeds) and
    their ratio."""
    settings = dict(settings)
    if not settings["budget"]:
        settings["budget"] = cost.of(design) - cost.of(replace(design, seeds=settings["first_seeds"]))
    two_stage = predict_adaptive(design, truth, noise, settings, cost, n_sims)
    seeds = two_stage.cost / cost.of(replace(design, seeds=1))
    below = max(2, int(np.floor(seeds)))
    share = float(np.clip(seeds - below, 0.0, 1.0))
    fixed = [
        predict(replace(design, seeds=n), truth, noise, n_sims).select("quantity", "name", "half_width")
        for n in (below, below + 1)
    ]
    at_cost = (
        fixed[0]
        .join(fixed[1], on=["quantity", "name"], suffix="_above")
        .select(
            "quantity", "name", fixed_half_width=(1 - share) * pl.col("half_width") + share * pl.col("half_width_above")
        )
    )
    compared = two_stage.predicted.select("quantity", "name", "half_width", "half_width_se").join(
        at_cost, on=["quantity", "name"]
    )
    return two_stage, compared.with_columns(
        fixed_seeds=pl.lit(seeds), ratio=pl.col("half_width") / pl.col("fixed_half_width")
    )
