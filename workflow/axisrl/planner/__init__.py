"""The power planner: what intervals a study design buys, and at what compute, before it is run.

From a design (the config's one-axis sweeps: grids, centre, seeds per point, held-out episodes per
run) and a noise model (a finished study's ``noise`` frame, or stated values), it simulates the
study many times (``axisrl.laws.simulate``) and analyses each simulated study with the laws stage's
own functions, so a predicted half-width is that of the interval the study will report: per axis,
the log-log slope ``alpha`` and the trend of held-out success; per pair of axes, the slope
difference, with the probability that its interval excludes 0 (the ordering test decides); and
kappa at r = 1 of each axis's representative synthesis method (``predict_kappa``). The
compute a design costs is CPU-seconds for the tiny backend (per-run seconds fitted to a finished
study's measured train jobs) and GPU-hours for cluster studies (``axisrl.cluster_cost``).
``search`` tries coarser grids and other seed counts for the cheapest design that reaches given
half-widths or fits a budget. The truth behind the simulations is the finished study's log-log line per
sweep with the real part of its points' offsets (or a stated power law): its noise and those
offsets set the half-widths.

The package's modules, imported one way: ``model`` (the design, truth and noise) <- ``cost`` (what
a design costs), ``simulate`` (a fixed design's predictions, kappa's included) <- ``two_stage`` (the
adaptive design) and ``design_search`` (the designs searched) <- this one (``plan`` and the ``power``
target's ``power_table``), which re-exports their public names.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import polars as pl

from axisrl.budget import visits_per_run
from axisrl.laws.simulate import NoiseModel, SweepNoise
from axisrl.planner.cost import (
    POOL_FACTORS,
    STATED_RUN_SECONDS,
    RunCost,
    check_positive,
    cpu_cost,
    measured_cpu_cost,
    measured_jobs,
)
from axisrl.planner.design_search import candidates, search
from axisrl.planner.model import (
    MATCH_SIMS,
    PLANNING_TIER,
    QUANTITIES,
    STATED_ALPHA,
    STATED_CENTRE_SUCCESS,
    STATED_NOISE,
    STATED_SEED_SD_SPREAD,
    TIER,
    SweepDesign,
    Truth,
    design_of,
    episodes_per_run,
    from_noise_frame,
)
from axisrl.planner.simulate import KAPPA_SCHEMA, headline_intervals, predict, predict_kappa, stated_truth
from axisrl.planner.two_stage import (
    FIRST_WAVE_TIER,
    AdaptivePrediction,
    TwoStage,
    against_fixed,
    predict_adaptive,
    two_stage_study,
)

__all__ = [
    "FIRST_WAVE_TIER",
    "KAPPA_SCHEMA",
    "MATCH_SIMS",
    "PLANNING_TIER",
    "POOL_FACTORS",
    "POWER_SCHEMA",
    "QUANTITIES",
    "STATED_ALPHA",
    "STATED_CENTRE_SUCCESS",
    "STATED_NOISE",
    "STATED_RUN_SECONDS",
    "STATED_SEED_SD_SPREAD",
    "TIER",
    "AdaptivePrediction",
    "Plan",
    "RunCost",
    "SweepDesign",
    "Truth",
    "TwoStage",
    "against_fixed",
    "candidates",
    "check_positive",
    "cpu_cost",
    "design_of",
    "episodes_per_run",
    "from_noise_frame",
    "headline_intervals",
    "kappa_rows",
    "measured_cpu_cost",
    "measured_jobs",
    "plan",
    "power_table",
    "predict",
    "predict_adaptive",
    "predict_kappa",
    "search",
    "stated_truth",
    "two_stage_study",
]


class Plan(NamedTuple):
    """The planner's answer for one study config: its design, the noise it assumed, the predicted
    half-widths, the design's cost, and (with targets or a budget) the searched designs."""

    design: SweepDesign
    noise: NoiseModel | SweepNoise
    truth: Truth
    predicted: pl.DataFrame
    kappa: pl.DataFrame | None
    cost: RunCost
    searched: pl.DataFrame | None


