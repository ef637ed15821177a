"""Estimates of one method's price: the discount ``kappa`` and the collapse ratios ``r_star``.

* ``kappa``: a mixture of ``D_r`` real and ``D_s = ratio * D_r`` synthetic items reaches loss
  ``L_mix``; inverting the real-only law ``L = A x^-alpha`` gives the real amount ``d_eq`` with the
  same loss, and ``kappa = (d_eq - D_r) / D_s`` (1: synthetic worth real, 0: worthless, < 0: harmful).
* ``r_star``: a decreasing 4-parameter logistic in ``log ratio`` is fitted to the normalised success
  ``s(r) = p(r) / p(0)``; ``r_star`` is where it crosses a level going down. Crossings outside the
  sampled ratios are reported as censored, never extrapolated. ``fit_peak`` adds the ratio where
  success peaks, from a mixing law with a harm term.

Every CI comes from the two-stage bootstrap (seeds within each grid point, then binomial
successes): with three seeds per point, resampling seeds alone gives intervals that are too narrow.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import polars as pl
from scipy import optimize, special

from axisrl.laws.data import clipped_loss, point_statistics
from axisrl.laws.models import LEVEL, fit_power

OK = "ok"
KAPPA_SCHEMA = {
    "kappa": pl.Float64,
    "kappa_lo": pl.Float64,
    "kappa_hi": pl.Float64,
    "d_eq": pl.Float64,
    "interpolated": pl.Boolean,
    "status": pl.String,
}
"""``interpolated``: the real-only runs span ``[D_r, (1 + ratio) D_r]`` (at ratio 1: up to 2x the real
amount), so ``d_eq`` for any ``0 <= kappa <= 1`` lies inside the fitted range rather than beyond it."""

COLLAPSE_SCHEMA = {
    "criterion": pl.String,
    "level": pl.Float64,
    "r_star": pl.Float64,
    "r_star_lo": pl.Float64,
    "r_star_hi": pl.Float64,
    "censored": pl.String,
    "lower": pl.Float64,
    "upper": pl.Float64,
    "slope": pl.Float64,
    "r_mid": pl.Float64,
    "r_min": pl.Float64,
    "r_max": pl.Float64,
    "status": pl.String,
}
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
        """Real amount that reaches ``loss`` under the law (inf where a flat bootstrap law overflows)."""
        with np.errstate(over="ignore"):
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
    return _law_from_arrays(
        runs[axis].to_numpy().astype(float),
        runs["successes"].to_numpy().astype(float),
        runs["trials"].to_numpy().astype(float),
    )


def _groups(keys: np.ndarray) -> list[np.ndarray]:
    """Row indices of each distinct key (grid point), for resampling seeds within a point."""
    _, index = np.unique(keys, return_inverse=True)
    return [np.flatnonzero(index == g) for g in range(index.max() + 1)]


def _resample(
    groups: Sequence[np.ndarray], successes: np.ndarray, trials: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Two-stage bootstrap draw: seeds with replacement within each point, then binomial successes.

    One ``integers`` call for all points draws the same stream as ``rng.choice`` point by point.
    """
    sizes = np.array([len(g) for g in groups])
    first = np.repeat(np.cumsum(sizes) - sizes, sizes)
    rows = np.concatenate(groups)[first + rng.integers(0, np.repeat(sizes, sizes))]
    n = trials[rows]
    return rng.binomial(n.astype(np.int64), successes[rows] / n).astype(float), rows


def _joint_bootstrap(
    real: pl.DataFrame,
    axis: str,
    mix_groups: Sequence[np.ndarray],
    mix_successes: np.ndarray,
    mix_trials: np.ndarray,
    n_boot: int,
    seed: int,
    statistic: Callable[[RealLaw, np.ndarray, np.ndarray], float],
) -> np.ndarray:
    """Replicates of ``statistic(law, mixture successes, mixture rows)`` that resample the real-only
    runs and refit their law, then resample the mixture runs (NaN where the refitted law fails)."""
    base = _ok_runs(real)
    real_x, real_k, real_n = (base[c].to_numpy().astype(float) for c in (axis, "successes", "trials"))
    real_groups, rng = _groups(real_x), np.random.default_rng(seed)
    draws = np.full(n_boot, np.nan)
    for b in range(n_boot):
        k, rows = _resample(real_groups, real_k, real_n, rng)
        law = _law_from_arrays(real_x[rows], k, real_n[rows])
        if law.status == OK:
            mk, mrows = _resample(mix_groups, mix_successes, mix_trials, rng)
            draws[b] = statistic(law, mk, mrows)
    return draws


def _kappa_row(**values: object) -> pl.DataFrame:
    return pl.DataFrame([{name: values.get(name) for name in KAPPA_SCHEMA}], schema=KAPPA_SCHEMA)


