"""Learning curves on the validation tier V: the saturating fit of ScaleRL (2025), per run and per design point.

    R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)

``A`` is the asymptote (the run's ceiling), ``B`` the efficiency, ``C_mid`` the compute at half the gain, and
``R0`` the success at ``C = 0``: fixed at the base's V success where there is a base (every run of a point
starts from it), else a free parameter. Fitted with lmfit (bounded parameters, MINPACK) on compute scaled by
the curve's largest, with ``C_mid`` on a log scale, so that one fit conditions alike at 1e9 and 1e18 FLOPs.

A fit that the points do not identify says why (``status``, ``reason``) and carries no numbers: too few
points, flat (no gain over ``R0`` that an F-test against the flat line resolves), the asymptote beyond the
data (``C_mid`` above the largest compute, so ``A`` is an extrapolation), or no convergence. Where the rise
falls before the first measured point or between two (``B`` at its bound), ``A`` is the plateau the points
show and only ``B`` and ``C_mid`` are null (``rise_unresolved``).

A design point pools its seeds by fitting every seed's points at once (seeds' compute grids need not align:
each records its own executed FLOPs; on aligned grids it is the fit of the mean curve). Its intervals come
from the bootstrap over seeds, enumerated exactly for up to ``EXACT_SEEDS`` seeds (2 seeds have 3 distinct
resamples, 4 have 35: random draws would only repeat them): the bootstrap's standard error, corrected by
``k / (k - 1)`` for its known shrinkage, with a t quantile on ``k - 1`` degrees of freedom. The percentile
interval of the same resamples covers far too little with 2-4 seeds (``bench/README.md``, issue 51).
The extrapolation check is ``curve_extrapolation``; the laws of ``A`` and ``C_mid`` along the axes, ``curve_laws``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import polars as pl
from scipy import stats

from axisrl.laws.intervals import t_quantile

CURVE_COLUMNS = ("run_key", "point_key", "seed", "update", "compute", "p_V", "n_V")
"""The curve frame: one row per evaluation of a run on V (``compute``: its executed FLOPs so far, 0 at the start)."""
LEVEL = 0.95
B_BOUNDS = (0.1, 10.0)
"""``B >= 10`` puts 10-90 % of the rise within a factor 1.55 of compute: finer than any curve's spacing."""
C_MID_BOUNDS = (1e-3, 10.0)
"""``C_mid`` relative to the curve's largest compute; above 1 the fit says ``beyond_data``."""
FLAT_P = 0.05
"""A fit whose F-test against the flat line has a larger p-value shows no gain over ``R0``."""
MIN_RISING = 3
"""Points after the start a fit needs (three parameters shape the rise)."""
EXACT_SEEDS = 4
"""Up to this many seeds a point's bootstrap enumerates every distinct resample; above, ``n_boot`` draws."""
IDENTIFIED = ("ok", "rise_unresolved")


class Params(NamedTuple):
    """One saturating curve in absolute compute."""

    r0: float
    A: float
    B: float
    C_mid: float

    def predict(self, compute: np.ndarray | float) -> np.ndarray:
        return saturating(compute, *self)


def saturating(compute: np.ndarray | float, r0: float, A: float, B: float, C_mid: float) -> np.ndarray:
    """``R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)``, ``R0`` at ``C = 0``; in logs, so no power overflows."""
    compute = np.asarray(compute, dtype=np.float64)
    with np.errstate(divide="ignore", over="ignore"):
        ratio = np.exp(B * (math.log(C_mid) - np.log(compute)))
    return r0 + (A - r0) / (1.0 + ratio)


@dataclass(frozen=True)
class CurveFit:
    """One fit. ``params``: the converged numbers whatever the status (the bootstrap's spread and the
    extrapolation read them; a table shows only the identified ones, ``reported``). ``covariance``: of the
    free parameters (``A``, ``B``, ``ln C_mid``, then ``R0`` where free), scaled by the residual variance."""

    status: str
    reason: str | None
    n_points: int
    compute_max: float
    r0_fixed: bool
    r0: float | None = None
    """The fixed ``R0`` (None where it is fitted)."""
    params: Params | None = None
    covariance: np.ndarray | None = None
    dof: int = 0
    rmse: float | None = None

    @property
    def identified(self) -> bool:
        return self.status in IDENTIFIED

    def reported(self) -> dict[str, float | None]:
        """``r0, A, B, C_mid`` as a table shows them: null where the points do not identify them."""
        p = self.params
        if p is None or not self.identified:
            return {"r0": self.r0, "A": None, "B": None, "C_mid": None}
        rise = self.status == "ok"
        return {"r0": p.r0, "A": p.A, "B": p.B if rise else None, "C_mid": p.C_mid if rise else None}


