"""Pricing synthetic data: the discount ``kappa`` and the collapse ratio ``r_star`` (fitting.md 5.3).

Paper anchors: Table 3 / Table 16 (kappa at r = 1, r_star at 0.95), Table 17 (alternative collapse
criteria) and Figure 4 (success normalised to the real-only run, against ``ratio = D_s / D_r``).

* ``kappa``: a mixture of ``D_r`` real and ``D_s = ratio * D_r`` synthetic items reaches loss
  ``L_mix``; inverting the real-only law ``L = A x^-alpha`` gives the real amount ``d_eq`` with the
  same loss, and ``kappa = (d_eq - D_r) / D_s`` (1: synthetic worth real, 0: worthless, < 0: harmful).
* ``r_star``: a decreasing 4-parameter logistic in ``log ratio`` is fitted to the normalised success
  ``s(r) = p(r) / p(0)``; ``r_star`` is where it crosses a level going down. Crossings outside the
  sampled ratios are reported as censored, never extrapolated.

Both CIs come from the two-stage bootstrap (seeds within each grid point, then binomial successes),
because a seed-only bootstrap with three seeds under-covers (fitting.md 5.0).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl
from scipy import optimize

from axisrl.laws.axis import LEVEL, fit_power
from axisrl.laws.data import clipped_loss, point_statistics

OK = "ok"
KAPPA_SCHEMA = {"kappa": pl.Float64, "kappa_lo": pl.Float64, "kappa_hi": pl.Float64, "d_eq": pl.Float64,
                "interpolated": pl.Boolean, "status": pl.String}
"""``interpolated``: the real-only runs span ``[D_r, (1 + ratio) D_r]`` (at ratio 1: up to 2x the real
amount), so ``d_eq`` for any ``0 <= kappa <= 1`` lies inside the fitted range rather than beyond it."""

COLLAPSE_SCHEMA = {"criterion": pl.String, "level": pl.Float64, "r_star": pl.Float64, "r_star_lo": pl.Float64,
                   "r_star_hi": pl.Float64, "censored": pl.String, "lower": pl.Float64, "upper": pl.Float64,
                   "slope": pl.Float64, "r_mid": pl.Float64, "r_min": pl.Float64, "r_max": pl.Float64,
                   "status": pl.String}
"""``level`` is the crossed value of ``s`` (null for ``peak``); ``censored`` is ``">r_max"``/``"<r_min"``
when the point estimate falls outside the sampled ratios (``r_star`` then null); a CI bound is null
when more than the tail fraction of bootstrap replicates is censored on that side."""

_LOWER_BOUNDS = (0.0, 2.0)
_DROP_BOUNDS = (0.0, 3.0)
_SLOPE_BOUNDS = (0.05, 50.0)
_MID_MARGIN = 3.0
"""``log r_mid`` may sit this far (in log units) outside the sampled range: far enough to express a
flat curve, bounded so that the optimiser cannot run off to infinity."""


@dataclass(frozen=True)
class RealLaw:
    """Real-only power law ``L = A x^-alpha`` and the span of ``x`` it was fitted on."""

    A: float
    alpha: float
    x_min: float
    x_max: float
    status: str

    def invert(self, loss: float | np.ndarray) -> float | np.ndarray:
        """Real amount that reaches ``loss`` under the law."""
        return (np.asarray(loss) / self.A) ** (-1.0 / self.alpha)


def _failed_law(status: str) -> RealLaw:
    return RealLaw(np.nan, np.nan, np.nan, np.nan, status)


def _ok_runs(runs: pl.DataFrame) -> pl.DataFrame:
    """Drop runs marked failed, when the table carries a run ``status``."""
    return runs.filter(pl.col("status") == OK) if "status" in runs.columns else runs


def _law_from_arrays(x: np.ndarray, successes: np.ndarray, trials: np.ndarray) -> RealLaw:
    """Seed-pooled WLS power law (``axisrl.laws.axis.fit_power``) on runs at grid values ``x``."""
    grid, index = np.unique(x, return_inverse=True)
    if len(grid) < 3:
        return _failed_law("too few real-only grid points")
    stats = point_statistics(index, successes, trials, len(grid))
    fit = fit_power(grid, stats.loss, stats.var_loss)
    if not fit.alpha > 0:
        return _failed_law("real-only loss does not fall with the axis")
    return RealLaw(fit.A, fit.alpha, float(grid[0]), float(grid[-1]), OK)


def fit_real_law(real: pl.DataFrame, axis: str) -> RealLaw:
    """Fit the real-only law on seed-pooled points; a missing or failed baseline gives a status, not
    an exception, so one bad method cannot stop the pricing of the others."""
    if real.height == 0:
        return _failed_law("no real-only baseline")
    runs = _ok_runs(real)
    if runs.height == 0:
        return _failed_law("real-only baseline failed")
    return _law_from_arrays(runs[axis].to_numpy().astype(float), runs["successes"].to_numpy().astype(float),
                            runs["trials"].to_numpy().astype(float))


def _groups(keys: np.ndarray) -> list[np.ndarray]:
    """Row indices of each distinct key (grid point), for resampling seeds within a point."""
    _, index = np.unique(keys, return_inverse=True)
    return [np.flatnonzero(index == g) for g in range(index.max() + 1)]


def _resample(groups: Sequence[np.ndarray], successes: np.ndarray, trials: np.ndarray,
              rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Two-stage bootstrap draw: seeds with replacement within each point, then binomial successes."""
    rows = np.concatenate([rng.choice(g, size=len(g)) for g in groups])
    n = trials[rows]
    return rng.binomial(n.astype(np.int64), successes[rows] / n).astype(float), rows