def _kappa(
    law: RealLaw, mix_successes: np.ndarray, mix_trials: np.ndarray, real_amount: float, ratio: float
) -> tuple[float, float]:
    loss = float(clipped_loss(mix_successes.sum(), mix_trials.sum()))
    d_eq = float(law.invert(loss))
    return (d_eq - real_amount) / (ratio * real_amount), d_eq


def kappa_at(
    real: pl.DataFrame,
    mixed: pl.DataFrame,
    axis: str,
    real_amount: float,
    ratio: float = 1.0,
    n_boot: int = 1000,
    seed: int = 0,
) -> pl.DataFrame:
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

    draws = _joint_bootstrap(
        real,
        axis,
        [np.arange(runs.height)],
        mix_k,
        mix_n,
        n_boot,
        seed,
        lambda boot_law, mk, mrows: _kappa(boot_law, mk, mix_n[mrows], real_amount, ratio)[0],
    )
    tail = 50.0 * (1.0 - LEVEL)
    lo, hi = np.nanpercentile(draws, [tail, 100.0 - tail])
    return _kappa_row(
        kappa=kappa, kappa_lo=float(lo), kappa_hi=float(hi), d_eq=d_eq, interpolated=bool(interpolated), status=OK
    )


def logistic(ratio: np.ndarray, lower: float, upper: float, slope: float, r_mid: float) -> np.ndarray:
    """Normalised success ``s(r)``: ``upper`` at small ``r``, ``lower`` at large ``r`` when ``slope > 0``."""
    return lower + (upper - lower) / (1.0 + np.exp(slope * (np.log(ratio) - np.log(r_mid))))


class Normalised(NamedTuple):
    """Seed-pooled normalised success at each sampled ratio ``r > 0``."""

    ratio: np.ndarray
    s: np.ndarray
    sd: np.ndarray
    """Delta-method SD of ``s`` (binomial)."""


def _normalised(ratio: np.ndarray, successes: np.ndarray, trials: np.ndarray) -> Normalised:
    """Seed-pooled ``s(r) = p(r)/p(0)`` at each ``r > 0`` and its delta-method SD (binomial)."""
    grid, index = np.unique(ratio, return_inverse=True)
    k = np.bincount(index, successes, len(grid))
    n = np.bincount(index, trials, len(grid))
    p = np.clip(k / n, 0.5 / n, 1.0 - 0.5 / n)
    rel_var = (1.0 - p) / (p * n)
    s = p[1:] / p[0]
    return Normalised(grid[1:], s, s * np.sqrt(rel_var[1:] + rel_var[0]))


def _fit_logistic(
    ratio: np.ndarray, s: np.ndarray, sd: np.ndarray, starts: Sequence[np.ndarray], polish: bool = False
) -> np.ndarray:
    """Bounded WLS fit of ``(lower, drop = upper - lower, slope, log r_mid)``; best of ``starts``
    (``polish``: see ``_fit_in_box``).

    ``drop >= 0`` and ``slope > 0`` keep the curve non-increasing, so "crossing going down" is unique.
    """
    log_r = np.log(ratio)
    bounds = np.array([_LOWER_BOUNDS, _DROP_BOUNDS, _SLOPE_BOUNDS, (log_r[0] - _MID_MARGIN, log_r[-1] + _MID_MARGIN)]).T

    def residual(theta: np.ndarray) -> np.ndarray:
        lower, drop, slope, log_mid = theta
        return (lower + drop / (1.0 + np.exp(slope * (log_r - log_mid))) - s) / sd

    def jacobian(theta: np.ndarray) -> np.ndarray:
        _, drop, slope, log_mid = theta
        u = np.exp(slope * (log_r - log_mid))
        g = 1.0 / (1.0 + u)
        return (
            np.column_stack([np.ones_like(g), g, -drop * u * g * g * (log_r - log_mid), drop * u * g * g * slope])
            / sd[:, None]
        )

    return _fit_in_box(residual, jacobian, starts, bounds, polish)


