"""The two models of one sweep's seed-pooled loss ``L = -ln p`` at its grid points ``x``, fitted to
plain arrays: the numerical layer under the per-axis analyses (``axis``), kept apart from their
runs-table bookkeeping; it also gives the joint law its exponent bounds and pricing its power fits.

* ``power``: ``ln L = ln A - alpha ln x`` by WLS with weights ``1/var(ln L)`` (delta method), a
  t-interval on ``G - 2`` degrees of freedom inflated by ``sqrt(max(1, chi2/(G-2)))`` when the
  points scatter more than their variances allow (pricing's real-only laws use it; the per-axis
  slopes of ``axis`` report the seed-level interval of ``intervals`` instead, which curvature does
  not widen).
* ``floor``: ``L = E + A x^-alpha``, ``E, A >= 0``, by variable projection: for fixed ``alpha``, E
  and A by weighted non-negative least squares, profiled over ``alpha`` in ``ALPHA_BOUNDS``; the
  CI is the profile-likelihood set ``WRSS(alpha) - WRSS_min <= s2 F(1, G-3)``, with
  ``s2 = max(1, WRSS_min/(G-3))``. E and alpha trade off over short ranges, so asymptotic SEs
  would mislead.

``quasi_aicc`` scores either fit for the preference ``axis`` reports (information only).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

import numpy as np
from scipy import optimize, stats

from axisrl.laws.intervals import t_quantile

ALPHA_BOUNDS = (0.01, 1.5)
ALPHA_GRID = np.linspace(*ALPHA_BOUNDS, 150)
LEVEL = 0.95
N_PARAMS = {"power": 2, "floor": 3}
MIN_POINTS = {model: n + 1 for model, n in N_PARAMS.items()}
"""Each model needs a residual degree of freedom for its dispersion."""


@dataclass(frozen=True)
class ExponentFit:
    """One model fitted to one sweep. ``chi2`` is the weighted RSS in the model's fitting scale."""

    alpha: float
    alpha_lo: float
    alpha_hi: float
    E: float | None
    A: float
    chi2: float
    dof: int
    r_squared: float


@lru_cache(maxsize=64)
def _f_quantile(dof: int) -> float:
    """``LEVEL`` quantile of ``F(1, dof)``, cached like ``intervals.t_quantile``."""
    return float(stats.f.ppf(LEVEL, 1, dof))


def fit_power(x: np.ndarray, loss: np.ndarray, var_loss: np.ndarray) -> ExponentFit:
    """Weighted log-log line with a dispersion-corrected t-interval for ``alpha``.

    The arithmetic of ``statsmodels`` WLS (pseudo-inverse of the whitened design by SVD), without
    its model and results objects, which cost a hundred times the fit in every bootstrap replicate.
    Kept to the same operations, not a closed form, so that degenerate replicates (a flat sweep, a
    slope of rounding size) come out the same: the pricing bootstrap branches on the slope's sign.
    """
    weight = loss**2 / var_loss
    log_loss = np.log(loss)
    root_weight = np.sqrt(weight)
    design = root_weight[:, None] * np.column_stack((np.ones(len(x)), np.log(x)))
    u, singular, vt = np.linalg.svd(design, False)
    cutoff = 1e-15 * np.maximum.reduce(singular)
    inverse = np.where(singular > cutoff, 1.0 / singular, 0.0)
    pinv = np.dot(np.transpose(vt), np.multiply(inverse[:, np.newaxis], np.transpose(u)))
    params = np.dot(pinv, log_loss * root_weight)
    residual = log_loss * root_weight - np.dot(design, params)
    chi2 = float(np.dot(residual, residual))
    dof = len(x) - 2
    scale = chi2 / dof
    se_known_variance = np.sqrt(np.dot(pinv, np.transpose(pinv))[1, 1] * scale) / np.sqrt(scale)
    half = t_quantile(LEVEL, dof) * se_known_variance * np.sqrt(max(1.0, chi2 / dof))
    alpha = -float(params[1])
    centered_tss = np.sum(weight * (log_loss - np.average(log_loss, weights=weight)) ** 2)
    with np.errstate(divide="ignore", invalid="ignore"):  # a flat resample: R^2 undefined, as in statsmodels
        r_squared = float(1 - chi2 / centered_tss)
    return ExponentFit(alpha, alpha - half, alpha + half, None, float(np.exp(params[0])), chi2, dof, r_squared)


class FloorProfile(NamedTuple):
    """The floor model's best ``E, A >= 0`` at each of a grid of alphas, and its weighted RSS there."""

    rss: np.ndarray
    E: np.ndarray
    A: np.ndarray


