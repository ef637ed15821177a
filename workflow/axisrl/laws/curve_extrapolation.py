"""The extrapolation check of the learning-curve fits: fit each curve's first half, predict its last point.

ScaleRL's practice: a saturating fit is trusted as far as it predicts the compute it did not see. Per run
and per design point (seeds pooled), the fit of the points up to half the curve's largest compute
(``curves.fit_curve``) predicts the success at the last point, with an interval for the observed
success there: a run's from the fit's covariance (delta method) plus the last point's binomial variance,
a point's from the seed bootstrap of the prediction error (the half-curve fit and the observed last
point resampled together, as ``curves.fit_points`` resamples). A summary row per unit gives the mean
absolute error and the share of intervals that covered; their coverage on simulated curves is in
``bench/README.md`` (issue 51).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import polars as pl

from axisrl.laws.curves import (
    LEVEL,
    CurveFit,
    RunCurve,
    fit_curve,
    point_runs,
    r0_by_point,
    saturating,
    seed_resamples,
    seed_spread,
    stacked,
)
from axisrl.laws.intervals import t_quantile

EXTRAPOLATION_SCHEMA = {
    "unit": pl.String,
    "key": pl.String,
    "status": pl.String,
    "reason": pl.String,
    "n_fit_points": pl.Int64,
    "compute_fit_max": pl.Float64,
    "compute_last": pl.Float64,
    "observed": pl.Float64,
    "predicted": pl.Float64,
    "lo": pl.Float64,
    "hi": pl.Float64,
    "error": pl.Float64,
    "covered": pl.Boolean,
    "n_predicted": pl.Int64,
    "mean_abs_error": pl.Float64,
    "coverage": pl.Float64,
}
"""Rows of ``unit`` "run" and "point" (``key``: run_key or point_key): the fit of the curve's first half by
compute (``status`` is that fit's), its prediction of the last point with an interval at ``LEVEL`` for the
observed success there, ``error = predicted - observed`` and whether the interval covered it. One row each
of "all runs" and "all points": ``n_predicted``, ``mean_abs_error`` and ``coverage`` (share of intervals
that covered, over the predictions with one)."""

PREDICTS = ("ok", "rise_unresolved", "beyond_data")
"""Half-curve fits that predict: converged and not flat (a curve beyond its data still extrapolates)."""


def _run_prediction(run: RunCurve, r0: float | None, level: float) -> dict:
    """A run's first half fitted, its last point predicted; the interval adds the last point's binomial
    variance to the fit's (delta method on the covariance, t on the fit's residual dof)."""
    keep = run.compute <= run.compute.max() / 2
    last = int(np.argmax(run.compute))
    fit = fit_curve(run.compute[keep], run.success[keep], run.trials[keep], r0)
    row = _prediction_row("run", run.key, fit, float(run.compute[last]), float(run.success[last]))
    if fit.status not in PREDICTS:
        return row
    predicted = float(fit.params.predict(run.compute[last]))
    row |= {"predicted": predicted, "error": predicted - row["observed"]}
    if fit.covariance is None or fit.dof < 1:
        why = "no interval: the half-curve fit has no covariance (a parameter at its bound)"
        return row | {"reason": f"{row['reason']}; {why}" if row["reason"] else why}
    gradient = _gradient(fit, float(run.compute[last]))
    binomial = predicted * (1 - predicted) / run.trials[last] if run.known else 0.0
    variance = float(gradient @ fit.covariance @ gradient) + binomial
    half = t_quantile(level, fit.dof) * math.sqrt(max(variance, 0.0))
    return row | _covered(predicted - half, predicted + half, row["observed"])


def _gradient(fit: CurveFit, compute: float) -> np.ndarray:
    """d R(compute) / d (A, B, ln C_mid[, R0]) by central differences, in the covariance's order."""
    p = fit.params
    base = np.array([p.A, p.B, math.log(p.C_mid)] + ([] if fit.r0_fixed else [p.r0]))

    def at(v: np.ndarray) -> float:
        return float(saturating(compute, v[3] if v.size > 3 else p.r0, v[0], v[1], math.exp(v[2])))

    steps = 1e-6 * np.maximum(1.0, np.abs(base))
    return np.array(
        [
            (at(base + np.eye(base.size)[i] * h) - at(base - np.eye(base.size)[i] * h)) / (2 * h)
            for i, h in enumerate(steps)
        ]
    )


