"""The adaptive design (``study.adaptive``): a first wave of seeds at every point of the axis sweeps,
then a second wave placed where the headline intervals shrink most for what it costs.

Every headline quantity is a fixed linear combination of per-point estimates: a sweep's ``alpha``
of the points' ``ln L`` (the weighted log-log slope), its success trend of the points' mean success
(the least-squares slope on ``log2 x``, one weight per point), an ordering difference of two
sweeps' ``alpha`` combinations (the centre enters both). So its variance with ``n_j`` seeds at
point ``j`` is ``sum_j c_j^2 v_j / n_j``, where ``v_j`` is one run's variance there: its seeds'
spread plus the binomial noise of its held-out episodes. ``allocate`` reads ``v_j`` off the first
wave on the validation tier (never a test tier), shrunk toward its sweep's pooled value (two seeds
alone give a variance on one degree of freedom), and adds seeds one at a time where the expected
half-widths, each relative to its first-wave value, fall most per unit of cost (the widest relative
interval first: ``FOCUS``), until the budget is spent or every point is at the cap. The order it adds
seeds in does not depend on the budget, so a larger budget places the same seeds and more: rerunning
with it trains only new runs.

The weights of ``alpha`` stay those of a balanced design whatever the allocation (``laws.axis``
weights each point by one run's variance), and the trend weighs every point once, so each quantity
is the same estimand in an adaptive study as in a fixed one. Its interval is checked on simulated
two-stage studies run through this code (``tests/test_adaptive.py``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import polars as pl
from scipy import stats

from axisrl.laws.data import AXES, VALIDATION_TIER, clipped_success
from axisrl.laws.intervals import slope_coefficients
from axisrl.laws.models import LEVEL
from axisrl.plan import seed_sequence

QUANTITIES = ("alpha", "trend", "alpha_diff")
"""The headline quantities an allocation can serve (``study.adaptive.quantities``)."""
PRIOR_DOF = 2.0
"""Degrees of freedom of the sweep's pooled run variance in each point's shrunk variance: a point's
own two seeds (one degree of freedom) would steer the second wave by their chance agreement."""


class PointNoise(NamedTuple):
    """Per sweep point (rows in the order of ``points``): one run's variance of ``ln L`` and of success
    on the headline tier, and the loss and success the first wave measured."""

    points: pl.DataFrame
    """``point_key``, the axes, ``sweeps`` (the axes it lies on), ``n_first`` (first-wave seeds)."""
    var_log_loss: np.ndarray
    var_success: np.ndarray


class Quantity(NamedTuple):
    """A headline quantity as a linear combination ``coefficients @ estimate`` over the sweep points
    (zero off its sweeps), with one run's variance of each point's estimate."""

    quantity: str
    name: str
    coefficients: np.ndarray
    run_variance: np.ndarray

    def half_width(self, seeds: np.ndarray) -> float:
        """The expected 95 % half-width with ``seeds`` per point (``_half_widths``)."""
        return float(_half_widths((self.coefficients**2 * self.run_variance)[None, :], seeds)[0])


def sweep_points(runs: pl.DataFrame, centre: Mapping[str, int]) -> pl.DataFrame:
    """The distinct points of the one-axis sweeps among ``runs`` (``point_key`` and the axes), each with
    the axes it lies on (``sweeps``: all three for the centre) and its runs (``n_first``)."""
    held = {axis: pl.all_horizontal([pl.col(a) == centre[a] for a in AXES if a != axis]) for axis in AXES}
    sweeps = pl.concat_list([pl.when(on).then(pl.lit(axis)) for axis, on in held.items()]).list.drop_nulls()
    points = runs.group_by("point_key", maintain_order=True).agg(*(pl.col(a).first() for a in AXES), n_first=pl.len())
    return points.with_columns(sweeps=sweeps).filter(pl.col("sweeps").list.len() > 0).sort(*AXES)


def point_noise(
    runs: pl.DataFrame, centre: Mapping[str, int], episodes: int, tier: str = VALIDATION_TIER
) -> PointNoise:
    """One run's variance at each sweep point, from the first wave's success on ``tier``: the seeds'
    spread beyond the tier's binomial noise (shrunk toward the sweep's pooled spread by ``PRIOR_DOF``),
    plus the binomial noise of ``episodes`` held-out episodes, the headline's per run; ``ln L`` by
    the delta method (``d ln L / dp = 1 / (p ln p)``)."""
    ok = runs.filter(pl.col("status") == "ok") if "status" in runs.columns else runs
    if ok.filter(pl.col(f"p_{tier}").is_null()).height:
        raise ValueError(f"some first-wave runs have no {tier} success: the allocation reads {tier}")
    points = sweep_points(ok, centre)
    stats = ok.group_by("point_key").agg(
        p=(pl.col(f"p_{tier}") * pl.col(f"n_{tier}")).sum() / pl.col(f"n_{tier}").sum(),
        trials=pl.col(f"n_{tier}").mean(),
        spread=pl.col(f"p_{tier}").var(ddof=1),
        k=pl.len(),
    )
    stats = points.join(stats, on="point_key", how="left")
    trials = stats["trials"].to_numpy()
    p = clipped_success(stats["p"].to_numpy() * trials, trials)
    k = stats["k"].to_numpy().astype(np.float64)
    binomial_tier = p * (1 - p) / trials
    seed_var = np.maximum(np.nan_to_num(stats["spread"].to_numpy(), nan=0.0) - binomial_tier, 0.0)
    own_dof = np.maximum(k - 1, 0)
    shrunk = np.empty_like(seed_var)
    for axis in AXES:  # the centre, on every sweep, is shrunk toward the last one's
        on = stats["sweeps"].list.contains(axis).to_numpy()
        pooled = float(np.sum(own_dof[on] * seed_var[on]) / max(np.sum(own_dof[on]), 1))
        shrunk[on] = (own_dof[on] * seed_var[on] + PRIOR_DOF * pooled) / (own_dof[on] + PRIOR_DOF)
    var_success = shrunk + p * (1 - p) / episodes
    return PointNoise(
        stats.select(points.columns).with_columns(p=p),
        var_log_loss=var_success / (p * np.log(p)) ** 2,
        var_success=var_success,
    )


def quantities(noise: PointNoise, kinds: Sequence[str] = QUANTITIES) -> list[Quantity]:
    """Each headline quantity of ``kinds`` over the sweep points: ``alpha`` per axis (the weights
    ``1 / var(ln L)`` of one run, a balanced design's), the trend per axis, the ordering differences."""
    points = noise.points
    alphas, out = {}, []
    for axis in AXES:
        on = points["sweeps"].list.contains(axis).to_numpy()
        x = points[axis].to_numpy().astype(np.float64)
        alpha = np.zeros(points.height)
        alpha[on] = -slope_coefficients(np.log(x[on]), 1 / noise.var_log_loss[on])
        alphas[axis] = alpha
        trend = np.zeros(points.height)
        trend[on] = slope_coefficients(np.log2(x[on]), np.ones(int(on.sum())))
        if "alpha" in kinds:
            out.append(Quantity("alpha", axis, alpha, noise.var_log_loss))
        if "trend" in kinds:
            out.append(Quantity("trend", axis, trend, noise.var_success))
    if "alpha_diff" in kinds:
        for a, b in itertools.combinations(AXES, 2):
            out.append(Quantity("alpha_diff", f"{a} - {b}", alphas[a] - alphas[b], noise.var_log_loss))
    return out


class Allocation(NamedTuple):
    """Extra seeds per sweep point (in ``PointNoise.points`` order) and what they cost."""

    extra: np.ndarray
    cost: np.ndarray
    """Per point: its extra seeds' cost."""


FOCUS = 8.0
"""The objective is ``sum_q (h_q / h_q(first)) ** FOCUS`` over the expected half-widths ``h_q``: a
power of 2 would minimise the quantities' mean relative variance and let the dearest sweep (the
largest ``d_traj``, whose runs cost the most) fall behind; a large power serves the widest relative
interval first, so every quantity narrows."""


def _half_widths(parts: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    """Expected half-widths of quantities whose variance is ``sum_j parts[q, j] / seeds[..., j]``
    (``seeds`` one allocation, or one per row of its leading axis): a t quantile on the
    Welch-Satterthwaite dof of the points' own seeds, as ``Quantity.half_width``."""
    per_point = parts / seeds[..., None, :]
    variance = per_point.sum(axis=-1)
    dof = variance**2 / np.sum(per_point**2 / np.maximum(seeds[..., None, :] - 1, 1), axis=-1)
    return stats.t.ppf(0.5 + LEVEL / 2, dof) * np.sqrt(variance)


def greedy_allocation(
    targets: Sequence[Quantity], first: np.ndarray, run_cost: np.ndarray, budget: float, max_seeds: int
) -> Allocation:
    """Seeds added one at a time where ``sum_q (h_q / h_q(first)) ** FOCUS`` falls most per unit of
    ``run_cost``, each point capped at ``max_seeds``, while the budget pays for one; the order does
    not depend on the budget, so a larger budget's allocation holds a smaller one's. A seed narrows
    its point's variance and adds a degree of freedom to it: two seeds give one, a wide t quantile."""
    seeds, left = first.astype(np.float64).copy(), float(budget)
    parts = np.array([q.coefficients**2 * q.run_variance for q in targets]).reshape(len(targets), len(first))
    parts = parts[parts.sum(axis=1) > 0]
    if not parts.size:
        return Allocation(np.zeros(len(first), dtype=np.int64), np.zeros(len(first)))
    scale = _half_widths(parts, seeds)
    while True:
        now = np.sum((_half_widths(parts, seeds) / scale) ** FOCUS)
        candidates = seeds + np.eye(len(seeds))  # row j: one seed more at point j
        after = np.sum((_half_widths(parts, candidates) / scale) ** FOCUS, axis=1)
        gain = (now - after) / run_cost
        gain[(seeds >= max_seeds) | (run_cost > left)] = -np.inf
        best = int(np.argmax(gain))
        if not np.isfinite(gain[best]) or gain[best] <= 0:
            break
        seeds[best] += 1
        left -= run_cost[best]
    extra = (seeds - first).astype(np.int64)
    return Allocation(extra, extra * run_cost)


ALLOCATION_SCHEMA = {
    "point_key": pl.String,
    "sweeps": pl.List(pl.String),
    "d_env": pl.Int64,
    "d_task": pl.Int64,
    "d_traj": pl.Int64,
    "first_seeds": pl.Int64,
    "extra_seeds": pl.Int64,
    "seeds": pl.List(pl.Int64),
    "run_cost": pl.Float64,
    "cost": pl.Float64,
}
"""Per sweep point: its first-wave and extra seed counts, the extra seeds themselves, what one run
is expected to cost there (``unit`` of the allocation) and what its extra runs cost."""
PREDICTED_SCHEMA = {
    "quantity": pl.String,
    "name": pl.String,
    "half_width_first": pl.Float64,
    "half_width_after": pl.Float64,
}
"""Per headline quantity: its expected half-width after the first wave alone and after both."""


class AllocationResult(NamedTuple):
    allocation: pl.DataFrame
    predicted: pl.DataFrame
    unit: str
    budget: float


def allocate(
    runs: pl.DataFrame,
    study: Mapping[str, Any],
    run_cost: Callable[[pl.DataFrame], np.ndarray],
    unit: str,
    episodes: int,
    tier: str = VALIDATION_TIER,
) -> AllocationResult:
    """The second wave of ``study`` (its ``adaptive`` block) after the first wave's ``runs`` (their
    success on ``tier``): per sweep point the extra seeds and their seed numbers, and the expected
    half-widths of the served quantities before and after. ``run_cost`` prices one run at each point
    (rows of ``PointNoise.points``) in ``unit``; ``episodes``: the headline tier's episodes per run."""
    adaptive = study["adaptive"]
    noise = point_noise(runs, study["centre"], episodes, tier)
    targets = quantities(noise, adaptive["quantities"])
    first = noise.points["n_first"].to_numpy().astype(np.float64)
    costs = np.asarray(run_cost(noise.points), dtype=np.float64)
    chosen = greedy_allocation(targets, first, costs, adaptive["budget"], adaptive["max_seeds"])
    after = first + chosen.extra
    planned = adaptive["first_seeds"]  # failed first-wave runs count in no variance, but keep their seeds
    sequence = seed_sequence(study, planned + int(chosen.extra.max(initial=0)))
    allocation = noise.points.select("point_key", "sweeps", *AXES).with_columns(
        first_seeds=pl.Series(first.astype(np.int64)),
        extra_seeds=pl.Series(chosen.extra),
        seeds=pl.Series([sequence[planned : planned + int(e)] for e in chosen.extra], dtype=pl.List(pl.Int64)),
        run_cost=pl.Series(costs),
        cost=pl.Series(chosen.cost),
    )
    predicted = pl.DataFrame(
        [(q.quantity, q.name, q.half_width(first), q.half_width(after)) for q in targets],
        schema=PREDICTED_SCHEMA,
        orient="row",
    )
    return AllocationResult(allocation.cast(ALLOCATION_SCHEMA), predicted, unit, float(adaptive["budget"]))
