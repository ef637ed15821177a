"""Simulated learning-curve studies with known ``A``, ``B`` and ``C_mid``, and the coverage of the fits' intervals.

A study is three one-axis sweeps through a centre, as the real ones are. Along each axis the asymptote
follows Table 2's law, ``-ln A = L0 (x / x_c)^-alpha_A``, and ``C_mid = C0 (x / x_c)^-beta_C_mid``; a run's
compute per update grows with ``d_traj`` (rollouts per visit), as the tiny backend's does, and differs a
little by seed (each run records its own FLOPs). Seeds differ as the study's do (``CurveNoise``, defaults
from the planner's stated noise of the default study): a seed's ``-ln A`` is the point's times
``exp(seed_sd z)``, its ``C_mid`` varies by ``cmid_sd`` on a log scale, and a share of seeds does not take
off (its curve stays at the base). Every evaluation is binomial on ``n_V`` episodes; every run's start is
the base's one measured V success, which the fits take as ``R0``. A point's truth is the expected seed's
(``A`` averaged over the seeds' law, take-off failures included; ``B`` and ``C_mid`` the median seed's).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import polars as pl

from axisrl.laws.curve_extrapolation import extrapolation_table
from axisrl.laws.curve_laws import asymptote_laws
from axisrl.laws.curves import LEVEL, fit_points
from axisrl.laws.simulate import GAUSS_HERMITE


@dataclass(frozen=True)
class CurveDesign:
    """The sweeps, seeds (drawn per study from ``seeds``), evaluations and V episodes of a study."""

    grids: Mapping[str, tuple[int, ...]] = field(
        default_factory=lambda: {"d_env": (2, 8, 32), "d_task": (8, 32, 128), "d_traj": (2, 8, 32)}
    )
    centre: Mapping[str, int] = field(default_factory=lambda: {"d_env": 8, "d_task": 32, "d_traj": 8})
    seeds: tuple[int, ...] = (2, 3, 4)
    n_V: int = 256
    updates: int = 100
    evaluations: int = 10
    compute_per_update: float = 1e10
    """At the centre; times ``d_traj / centre d_traj`` elsewhere."""


@dataclass(frozen=True)
class CurveLaw:
    """The truth: the centre's asymptote and half-gain compute (as a share of its largest), the exponents
    per axis, ``B`` and the base's success ``r0`` (None: random init, R0 fitted, true value ``r0_free``)."""

    centre_A: float = 0.45
    alpha_A: Mapping[str, float] = field(default_factory=lambda: {"d_env": 0.3, "d_task": 0.15, "d_traj": 0.0})
    centre_C_mid: float = 0.3
    beta_C_mid: Mapping[str, float] = field(default_factory=lambda: {"d_env": 0.2, "d_task": 0.1, "d_traj": -0.7})
    B: float = 2.0
    r0: float | None = 0.05
    r0_free: float = 0.01


@dataclass(frozen=True)
class CurveNoise:
    """How seeds differ: ``seed_sd`` of ``ln(-ln A)`` (the planner's ``STATED_NOISE``: 0.095), ``cmid_sd`` of
    ``ln C_mid``, the share ``no_take_off`` of seeds whose curve stays at the base (0.028), and ``compute_sd``
    of ``ln`` compute per update."""

    seed_sd: float = 0.095
    cmid_sd: float = 0.1
    no_take_off: float = 0.028
    compute_sd: float = 0.05


class CurveStudy(NamedTuple):
    curves: pl.DataFrame
    """The curve frame (``curves.CURVE_COLUMNS``)."""
    r0: pl.DataFrame | None
    axes: pl.DataFrame
    truth: pl.DataFrame
    """One row per point: ``point_key``, the true ``A``, ``B``, ``C_mid``, ``r0`` (the base's true success) and
    the point's axis amounts."""
    laws: pl.DataFrame
    """One row per axis: the true ``alpha_A``, ``beta_C_mid``."""


def _expected_A(loss: float, seed_sd: float, no_take_off: float, r0: float) -> float:
    """The expected seed's asymptote: ``exp(-loss e^(sd z))`` over ``z``, a non-starter's curve at ``r0``."""
    nodes, weights = GAUSS_HERMITE
    trained = float(np.exp(-loss * np.exp(seed_sd * nodes)) @ weights / weights.sum())
    return (1 - no_take_off) * trained + no_take_off * r0