def _fit_in_box(
    residual: Callable[[np.ndarray], np.ndarray],
    jacobian: Callable[[np.ndarray], np.ndarray],
    starts: Sequence[np.ndarray],
    bounds: np.ndarray,
    polish: bool,
) -> np.ndarray:
    """Least squares inside the box ``bounds`` (rows: lower, upper), best of ``starts``: MINPACK's
    Levenberg-Marquardt on ``u`` with ``theta = lower + (upper - lower) * expit(u)``. The bootstrap
    repeats these fits thousands of times, and this is much faster than scipy's bounded trust
    region. The substitution reaches a bound only asymptotically, so a point estimate
    is ``polish``-ed by the bounded trust region from the best start."""
    lower, span = bounds[0], bounds[1] - bounds[0]

    def theta_of(u: np.ndarray) -> np.ndarray:
        return lower + span * special.expit(u)

    def jacobian_of_u(u: np.ndarray) -> np.ndarray:
        e = special.expit(u)
        return jacobian(theta_of(u)) * (span * e * (1.0 - e))

    fits = [
        optimize.least_squares(
            lambda u: residual(theta_of(u)), u0, jac=jacobian_of_u, method="lm", x_scale="jac", ftol=1e-6, xtol=1e-6
        )
        for u0 in (
            special.logit(np.clip((np.asarray(x0, dtype=float) - lower) / span, 1e-9, 1.0 - 1e-9)) for x0 in starts
        )
    ]
    best = theta_of(min(fits, key=lambda f: f.cost).x)
    if not polish:
        return best
    return optimize.least_squares(residual, best, jac=jacobian, bounds=bounds, x_scale="jac", ftol=1e-6, xtol=1e-6).x


def _crossing(theta: np.ndarray, level: float, r_min: float, r_max: float) -> float:
    """Ratio where the fitted curve crosses ``level``; ``+inf``/``-inf`` for beyond ``r_max``/below ``r_min``."""
    lower, drop, slope, log_mid = theta
    if level <= lower:
        return np.inf
    if level >= lower + drop:
        return -np.inf
    r = float(np.exp(log_mid) * ((lower + drop - level) / (level - lower)) ** (1.0 / slope))
    return np.inf if r > r_max else -np.inf if r < r_min else r


def _collapse_rows(status: str) -> pl.DataFrame:
    return pl.DataFrame([{"status": status}], schema=COLLAPSE_SCHEMA)


def fit_collapse(curve: pl.DataFrame, threshold: float = 0.95, n_boot: int = 1000, seed: int = 0) -> pl.DataFrame:
    """Collapse ratios of one method's mixture curve: rows ``threshold`` (default 0.95, Table 3) and
    ``baseline`` (1.0), each with a bootstrap CI and censoring flag. (The logistic is monotone, so
    it has no interior peak: ``fit_peak`` gives Table 17's third criterion.)"""
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
    theta = _fit_logistic(grid, s, sd, starts, polish=True)

    criteria = {"threshold": threshold, "baseline": 1.0}
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
        rows_out.append(
            {
                "criterion": name,
                "level": level,
                "r_star": r if np.isfinite(r) else None,
                "r_star_lo": lo if np.isfinite(lo) else None,
                "r_star_hi": hi if np.isfinite(hi) else None,
                "censored": None if np.isfinite(r) else ">r_max" if r > 0 else "<r_min",
                "lower": theta[0],
                "upper": theta[0] + theta[1],
                "slope": theta[2],
                "r_mid": float(np.exp(theta[3])),
                "r_min": r_min,
                "r_max": r_max,
                "status": OK,
            }
        )
    return pl.DataFrame(rows_out, schema=COLLAPSE_SCHEMA)


_HARM_BOUNDS = np.array([(0.0, 0.01, 0.0, 0.1), (5.0, 100.0, 10.0, 3.0)])
"""Bounds of (kappa0, r_s, H, h) in the mixing law with a harm term."""


def mixing_loss(
    ratio: np.ndarray, law: RealLaw, real_amount: float, kappa0: float, r_s: float, harm: float, power: float
) -> np.ndarray:
    """``L(r) = A D_eff(r)^-alpha + H r^h`` with ``D_eff = D_r (1 + kappa0 r_s (1 - e^(-r/r_s)))``:
    synthetic units add saturating effective data and a growing harm, so the loss can fall then rise."""
    d_eff = real_amount * (1.0 + kappa0 * r_s * (1.0 - np.exp(-ratio / r_s)))
    return law.A * d_eff**-law.alpha + harm * ratio**power


