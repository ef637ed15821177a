"""Intervals of the per-axis slopes and their differences from the seeds' own scatter at each grid point.

The log-log slope of a sweep and the difference of two axes' slopes are each a fixed linear
combination of per-point estimates (the points' ``ln L``; for a difference, over the union of the
two sweeps). Their variance is the same combination of the per-point sampling variances, and each
point's variance is estimated from its own seeds: the seeds at a point scatter by their training
(bimodal: a seed takes off or it does not) and by their held-out episodes, and the scatter of their
success rates measures both. A t quantile on the
Welch-Satterthwaite degrees of freedom accounts for estimating those variances from a few seeds.

(The success trends keep their least-squares t-interval over runs, which pools the residual
variance across points: on the calibration studies it covered as well, about 10 % narrower.)
Two things this does not do, on purpose: it does not scale the interval by the lack of fit of a
power law (curvature is part of the estimand, the slope over the grid, not noise), and it does not
pool seed variances across points (the seed spread differs by point; ``docs/methods.md``).
Coverage is checked on simulated studies (``tests/test_laws_calibration.py``).
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

import numpy as np
from scipy import stats

from axisrl.laws.data import clipped_success


class PointEstimates(NamedTuple):
    """Per grid point: an estimate, its estimated sampling variance, and that variance's degrees of
    freedom (``inf`` where it is the binomial floor, a known variance)."""

    value: np.ndarray
    variance: np.ndarray
    dof: np.ndarray


class Interval(NamedTuple):
    """A linear combination's estimate, standard error, Welch-Satterthwaite dof and t-interval."""

    estimate: float
    se: float
    dof: float
    lo: float
    hi: float

    @property
    def p_value(self) -> float:
        """Two-sided p-value of ``estimate = 0``."""
        if not self.se > 0:
            return float("nan")
        return float(2 * stats.t.sf(abs(self.estimate) / self.se, self.dof))


@lru_cache(maxsize=256)
def t_quantile(level: float, dof: float) -> float:
    """Two-sided ``level`` t quantile; cached because ``stats.t.ppf`` costs more than a whole fit."""
    return float(stats.t.ppf(0.5 + level / 2, dof))


def pooled_log_loss(
    point_index: np.ndarray, successes: np.ndarray, trials: np.ndarray, n_points: int
) -> PointEstimates:
    """Per point, ``ln L`` of the seed-pooled success ``p = sum k_i / sum n_i`` (clipped as the fits
    clip it) with its variance: the ratio estimator's seed-level variance
    ``k/(k-1) sum_i (n_i / N)^2 (p_i - p)^2``, at least the binomial ``p (1 - p) / N``, carried to
    ``ln(-ln p)`` by the delta method (``d ln L / dp = 1 / (p ln p)``)."""
    pooled_trials = np.bincount(point_index, trials, n_points)
    p = clipped_success(np.bincount(point_index, successes, n_points), pooled_trials)
    k = np.bincount(point_index, minlength=n_points).astype(np.float64)
    share = trials / pooled_trials[point_index]
    residual = share * (successes / trials - p[point_index])
    with np.errstate(divide="ignore", invalid="ignore"):
        seed_variance = np.where(k > 1, k / (k - 1) * np.bincount(point_index, residual**2, n_points), 0.0)
    binomial = p * (1 - p) / pooled_trials
    measured = seed_variance > binomial
    gradient = 1.0 / (p * np.log(p))
    return PointEstimates(
        np.log(-np.log(p)),
        np.where(measured, seed_variance, binomial) * gradient**2,
        np.where(measured, k - 1, np.inf),
    )


def linear_interval(coefficients: np.ndarray, points: PointEstimates, level: float) -> Interval:
    """``sum_j c_j value_j`` with variance ``sum_j c_j^2 var_j`` and Welch-Satterthwaite dof
    ``(sum c^2 var)^2 / sum (c^2 var)^2 / dof_j``."""
    estimate = float(coefficients @ points.value)
    parts = coefficients**2 * points.variance
    variance = float(parts.sum())
    finite = np.isfinite(points.dof) & (parts > 0)
    denominator = float(np.sum(parts[finite] ** 2 / points.dof[finite]))
    dof = variance**2 / denominator if denominator > 0 else np.inf
    se = float(np.sqrt(variance))
    half = t_quantile(level, dof) * se if se > 0 else 0.0
    return Interval(estimate, se, float(dof), estimate - half, estimate + half)


def slope_coefficients(x: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """The weights ``c`` with ``slope = c @ y`` of the weighted least-squares line of ``y`` on ``x``."""
    centred = x - np.average(x, weights=weight)
    return weight * centred / float(np.sum(weight * centred**2))