def _kappa_row(**values: object) -> pl.DataFrame:
    return pl.DataFrame([{name: values.get(name) for name in KAPPA_SCHEMA}], schema=KAPPA_SCHEMA)


def _kappa(law: RealLaw, mix_successes: np.ndarray, mix_trials: np.ndarray, real_amount: float,
           ratio: float) -> tuple[float, float]:
    loss = float(clipped_loss(mix_successes.sum(), mix_trials.sum()))
    d_eq = float(law.invert(loss))
    return (d_eq - real_amount) / (ratio * real_amount), d_eq


def kappa_at(real: pl.DataFrame, mixed: pl.DataFrame, axis: str, real_amount: float, ratio: float = 1.0,
             n_boot: int = 1000, seed: int = 0) -> pl.DataFrame:
    """Discount ``kappa`` of the mixture ``D_r = real_amount``, ``D_s = ratio * D_r`` (one row).

    ``mixed`` holds mixture runs (``ratio``, ``successes``, ``trials``, ``seed``; an ``axis`` column,
    if present, selects ``real_amount``). The CI refits the real-only law and re-pools the mixture
    in every replicate, so it carries both sources of noise and is typically asymmetric.
    """
    law = fit_real_law(real, axis)
    if law.status != OK:
        return _kappa_row(interpolated=False, status=law.status)
    runs = _ok_runs(mixed).filter(pl.col("ratio") == ratio)
    if axis in runs.columns:
        runs = runs.filter(pl.col(axis) == real_amount)
    if runs.height == 0:
        return _kappa_row(interpolated=False, status="no mixture runs at this ratio")
    interpolated = law.x_min <= real_amount and law.x_max >= (1.0 + ratio) * real_amount
    mix_k, mix_n = (runs[c].to_numpy().astype(float) for c in ("successes", "trials"))
    kappa, d_eq = _kappa(law, mix_k, mix_n, real_amount, ratio)

    base = _ok_runs(real)
    real_x, real_k, real_n = (base[c].to_numpy().astype(float) for c in (axis, "successes", "trials"))
    real_groups, mix_groups = _groups(real_x), [np.arange(runs.height)]
    rng = np.random.default_rng(seed)
    draws = np.full(n_boot, np.nan)
    for b in range(n_boot):
        k, rows = _resample(real_groups, real_k, real_n, rng)
        boot_law = _law_from_arrays(real_x[rows], k, real_n[rows])
        if boot_law.status == OK:
            mk, mrows = _resample(mix_groups, mix_k, mix_n, rng)
            draws[b] = _kappa(boot_law, mk, mix_n[mrows], real_amount, ratio)[0]
    tail = 50.0 * (1.0 - LEVEL)
    lo, hi = np.nanpercentile(draws, [tail, 100.0 - tail])
    return _kappa_row(kappa=kappa, kappa_lo=float(lo), kappa_hi=float(hi), d_eq=d_eq,
                      interpolated=bool(interpolated), status=OK)