def _residual(params: Mapping, log_x: np.ndarray, y: np.ndarray, root_w: np.ndarray, r0: float | None) -> np.ndarray:
    """Weighted residuals of the curve in scaled compute (``log_x = ln(C / C_max)``, -inf at the start)."""
    A, B, log_c = params["A"].value, params["B"].value, params["log_c"].value
    start = r0 if r0 is not None else params["r0"].value
    with np.errstate(over="ignore"):
        model = start + (A - start) / (1.0 + np.exp(B * (log_c - log_x)))
    return root_w * (model - y)


def _start(x: np.ndarray, y: np.ndarray, r0: float) -> tuple[float, float]:
    """(A, ln c_mid) to start from: the last points' level, and where the curve first passes half its gain."""
    A = float(np.clip(np.mean(y[-2:]), 0.0, 1.0))
    half = r0 + (A - r0) / 2
    rising = x > 0
    passed = np.flatnonzero(((y - half) * np.sign(A - r0 or 1.0) >= 0) & rising)
    c = x[passed[0]] if passed.size else np.median(x[rising])
    return A, float(np.log(np.clip(c, C_MID_BOUNDS[0] * 2, 0.9)))


def fit_curve(
    compute: np.ndarray,
    success: np.ndarray,
    trials: np.ndarray | None = None,
    r0: float | None = None,
    start: Params | None = None,
) -> CurveFit:
    """The saturating curve through one curve's points (or several seeds' stacked), weighted by their
    trials. ``r0``: the success at ``C = 0`` held fixed (the base's); None: fitted. ``start``: a fit of
    similar points to begin from (the bootstrap's resamples begin from the original fit)."""
    import lmfit  # here: the CLI and the workflow's parse never need it

    compute, y = np.asarray(compute, np.float64), np.asarray(success, np.float64)
    w = np.ones_like(y) if trials is None else np.asarray(trials, np.float64)
    order = np.argsort(compute, kind="stable")
    compute, y, w = compute[order], y[order], w[order]
    n_free = 3 if r0 is not None else 4
    rising = int(np.unique(compute[compute > 0]).size)
    scale = float(compute.max()) if compute.size else 0.0
    base = CurveFit("too_few_points", None, int(y.size), scale, r0 is not None, r0)
    if rising < MIN_RISING or y.size < n_free + 1:
        need = f"{n_free + 1} points, {MIN_RISING} of them after the start"
        return _with(base, reason=f"{y.size} points ({rising} compute values after the start); a fit needs {need}")
    x = compute / scale
    with np.errstate(divide="ignore"):
        log_x = np.log(x)
    root_w = np.sqrt(w / w.mean())
    first = r0 if r0 is not None else float(y[0])
    A0, log_c0 = (start.A, math.log(start.C_mid / scale)) if start else _start(x, y, first)
    params = lmfit.Parameters()
    params.add("A", value=float(np.clip(A0, 1e-4, 1 - 1e-4)), min=0.0, max=1.0)
    params.add("B", value=float(np.clip(start.B if start else 2.0, *B_BOUNDS)), min=B_BOUNDS[0], max=B_BOUNDS[1])
    params.add("log_c", value=log_c0, min=math.log(C_MID_BOUNDS[0]), max=math.log(C_MID_BOUNDS[1]))
    if r0 is None:
        params.add("r0", value=float(np.clip(start.r0 if start else first, 0.0, 1.0)), min=0.0, max=1.0)

    try:
        result = lmfit.minimize(
            _residual, params, args=(log_x, y, root_w, r0), method="leastsq", nan_policy="propagate"
        )
    except (ValueError, np.linalg.LinAlgError) as exc:
        return _with(base, status="not_converged", reason=f"did not converge ({exc})")
    values = result.params.valuesdict()
    fitted = Params(
        first if r0 is not None else values["r0"], values["A"], values["B"], math.exp(values["log_c"]) * scale
    )
    chi2 = float(np.sum(_residual(result.params, log_x, y, root_w, r0) ** 2))
    if not result.success or not np.isfinite(chi2):
        return _with(base, status="not_converged", reason=f"did not converge ({result.message})")
    dof = y.size - n_free
    covariance = None if result.covar is None else np.asarray(result.covar)
    rmse = float(np.sqrt(np.average((fitted.predict(compute) - y) ** 2, weights=w)))
    fit = _with(base, status="ok", params=fitted, covariance=covariance, dof=dof, rmse=rmse)
    return _with(fit, **_verdict(fitted, x, y, root_w, chi2, dof, r0, scale))