def _peak(
    law: RealLaw,
    ratio: np.ndarray,
    successes: np.ndarray,
    trials: np.ndarray,
    real_amount: float,
    r_min: float,
    r_max: float,
    starts: Sequence[np.ndarray] | None = None,
) -> tuple[float, np.ndarray]:
    """Ratio of the lowest loss of the fitted mixing law over the sampled range (``-inf``/``+inf`` when
    it sits at the smallest/largest sampled ratio: the peak is not resolved there), and the fit.
    Without ``starts``: the point estimate, from four starts and polished (``_fit_in_box``)."""
    grid, index = np.unique(ratio, return_inverse=True)
    stats = point_statistics(index, successes, trials, len(grid))
    sd = np.sqrt(np.maximum(stats.var_loss, 1e-12))

    log_grid = np.log(np.where(grid > 0, grid, 1.0))

    def residual(theta: np.ndarray) -> np.ndarray:
        return (mixing_loss(grid, law, real_amount, *theta) - stats.loss) / sd

    def jacobian(theta: np.ndarray) -> np.ndarray:
        kappa0, r_s, harm, power = theta
        decay = np.exp(-grid / r_s)
        d_eff = real_amount * (1.0 + kappa0 * r_s * (1.0 - decay))
        slope = -law.alpha * law.A * d_eff ** (-law.alpha - 1.0) * real_amount
        harm_term = grid**power
        return (
            np.column_stack(
                [
                    slope * r_s * (1.0 - decay),
                    slope * kappa0 * (1.0 - decay - grid / r_s * decay),
                    harm_term,
                    harm * harm_term * log_grid,
                ]
            )
            / sd[:, None]
        )

    polish = starts is None
    if polish:
        starts = [np.array([k0, 4.0, hh, 1.0]) for k0 in (0.2, 1.0) for hh in (1e-3, 0.05)]
    theta = _fit_in_box(residual, jacobian, starts, _HARM_BOUNDS, polish)
    dense = np.exp(np.linspace(np.log(r_min), np.log(r_max), 401))
    best = int(np.argmin(mixing_loss(dense, law, real_amount, *theta)))
    return (-np.inf if best == 0 else np.inf if best == len(dense) - 1 else float(dense[best])), theta


def fit_peak(
    real: pl.DataFrame, curve: pl.DataFrame, axis: str, real_amount: float, n_boot: int = 1000, seed: int = 0
) -> pl.DataFrame:
    """Table 17's peak criterion: the ratio where success peaks, from the mixing law with a harm term
    fitted to the mixture losses (the real-only law fixes ``A`` and ``alpha``); the CI refits the
    law and the mixture jointly, like ``kappa_at``. One ``COLLAPSE_SCHEMA`` row."""
    law = fit_real_law(real, axis)
    runs = _ok_runs(curve)
    positive = np.unique(runs.filter(pl.col("ratio") > 0)["ratio"].to_numpy())
    if law.status != OK:
        return pl.DataFrame([{"criterion": "peak", "status": law.status}], schema=COLLAPSE_SCHEMA)
    if len(positive) < 5:
        return pl.DataFrame(
            [{"criterion": "peak", "status": "too few ratios for the mixing law"}], schema=COLLAPSE_SCHEMA
        )
    r_min, r_max = float(positive[0]), float(positive[-1])
    ratio, k, n = (runs[c].to_numpy().astype(float) for c in ("ratio", "successes", "trials"))
    r, theta = _peak(law, ratio, k, n, real_amount, r_min, r_max)
    draws = _joint_bootstrap(
        real,
        axis,
        _groups(ratio),
        k,
        n,
        n_boot,
        seed,
        lambda boot_law, mk, mrows: _peak(boot_law, ratio[mrows], mk, n[mrows], real_amount, r_min, r_max, [theta])[0],
    )
    tail = 50.0 * (1.0 - LEVEL)
    kept = draws[~np.isnan(draws)]
    lo, hi = (
        (float(np.percentile(kept, q, method="inverted_cdf")) for q in (tail, 100.0 - tail))
        if len(kept)
        else (np.nan, np.nan)
    )
    return pl.DataFrame(
        [
            {
                "criterion": "peak",
                "r_star": r if np.isfinite(r) else None,
                "r_star_lo": lo if np.isfinite(lo) else None,
                "r_star_hi": hi if np.isfinite(hi) else None,
                "censored": None if np.isfinite(r) else ">r_max" if r > 0 else "<r_min",
                "r_min": r_min,
                "r_max": r_max,
                "status": OK,
            }
        ],
        schema=COLLAPSE_SCHEMA,
    )


def normalised_curve(mixed: pl.DataFrame) -> pl.DataFrame:
    """Figure 4's points: seed-pooled ``s(r) = p(r) / p(0)`` per ratio with a 95% delta-method band."""
    runs = _ok_runs(mixed)
    if runs.filter(pl.col("ratio") == 0).height == 0 or runs.filter(pl.col("ratio") > 0).height == 0:
        return pl.DataFrame(
            schema={"ratio": pl.Float64, "s": pl.Float64, "s_lo": pl.Float64, "s_hi": pl.Float64, "seeds": pl.Int64}
        )
    ratio, k, n = (runs[c].to_numpy().astype(float) for c in ("ratio", "successes", "trials"))
    grid, s, sd = _normalised(ratio, k, n)
    seeds = runs.filter(pl.col("ratio") > 0).group_by("ratio").len().sort("ratio")["len"].to_numpy()
    z = 1.959963984540054
    return pl.DataFrame({"ratio": grid, "s": s, "s_lo": s - z * sd, "s_hi": s + z * sd, "seeds": seeds})