def floor_profile(alphas: np.ndarray, x: np.ndarray, loss: np.ndarray, weight: np.ndarray) -> FloorProfile:
    """Weighted RSS, E and A minimised over ``E, A >= 0`` at each fixed alpha: the linear half of VP.

    Two non-negative coefficients have a closed form (the unconstrained optimum when feasible,
    else the better edge), which vectorises over a grid of alphas; ``scipy.optimize.nnls`` per
    alpha made this profile the bottleneck of every fit.
    """
    feature = x[None, :] ** -np.asarray(alphas, dtype=np.float64)[:, None]
    s_w, s_y = weight.sum(), weight @ loss
    s_f, s_ff, s_fy = feature @ weight, (feature**2) @ weight, feature @ (weight * loss)
    det = s_w * s_ff - s_f**2
    with np.errstate(divide="ignore", invalid="ignore"):
        E_free, A_free = (s_ff * s_y - s_f * s_fy) / det, (s_w * s_fy - s_f * s_y) / det
    E = np.stack([E_free, np.zeros_like(s_f), np.full_like(s_f, max(0.0, s_y / s_w))])
    A = np.stack([A_free, np.maximum(0.0, s_fy / s_ff), np.zeros_like(s_f)])
    rss = np.sum(weight * (loss - E[..., None] - A[..., None] * feature[None]) ** 2, axis=-1)
    rss[0, ~((E_free >= 0) & (A_free >= 0) & (det > 0))] = np.inf
    best = np.argmin(rss, axis=0)
    columns = np.arange(len(s_f))
    return FloorProfile(rss[best, columns], E[best, columns], A[best, columns])


def _floor_rss(alpha: float, log_x: np.ndarray, loss: np.ndarray, weight: np.ndarray) -> float:
    """``floor_profile``'s weighted RSS at one alpha: the same candidates, without the grid machinery
    (the scalar search calls it a dozen times per fit, in every bootstrap replicate)."""
    feature = np.exp(-alpha * log_x)
    weighted = weight * feature
    s_w, s_y = weight.sum(), weight @ loss
    s_f, s_ff, s_fy = weighted.sum(), weighted @ feature, weighted @ loss
    det = s_w * s_ff - s_f * s_f
    candidates = [(0.0, max(0.0, s_fy / s_ff)), (max(0.0, s_y / s_w), 0.0)]
    if det > 0:
        E, A = (s_ff * s_y - s_f * s_fy) / det, (s_w * s_fy - s_f * s_y) / det
        if E >= 0 and A >= 0:
            candidates.insert(0, (E, A))
    best = np.inf
    for E, A in candidates:
        residual = loss - E - A * feature
        best = min(best, float(weight @ (residual * residual)))
    return best


def fit_floor(x: np.ndarray, loss: np.ndarray, var_loss: np.ndarray, with_ci: bool = True) -> ExponentFit:
    """``L = E + A x^-alpha`` by variable projection with a profile-likelihood CI for ``alpha``."""
    weight = 1.0 / var_loss
    log_x = np.log(x)

    def profile(alpha: float) -> float:
        return _floor_rss(alpha, log_x, loss, weight)

    grid_rss = floor_profile(ALPHA_GRID, x, loss, weight).rss
    best = int(np.argmin(grid_rss))
    bracket = (ALPHA_GRID[max(best - 1, 0)], ALPHA_GRID[min(best + 1, len(ALPHA_GRID) - 1)])
    refined = optimize.minimize_scalar(profile, bounds=bracket, method="bounded", options={"xatol": 1e-7})
    alpha = float(refined.x) if refined.fun < grid_rss[best] else float(ALPHA_GRID[best])
    rss, E, A = (float(v[0]) for v in floor_profile(np.array([alpha]), x, loss, weight))
    dof = len(x) - 3
    alpha_lo = alpha_hi = np.nan
    if with_ci:
        threshold = rss + max(1.0, rss / dof) * _f_quantile(dof)
        alpha_lo = _profile_crossing(profile, grid_rss, alpha, threshold, side=-1)
        alpha_hi = _profile_crossing(profile, grid_rss, alpha, threshold, side=+1)
    mean = np.average(loss, weights=weight)
    with np.errstate(divide="ignore", invalid="ignore"):  # a flat sweep: R^2 undefined, as for fit_power
        r_squared = float(1.0 - rss / np.sum(weight * (loss - mean) ** 2))
    return ExponentFit(alpha, alpha_lo, alpha_hi, E, A, rss, dof, r_squared)


def _profile_crossing(
    profile: Callable[[float], float], grid_rss: np.ndarray, alpha: float, threshold: float, side: int
) -> float:
    """Where the profile first rises above ``threshold`` walking from ``alpha`` (the bound if never)."""
    inside = ALPHA_GRID[::side][(ALPHA_GRID[::side] - alpha) * side > 0]
    rss = grid_rss[::side][(ALPHA_GRID[::side] - alpha) * side > 0]
    previous = alpha
    for point, value in zip(inside, rss, strict=True):
        if value > threshold:
            return float(optimize.brentq(lambda a: profile(a) - threshold, *sorted((previous, point))))
        previous = point
    return float(ALPHA_BOUNDS[0] if side < 0 else ALPHA_BOUNDS[1])


def quasi_aicc(chi2: float, n_params: int, n_points: int, dispersion: float) -> float:
    """Quasi-AICc of a weighted fit with known variances (``-2 ln lik = chi2 / dispersion``)."""
    spare = n_points - n_params - 1
    if spare <= 0:
        return np.inf
    return chi2 / dispersion + 2 * n_params + 2 * n_params * (n_params + 1) / spare