def _with(fit: CurveFit, **changes: object) -> CurveFit:
    return CurveFit(**{**fit.__dict__, **changes})


def _verdict(
    p: Params, x: np.ndarray, y: np.ndarray, root_w: np.ndarray, chi2: float, dof: int, r0: float | None, scale: float
) -> dict:
    """The status of a converged fit and the reason where it is not plainly ``ok``."""
    weight = root_w**2
    flat_level = r0 if r0 is not None else float(np.average(y, weights=weight))
    flat_chi2 = float(np.sum(weight * (y - flat_level) ** 2))
    gained = 3  # parameters the curve adds to the flat line (A, B, C_mid; a free R0 is the line's level)
    f = (flat_chi2 - chi2) / gained / (chi2 / dof) if chi2 > 0 else (np.inf if flat_chi2 > 0 else np.nan)
    p_flat = float(stats.f.sf(f, gained, dof)) if np.isfinite(f) else (0.0 if f == np.inf else 1.0)
    if p_flat > FLAT_P:
        return {"status": "flat", "reason": f"flat: no gain over R0 that the points resolve (F-test p = {p_flat:.2g})"}
    c = p.C_mid / scale
    if c > 1.0:
        largest = f"the largest compute {scale:.3g}"
        return {"status": "beyond_data", "reason": f"asymptote beyond the data: C_mid {p.C_mid:.3g} above {largest}"}
    smallest = float(x[x > 0].min())
    if c < smallest:
        return {"status": "rise_unresolved", "reason": "the rise ends before the first measured compute: B, C_mid null"}
    if p.B >= B_BOUNDS[1] * 0.999:
        return {"status": "rise_unresolved", "reason": "the rise falls between two measured points: B, C_mid null"}
    return {"reason": None}


class RunCurve(NamedTuple):
    key: str
    seed: int
    compute: np.ndarray
    success: np.ndarray
    trials: np.ndarray
    """V episodes per point: the fit's weights (1 where ``n_V`` is null, a user's table without ``n``)."""
    known: bool
    """Whether ``n_V`` was given: without it a run's prediction interval has no binomial term."""


def check_curves(curves: pl.DataFrame) -> None:
    """Refuse a curve frame without the columns the fits read."""
    missing = [c for c in ("run_key", "point_key", "seed", "compute", "p_V", "n_V") if c not in curves.columns]
    if missing:
        raise ValueError(f"curves need columns {', '.join(CURVE_COLUMNS)}; missing {', '.join(missing)}")


def point_runs(curves: pl.DataFrame) -> dict[str, list[RunCurve]]:
    """Per point_key (sorted), its runs' curves (sorted by seed, then run_key), each by compute."""
    check_curves(curves)
    points: dict[str, list[RunCurve]] = {}
    ordered = curves.sort("point_key", "seed", "run_key", "compute")
    for (point, key), rows in ordered.group_by("point_key", "run_key", maintain_order=True):
        run = RunCurve(
            str(key),
            int(rows["seed"][0]),
            rows["compute"].cast(pl.Float64).to_numpy(),
            rows["p_V"].cast(pl.Float64).to_numpy(),
            rows["n_V"].cast(pl.Float64).fill_null(1.0).to_numpy(),
            rows["n_V"].null_count() == 0,
        )
        points.setdefault(str(point), []).append(run)
    return points


def r0_by_point(r0: pl.DataFrame | Mapping[str, float | None] | None) -> dict[str, float | None]:
    """``r0`` as point_key -> base V success (None: no base, R0 fitted)."""
    if r0 is None:
        return {}
    if isinstance(r0, pl.DataFrame):
        return dict(zip(r0["point_key"].cast(pl.String).to_list(), r0["r0"].to_list()))
    return dict(r0)


def stacked(runs: Sequence[RunCurve], counts: np.ndarray, half: bool = False) -> tuple[np.ndarray, ...]:
    """The resample's points: each run's rows (``half``: those up to half its largest compute) repeated by
    its count through the weights."""
    parts = []
    for run, count in zip(runs, counts):
        if count:
            keep = run.compute <= run.compute.max() / 2 if half else slice(None)
            parts.append((run.compute[keep], run.success[keep], run.trials[keep] * count))
    return tuple(np.concatenate(column) for column in zip(*parts))