def logistic(ratio: np.ndarray, lower: float, upper: float, slope: float, r_mid: float) -> np.ndarray:
    """Normalised success ``s(r)``: ``upper`` at small ``r``, ``lower`` at large ``r`` when ``slope > 0``."""
    return lower + (upper - lower) / (1.0 + np.exp(slope * (np.log(ratio) - np.log(r_mid))))


def _normalised(ratio: np.ndarray, successes: np.ndarray, trials: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Seed-pooled ``s(r) = p(r)/p(0)`` at each ``r > 0`` and its delta-method SD (binomial)."""
    grid, index = np.unique(ratio, return_inverse=True)
    k = np.bincount(index, successes, len(grid))
    n = np.bincount(index, trials, len(grid))
    p = np.clip(k / n, 0.5 / n, 1.0 - 0.5 / n)
    rel_var = (1.0 - p) / (p * n)
    s = p[1:] / p[0]
    return grid[1:], s, s * np.sqrt(rel_var[1:] + rel_var[0])


def _fit_logistic(ratio: np.ndarray, s: np.ndarray, sd: np.ndarray, starts: Sequence[np.ndarray]
                  ) -> np.ndarray:
    """Bounded WLS fit of ``(lower, drop = upper - lower, slope, log r_mid)``; best of ``starts``.

    ``drop >= 0`` and ``slope > 0`` keep the curve non-increasing, so "crossing going down" is unique.
    """
    log_r = np.log(ratio)
    bounds = np.array([_LOWER_BOUNDS, _DROP_BOUNDS, _SLOPE_BOUNDS,
                       (log_r[0] - _MID_MARGIN, log_r[-1] + _MID_MARGIN)]).T

    def residual(theta: np.ndarray) -> np.ndarray:
        lower, drop, slope, log_mid = theta
        return (lower + drop / (1.0 + np.exp(slope * (log_r - log_mid))) - s) / sd

    fits = [optimize.least_squares(residual, np.clip(x0, bounds[0], bounds[1]), bounds=bounds) for x0 in starts]
    return min(fits, key=lambda f: f.cost).x


def _crossing(theta: np.ndarray, level: float | None, r_min: float, r_max: float) -> float:
    """Ratio of the criterion on the fitted curve; ``+inf``/``-inf`` for beyond ``r_max``/below ``r_min``.

    ``level=None`` is the peak: the argmax over the sampled range, censored when it sits at an edge
    (a monotone logistic peaks at the edge, i.e. the true peak is not resolved by the samples).
    """
    lower, drop, slope, log_mid = theta
    if level is None:
        grid = np.exp(np.linspace(np.log(r_min), np.log(r_max), 401))
        best = int(np.argmax(logistic(grid, lower, lower + drop, slope, np.exp(log_mid))))
        return -np.inf if best == 0 else np.inf if best == len(grid) - 1 else float(grid[best])
    if level <= lower:
        return np.inf
    if level >= lower + drop:
        return -np.inf
    r = float(np.exp(log_mid) * ((lower + drop - level) / (level - lower)) ** (1.0 / slope))
    return np.inf if r > r_max else -np.inf if r < r_min else r


def _collapse_rows(status: str) -> pl.DataFrame:
    return pl.DataFrame([{"status": status}], schema=COLLAPSE_SCHEMA)


def fit_collapse(curve: pl.DataFrame, threshold: float = 0.95, n_boot: int = 1000, seed: int = 0) -> pl.DataFrame:
    """Collapse ratios of one method's mixture curve: rows ``threshold`` (default 0.95, Table 3),
    ``baseline`` (1.0) and ``peak`` (Table 17), each with a bootstrap CI and censoring flag."""
    runs = _ok_runs(curve)
    ratio, k, n = (runs[c].to_numpy().astype(float) for c in ("ratio", "successes", "trials"))
    if not (ratio == 0).any():
        return _collapse_rows("no real-only baseline")
    positive = np.unique(ratio[ratio > 0])
    if len(positive) < 5:
        return _collapse_rows("too few ratios for a 4-parameter logistic")
    r_min, r_max = float(positive[0]), float(positive[-1])
    grid, s, sd = _normalised(ratio, k, n)
    log_r = np.log(grid)
    starts = [np.array([s.min(), max(s[:2].max() - s.min(), 0.01), 2.0, m]) for m in log_r[1:-1:2]]
    theta = _fit_logistic(grid, s, sd, starts)

    criteria = {"threshold": threshold, "baseline": 1.0, "peak": None}
    groups, rng = _groups(ratio), np.random.default_rng(seed)
    draws = np.full((n_boot, len(criteria)), np.nan)
    for b in range(n_boot):
        kb, rows = _resample(groups, k, n, rng)
        _, sb, sdb = _normalised(ratio[rows], kb, n[rows])
        tb = _fit_logistic(grid, sb, sdb, [theta])
        draws[b] = [_crossing(tb, level, r_min, r_max) for level in criteria.values()]

    tail = 50.0 * (1.0 - LEVEL)
    rows_out = []
    for j, (name, level) in enumerate(criteria.items()):
        r = _crossing(theta, level, r_min, r_max)
        lo, hi = (float(np.percentile(draws[:, j], q, method="inverted_cdf")) for q in (tail, 100.0 - tail))
        rows_out.append({
            "criterion": name, "level": level, "r_star": r if np.isfinite(r) else None,
            "r_star_lo": lo if np.isfinite(lo) else None, "r_star_hi": hi if np.isfinite(hi) else None,
            "censored": None if np.isfinite(r) else ">r_max" if r > 0 else "<r_min",
            "lower": theta[0], "upper": theta[0] + theta[1], "slope": theta[2], "r_mid": float(np.exp(theta[3])),
            "r_min": r_min, "r_max": r_max, "status": OK})
    return pl.DataFrame(rows_out, schema=COLLAPSE_SCHEMA)


def simulate_mixture(axis: str, real_grid: Sequence[float], real_amount: float, ratios: Sequence[float], *,
                     A: float, alpha: float, kappa: float = 1.0,
                     collapse: tuple[float, float, float, float] | None = None,
                     trials: int = 1000, n_seeds: int = 3, seed: int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Known-truth runs for tests: ``(real, mixed)``.

    Real-only runs at ``real_grid`` succeed with ``p = exp(-A x^-alpha)``. A mixture at ``ratio``
    succeeds with ``p = exp(-A (D_r + kappa ratio D_r)^-alpha) * s(ratio)``, where ``s`` is the
    logistic ``collapse = (lower, upper, slope, r_mid)`` (1 when None); ``ratio = 0`` rows are the
    real-only runs at ``D_r``. Noise is binomial over ``trials`` tasks per seed.
    """
    rng = np.random.default_rng(seed)
    seeds = np.arange(n_seeds)
    real_x = np.repeat(np.asarray(real_grid, float), n_seeds)
    real_p = np.exp(-A * real_x ** -alpha)
    real = pl.DataFrame({axis: real_x, "successes": rng.binomial(trials, real_p), "trials": trials,
                         "seed": np.tile(seeds, len(real_grid))})
    r = np.repeat(np.asarray(ratios, float), n_seeds)
    shape = np.ones_like(r)
    if collapse is not None:
        positive = r > 0
        shape[positive] = logistic(r[positive], *collapse)
    mix_p = np.clip(np.exp(-A * (real_amount * (1.0 + kappa * r)) ** -alpha) * shape, 0.0, 1.0)
    mixed = pl.DataFrame({axis: real_amount, "ratio": r, "successes": rng.binomial(trials, mix_p),
                          "trials": trials, "seed": np.tile(seeds, len(ratios))})
    return real, mixed