POWER_SCHEMA = {
    "quantity": pl.String,
    "name": pl.String,
    "half_width": pl.Float64,
    "half_width_se": pl.Float64,
    "half_width_q10": pl.Float64,
    "half_width_q90": pl.Float64,
    "p_decides": pl.Float64,
    "p_bounded": pl.Float64,
    "status": pl.String,
    "reason": pl.String,
}


def power_table(
    noise: pl.DataFrame, study: Mapping[str, Any], take_off: float, n_sims: int = 200, kappa_sims: int = 50
) -> pl.DataFrame:
    """The ``power`` target: what this study's design buys, predicted from its own noise frame (a
    second study of it, with other seeds, should measure these half-widths); a study whose sweeps
    are too short for the planner gets one row saying why."""
    try:
        truth, model, episodes = from_noise_frame(noise, study["centre"], take_off)
    except ValueError as exc:
        return pl.DataFrame({"status": ["not_run"], "reason": [str(exc)]})
    headline = noise.filter(pl.col("tier") == TIER)
    if not headline.is_empty():
        episodes = episodes_per_run(headline)  # the design's own T2 pool, the noise read off V
    predicted = predict(design_of({"study": study}, episodes), truth, model, n_sims)
    frames = [pl.DataFrame(schema=POWER_SCHEMA), predicted]  # every column; p_bounded is kappa's alone
    if study["families"]["mixtures"]["enabled"]:
        frames.append(kappa_rows(predict_kappa(study, truth, model, episodes, n_sims=kappa_sims)))
    return (
        pl.concat(frames, how="diagonal_relaxed")
        .with_columns(status=pl.lit("ok"), reason=pl.lit(None, dtype=pl.String))
        .select(list(POWER_SCHEMA))
        .cast(POWER_SCHEMA)
    )


def kappa_rows(kappa: pl.DataFrame) -> pl.DataFrame:
    """``predict_kappa``'s frame as rows of the planner's table (quantity ``kappa_r1``)."""
    return kappa.select(
        quantity=pl.lit("kappa_r1"),
        name=pl.format("{} ({})", "source", "axis"),
        half_width="half_width",
        half_width_q10="half_width_q10",
        half_width_q90="half_width_q90",
        p_bounded="p_bounded",
    )


def plan(
    config: Mapping[str, Any],
    noise: pl.DataFrame | None = None,
    results: Path | None = None,
    *,
    search_designs: bool = False,
    n_sims: int = 200,
    keys: Collection[str] | None = None,
) -> Plan:
    """The planner on a study config: the config's design, the noise of ``noise`` (a ``noise``
    frame) or stated values, CPU-seconds (tiny backend: ``cpu_cost``, from ``results``' train jobs
    of the study, whose train keys are ``keys``; None: every job there) or GPU-hours (verl), and
    with ``search_designs`` every candidate design."""
    design = design_of(config)
    if noise is not None:
        truth, model, _ = from_noise_frame(noise, config["study"]["centre"], config["laws"]["take_off"])
    else:
        truth, model = stated_truth(design), STATED_NOISE
    if config["train"]["backend"] == "tiny":
        cost = cpu_cost(results, visits_per_run(config["train"]), keys)
    else:
        cost = RunCost("gpu_hours", config=config, source="the GPU cost model (axisrl.cluster_cost, an estimate)")
    check_positive(cost, design)
    predicted = predict(design, truth, model, n_sims)
    mixtures = config["study"]["families"]["mixtures"]["enabled"]
    kappa = predict_kappa(config["study"], truth, model, design.episodes) if mixtures else None
    searched = search(design, truth, model, cost) if search_designs else None
    return Plan(design, model, truth, predicted, kappa, cost, searched)