def seed_resamples(k: int, n_boot: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(counts, probability) of the bootstrap over ``k`` seeds: every distinct resample with its
    multinomial probability up to ``EXACT_SEEDS`` seeds, else ``n_boot`` draws grouped."""
    if k <= EXACT_SEEDS:
        counts = np.array([np.bincount(c, minlength=k) for c in itertools.combinations_with_replacement(range(k), k)])
        log_p = math.lgamma(k + 1) - np.sum([[math.lgamma(c + 1) for c in row] for row in counts], axis=1)
        return counts, np.exp(log_p - k * math.log(k))
    drawn = np.sort(rng.integers(0, k, size=(n_boot, k)), axis=1)
    unique, frequency = np.unique(drawn, axis=0, return_counts=True)
    return np.array([np.bincount(row, minlength=k) for row in unique]), frequency / n_boot


class SeedSpread(NamedTuple):
    """A statistic's seed-level standard error (bootstrap, corrected) and its degrees of freedom."""

    se: float
    dof: int

    def interval(self, estimate: float, level: float) -> tuple[float, float]:
        half = t_quantile(level, self.dof) * self.se
        return estimate - half, estimate + half


def seed_spread(values: np.ndarray, probability: np.ndarray, k: int) -> SeedSpread | None:
    """The bootstrap's standard error of a statistic over ``k`` seeds, times ``sqrt(k / (k - 1))``: the
    bootstrap variance of a mean of ``k`` is ``(k - 1) / k`` of its unbiased estimate. None: one seed, or
    too few resamples converged (under 80 % of the probability)."""
    finite = np.isfinite(values)
    if k < 2 or probability[finite].sum() < 0.8:
        return None
    w = probability[finite] / probability[finite].sum()
    mean = float(w @ values[finite])
    variance = float(w @ (values[finite] - mean) ** 2) * k / (k - 1)
    return SeedSpread(math.sqrt(variance), k - 1)


RUN_FIT_SCHEMA = {
    "run_key": pl.String,
    "point_key": pl.String,
    "seed": pl.Int64,
    "status": pl.String,
    "reason": pl.String,
    "n_points": pl.Int64,
    "compute_max": pl.Float64,
    "r0": pl.Float64,
    "r0_fixed": pl.Boolean,
    "A": pl.Float64,
    "B": pl.Float64,
    "C_mid": pl.Float64,
    "rmse": pl.Float64,
}
"""One row per run: its own curve's fit, no interval (a run is one seed)."""


def fit_runs(curves: pl.DataFrame, r0: pl.DataFrame | Mapping[str, float | None] | None = None) -> pl.DataFrame:
    """Each run's saturating fit (``RUN_FIT_SCHEMA``). ``r0``: point_key -> the base's V success (a frame
    with ``point_key``, ``r0``, or a mapping); a point without one fits ``R0``."""
    starts = r0_by_point(r0)
    rows = []
    for point, runs in point_runs(curves).items():
        for run in runs:
            fit = fit_curve(run.compute, run.success, run.trials, starts.get(point))
            rows.append(
                {"run_key": run.key, "point_key": point, "seed": run.seed, "status": fit.status, "reason": fit.reason}
                | {"n_points": fit.n_points, "compute_max": fit.compute_max, "r0_fixed": fit.r0_fixed}
                | fit.reported()
                | {"rmse": fit.rmse if fit.identified else None}
            )
    return pl.DataFrame(rows, schema=RUN_FIT_SCHEMA)


POINT_FIT_SCHEMA = {
    "point_key": pl.String,
    "n_seeds": pl.Int64,
    "n_points": pl.Int64,
    "compute_max": pl.Float64,
    "status": pl.String,
    "reason": pl.String,
    "r0": pl.Float64,
    "r0_fixed": pl.Boolean,
    "A": pl.Float64,
    "A_lo": pl.Float64,
    "A_hi": pl.Float64,
    "A_se": pl.Float64,
    "B": pl.Float64,
    "B_lo": pl.Float64,
    "B_hi": pl.Float64,
    "C_mid": pl.Float64,
    "C_mid_lo": pl.Float64,
    "C_mid_hi": pl.Float64,
    "ln_C_mid_se": pl.Float64,
    "dof": pl.Int64,
    "n_resamples": pl.Int64,
    "resamples_identified": pl.Float64,
    "interval_note": pl.String,
}
"""One row per design point, seeds pooled. Intervals at ``LEVEL``: ``A +- t SE`` (inside [0, 1]); ``B``
and ``C_mid`` on a log scale. ``A_se``, ``ln_C_mid_se`` and ``dof`` (seeds - 1) feed the asymptote laws.
``resamples_identified``: the bootstrap probability of resamples whose own fit is identified (every
converged resample counts toward the spread: its numbers are draws of the estimator, flagged or not)."""


def _bootstrap(
    runs: Sequence[RunCurve], r0: float | None, fit: CurveFit, n_boot: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, float]:
    """(values [resample, (A, ln B, ln C_mid)], probability, identified share) of the seed bootstrap."""
    counts, probability = seed_resamples(len(runs), n_boot, rng)
    values = np.full((len(counts), 3), np.nan)
    identified = 0.0
    for i, c in enumerate(counts):
        again = fit if np.all(c == 1) else fit_curve(*stacked(runs, c), r0=r0, start=fit.params)
        if again.params is not None:
            values[i] = again.params.A, math.log(again.params.B), math.log(again.params.C_mid)
        identified += probability[i] * again.identified
    return values, probability, identified


def _percentile(values: np.ndarray, probability: np.ndarray, level: float) -> tuple[float, float]:
    """The plain percentile interval of the resamples (for the calibration's comparison only)."""
    finite = np.isfinite(values)
    order = np.argsort(values[finite])
    cumulative = np.cumsum(probability[finite][order]) / probability[finite].sum()
    tail = (1 - level) / 2
    pick = np.searchsorted(cumulative, [tail, 1 - tail])
    ordered = values[finite][order]
    return float(ordered[min(pick[0], ordered.size - 1)]), float(ordered[min(pick[1], ordered.size - 1)])


def fit_points(
    curves: pl.DataFrame,
    r0: pl.DataFrame | Mapping[str, float | None] | None = None,
    *,
    level: float = LEVEL,
    n_boot: int = 200,
    seed: int = 0,
    interval: str = "t",
) -> pl.DataFrame:
    """Each design point's saturating fit over all its seeds' points, with intervals from the bootstrap
    over seeds (``POINT_FIT_SCHEMA``). ``n_boot`` matters only above ``EXACT_SEEDS`` seeds. ``interval``:
    "t" (the bootstrap's corrected SE with a t quantile; calibrated) or "percentile" (the resamples'
    quantiles: what the calibration compares it with, too narrow with 2-4 seeds)."""
    if interval not in ("t", "percentile"):
        raise ValueError(f"interval must be 't' or 'percentile', got {interval!r}")
    starts, rng = r0_by_point(r0), np.random.default_rng(seed)
    rows = []
    for point, runs in point_runs(curves).items():
        k = len(runs)
        fit = fit_curve(*stacked(runs, np.ones(k, np.int64)), r0=starts.get(point))
        reported = fit.reported()
        row = {"point_key": point, "n_seeds": k, "n_points": fit.n_points, "compute_max": fit.compute_max}
        row |= {"status": fit.status, "reason": fit.reason, "r0_fixed": fit.r0_fixed} | reported
        if not fit.identified:
            rows.append(row)
            continue
        values, probability, identified = _bootstrap(runs, starts.get(point), fit, n_boot, rng)
        row |= {"n_resamples": len(probability), "resamples_identified": identified, "dof": k - 1}
        spreads = [seed_spread(values[:, j], probability, k) for j in range(3)]
        if spreads[0] is None:
            note = "one seed: no seed-level interval" if k < 2 else "under 80 % of the seed resamples converged"
            rows.append(row | {"interval_note": note})
            continue
        estimates = (fit.params.A, math.log(fit.params.B), math.log(fit.params.C_mid))
        if interval == "t":
            (lo, hi), (b_lo, b_hi), (c_lo, c_hi) = (
                s.interval(e, level) if s else (math.nan, math.nan) for s, e in zip(spreads, estimates)
            )
        else:
            (lo, hi), (b_lo, b_hi), (c_lo, c_hi) = (_percentile(values[:, j], probability, level) for j in range(3))
        row |= {"A_lo": max(lo, 0.0), "A_hi": min(hi, 1.0), "A_se": spreads[0].se}
        if reported["B"] is not None and spreads[1] is not None and spreads[2] is not None:
            row |= {"B_lo": math.exp(b_lo), "B_hi": math.exp(b_hi), "C_mid_lo": math.exp(c_lo)}
            row |= {"C_mid_hi": math.exp(c_hi), "ln_C_mid_se": spreads[2].se}
        rows.append(row)
    return pl.DataFrame(rows, schema=POINT_FIT_SCHEMA)