def _covered(lo: float, hi: float, observed: float) -> dict:
    return {"lo": max(lo, 0.0), "hi": min(hi, 1.0), "covered": bool(lo <= observed <= hi)}


def _prediction_row(unit: str, key: str, fit: CurveFit, compute_last: float, observed: float) -> dict:
    return {
        "unit": unit,
        "key": key,
        "status": fit.status,
        "reason": fit.reason,
        "n_fit_points": fit.n_points,
        "compute_fit_max": fit.compute_max,
        "compute_last": compute_last,
        "observed": observed,
    }


def _last(runs: Sequence[RunCurve], counts: np.ndarray) -> tuple[float, float]:
    """(mean last compute, pooled last success) of a resample of seeds."""
    at = [int(np.argmax(r.compute)) for r in runs]
    n = np.array([r.trials[i] for r, i in zip(runs, at)]) * counts
    k = np.array([r.success[i] * r.trials[i] for r, i in zip(runs, at)]) * counts
    compute = np.array([r.compute[i] for r, i in zip(runs, at)])
    return float(compute @ counts / counts.sum()), float(k.sum() / n.sum())


def _point_prediction(
    point: str, runs: Sequence[RunCurve], r0: float | None, level: float, n_boot: int, rng: np.random.Generator
) -> dict:
    """The seeds' first halves fitted together, the pooled last point predicted; the interval is the
    seed bootstrap's of the prediction error (prediction and observation resampled together)."""
    ones = np.ones(len(runs), np.int64)
    fit = fit_curve(*stacked(runs, ones, half=True), r0=r0)
    compute_last, observed = _last(runs, ones)
    row = _prediction_row("point", point, fit, compute_last, observed)
    if fit.status not in PREDICTS:
        return row
    predicted = float(fit.params.predict(compute_last))
    row |= {"predicted": predicted, "error": predicted - observed}
    counts, probability = seed_resamples(len(runs), n_boot, rng)
    errors = np.full(len(counts), np.nan)
    for i, c in enumerate(counts):
        again = fit if np.all(c == 1) else fit_curve(*stacked(runs, c, half=True), r0=r0, start=fit.params)
        if again.status in PREDICTS:
            at, seen = _last(runs, c)
            errors[i] = float(again.params.predict(at)) - seen
    spread = seed_spread(errors, probability, len(runs))
    if spread is None:
        return row
    lo, hi = spread.interval(predicted, level)
    return row | _covered(lo, hi, observed)


def extrapolation_table(
    curves: pl.DataFrame,
    r0: pl.DataFrame | Mapping[str, float | None] | None = None,
    *,
    level: float = LEVEL,
    n_boot: int = 200,
    seed: int = 0,
) -> pl.DataFrame:
    """Fit each run's and each point's first half (compute up to half the largest), predict the last
    point, and score the prediction (``EXTRAPOLATION_SCHEMA``), with a summary row per unit."""
    starts, rng = r0_by_point(r0), np.random.default_rng(seed)
    rows = []
    points = point_runs(curves)
    for point, runs in points.items():
        rows += [_run_prediction(run, starts.get(point), level) for run in runs]
    for point, runs in points.items():
        rows.append(_point_prediction(point, runs, starts.get(point), level, n_boot, rng))
    table = pl.DataFrame(rows, schema=EXTRAPOLATION_SCHEMA)
    summaries = [_summary(table.filter(pl.col("unit") == unit), f"all {unit}s") for unit in ("run", "point")]
    return pl.concat([table, pl.DataFrame(summaries, schema=EXTRAPOLATION_SCHEMA)])


def _summary(rows: pl.DataFrame, unit: str) -> dict:
    predicted = rows.filter(pl.col("predicted").is_not_null())
    scored = predicted.filter(pl.col("covered").is_not_null())
    return {
        "unit": unit,
        "n_predicted": predicted.height,
        "mean_abs_error": predicted["error"].abs().mean() if predicted.height else None,
        "coverage": scored["covered"].mean() if scored.height else None,
    }