def simulate_curves(
    design: CurveDesign = CurveDesign(), law: CurveLaw = CurveLaw(), noise: CurveNoise = CurveNoise(), seed: int = 0
) -> CurveStudy:
    """One simulated study of learning curves (``CurveStudy``)."""
    rng = np.random.default_rng(seed)
    seeds = int(rng.choice(design.seeds))
    true_r0 = law.r0 if law.r0 is not None else law.r0_free
    base = rng.binomial(design.n_V, true_r0) / design.n_V  # the base's one V measurement: every run's start
    points: dict[tuple[float, ...], dict] = {}
    axes_rows = []
    for axis, grid in design.grids.items():
        for amount in grid:
            amounts = {**design.centre, axis: amount}
            key = "-".join(f"{a}{v}" for a, v in amounts.items())
            axes_rows.append({"point_key": key, "axis": axis, "amount": float(amount)})
            if key in points:
                continue
            scale = {a: amounts[a] / design.centre[a] for a in design.grids}
            loss = -math.log(law.centre_A) * math.prod(scale[a] ** -law.alpha_A.get(a, 0.0) for a in scale)
            per_update = design.compute_per_update * scale.get("d_traj", 1.0)
            c_mid = law.centre_C_mid * design.compute_per_update * design.updates
            c_mid *= math.prod(scale[a] ** -law.beta_C_mid.get(a, 0.0) for a in scale)
            A = _expected_A(loss, noise.seed_sd, noise.no_take_off, true_r0)
            points[key] = {"point_key": key, "loss": loss, "per_update": per_update, "A": A, "B": law.B}
            points[key] |= {"C_mid": c_mid, "r0": true_r0, **amounts}
    updates = np.linspace(0, design.updates, design.evaluations + 1).round()
    rows = []
    for key, point in points.items():
        for s in range(seeds):
            A = math.exp(-point["loss"] * math.exp(noise.seed_sd * rng.standard_normal()))
            if rng.random() < noise.no_take_off:
                A = true_r0
            c_mid = point["C_mid"] * math.exp(noise.cmid_sd * rng.standard_normal())
            compute = updates * point["per_update"] * math.exp(noise.compute_sd * rng.standard_normal())
            with np.errstate(divide="ignore", over="ignore"):
                p = true_r0 + (A - true_r0) / (1 + np.exp(point["B"] * (math.log(c_mid) - np.log(compute))))
            success = rng.binomial(design.n_V, p[1:]) / design.n_V
            rows += [
                {"run_key": f"{key}-s{s}", "point_key": key, "seed": s, "update": int(u), "compute": float(c)}
                | {"p_V": float(v), "n_V": design.n_V}
                for u, c, v in zip(updates, compute, [base, *success])
            ]
    truth = pl.DataFrame(list(points.values())).drop("loss", "per_update")
    laws = pl.DataFrame(
        [
            {"axis": a, "alpha_A": law.alpha_A.get(a, 0.0), "beta_C_mid": law.beta_C_mid.get(a, 0.0)}
            for a in design.grids
        ]
    )
    r0 = truth.select("point_key", r0=pl.lit(base)) if law.r0 is not None else None
    return CurveStudy(pl.DataFrame(rows), r0, pl.DataFrame(axes_rows), truth, laws)


def _covers(lo: pl.Expr, hi: pl.Expr, truth: pl.Expr) -> pl.Expr:
    return pl.when(lo.is_null() | hi.is_null()).then(None).otherwise((lo <= truth) & (truth <= hi))


class Calibration(NamedTuple):
    summary: pl.DataFrame
    """One row per quantity: ``n`` intervals scored, ``coverage``, its Monte Carlo SE, ``not_identified``
    (share of fits without a number) and ``mean_abs_error`` of the estimate."""
    points: pl.DataFrame
    """Every simulated point's fit beside its truth."""
    seconds: float


def calibrate(
    n_studies: int = 400,
    *,
    design: CurveDesign = CurveDesign(),
    law: CurveLaw = CurveLaw(),
    noise: CurveNoise = CurveNoise(),
    level: float = LEVEL,
    seed: int = 0,
    extrapolation: bool = True,
    interval: str = "t",
) -> Calibration:
    """The coverage of the nominal ``level`` intervals of ``A``, ``B``, ``C_mid`` (per point), of the
    asymptote laws' exponents (per axis) and of the extrapolation intervals, over ``n_studies`` studies.
    ``interval``: the points' intervals (``curves.fit_points``); the laws' always use the seed SEs."""
    started = time.perf_counter()
    point_frames, law_frames, extrapolations = [], [], []
    for i in range(n_studies):
        study = simulate_curves(design, law, noise, seed=seed * 100_003 + i)
        fits = fit_points(study.curves, study.r0, level=level, seed=i, interval=interval)
        point_frames.append(fits.join(study.truth, on="point_key", suffix="_true").with_columns(study=pl.lit(i)))
        laws = asymptote_laws(fits, study.axes, study.curves, level=level)
        law_frames.append(laws.join(study.laws, on="axis", suffix="_true"))
        if extrapolation:
            extrapolations.append(extrapolation_table(study.curves, study.r0, level=level, seed=i))
    points, laws = pl.concat(point_frames), pl.concat(law_frames)
    rows = [
        _row("A", points, "A", "A_lo", "A_hi", "A_true"),
        _row("B", points, "B", "B_lo", "B_hi", "B_true"),
        _row("C_mid", points, "C_mid", "C_mid_lo", "C_mid_hi", "C_mid_true"),
    ]
    for axis in laws["axis"].unique(maintain_order=True):
        of_axis = laws.filter(pl.col("axis") == axis)
        rows.append(_row(f"alpha_A {axis}", of_axis, "alpha_A", "alpha_A_lo", "alpha_A_hi", "alpha_A_true"))
        rows.append(
            _row(f"beta_C_mid {axis}", of_axis, "beta_C_mid", "beta_C_mid_lo", "beta_C_mid_hi", "beta_C_mid_true")
        )
    if extrapolation:
        table = pl.concat(extrapolations)
        for unit in ("run", "point"):
            rows.append(
                _row(f"extrapolation {unit}", table.filter(pl.col("unit") == unit), "predicted", "lo", "hi", "observed")
            )
    return Calibration(pl.DataFrame(rows), points, time.perf_counter() - started)


def _row(quantity: str, frame: pl.DataFrame, estimate: str, lo: str, hi: str, truth: str) -> dict:
    covered = frame.select(_covers(pl.col(lo), pl.col(hi), pl.col(truth)).alias("c"))["c"].drop_nulls()
    n = covered.len()
    coverage = float(covered.mean()) if n else math.nan
    return {
        "quantity": quantity,
        "n": n,
        "coverage": coverage,
        "mc_se": math.sqrt(coverage * (1 - coverage) / n) if n else math.nan,
        "not_identified": float(frame[estimate].is_null().mean()),
        "mean_abs_error": float((frame[estimate] - frame[truth]).abs().mean() or math.nan),
    }
