"""Compute-optimal allocation under a fitted law and a cost model, solved numerically.

Why numerically: the recipe's exponents have a closed form only for monomial costs (a product
constraint gives ``a_i = (1/alpha_i) / sum_j 1/alpha_j``); with linear synthesis costs, a bilinear
rollout term, nesting and saturation they drift with the budget, so they are measured as fitted
slopes of the optimal path (``exponents``), with local slopes and the identity
``sum_i (eps_i/C) a_i = 1`` as checks. The problem at one budget and its KKT check are ``problem``'s;
this module solves it at one budget (``solve``), along a grid of budgets (``recipe_path``,
``draw_path``), and inverts the optimal frontier (``compute_efficiency``). Methods: ``docs/methods.md``.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import numpy as np
import polars as pl
from scipy import optimize

from axisrl.laws.joint import Law
from axisrl.recipe.cost import RECIPE_AXES, Cost, SyntheticOption
from axisrl.recipe.problem import Allocation, Bounds, InfeasibleBudget, _Problem

__all__ = [
    "compute_efficiency",
    "draw_path",
    "log_budgets",
    "recipe_path",
    "solve",
]

_LOCAL_STEP = 0.02
"""Half-width in ``ln C`` of the central difference that gives the local exponents of a path."""


def _solve(problem: _Problem, starts: int, seed: int, warm: Sequence[np.ndarray] = ()) -> tuple[np.ndarray, str]:
    """SLSQP from the warm starts, then from random starts drawn as needed, until two converged runs agree."""
    problem.check_budget()
    rng = np.random.default_rng(seed)
    return problem.minimise(itertools.chain(warm, (problem.start(rng) for _ in range(starts))), agree=2)


def _resolve(problem: _Problem, starts: int, seed: int, near: np.ndarray) -> tuple[np.ndarray, str]:
    """A re-solve next to a known optimum: SLSQP from ``near`` alone, kept when it converged and passes the
    KKT check, else ``_solve`` from ``near`` and ``starts`` random starts."""
    problem.check_budget()
    z, status = problem.minimise([near])
    if status == "ok" and problem.satisfies_kkt(z):
        return z, status
    return _solve(problem, starts, seed, [near])


def solve(
    law: Law,
    cost_model: Cost,
    budget: float,
    *,
    bounds: Bounds,
    fixed: Mapping[str, float] | None = None,
    synthetic: Mapping[str, SyntheticOption] | None = None,
    starts: int = 10,
    seed: int = 0,
) -> Allocation:
    """The loss-minimising design at ``budget`` (in ``cost_model.currency``).

    ``bounds``: ``{axis: (low, high)}`` for free axes; ``width`` must be given when the law has it (the
    trainable range), data axes default to ``[1, inf)``. ``fixed``: axes held at a value (required for
    axes the law lacks). ``synthetic``: ``{axis: SyntheticOption}`` adds the ratio ``r`` of that axis as
    a variable in ``[0, r_cap]``. Raises ``InfeasibleBudget`` when the budget is below the cost at the
    lower bounds or above the cost at the upper bounds.
    """
    problem = _Problem(law, cost_model, budget, bounds, fixed, synthetic)
    return problem.allocation(*_solve(problem, starts, seed))


def log_budgets(low: float, high: float, n: int = 15) -> np.ndarray:
    """``n`` log-spaced budgets from ``low`` to ``high``: the exponents are slopes fitted over them, so
    the default is 15 rather than a handful (``docs/methods.md``)."""
    if not 0 < low < high or n < 2:
        raise ValueError(f"need 0 < low < high and n >= 2, got ({low}, {high}, {n})")
    return np.geomspace(low, high, n)


def _local_exponents(problem: _Problem, z: np.ndarray, seed: int) -> dict[str, float | str]:
    """``d ln x_i* / d ln C`` by a central difference of re-solves at ``C e^{+-h}`` warm-started from ``z``
    (one-sided where the shifted budget is infeasible), and "ok" or the first failed status."""
    ends, steps, status = [], [], "ok"
    for sign in (1.0, -1.0):
        near = problem.at(problem.budget * np.exp(sign * _LOCAL_STEP))
        try:
            near_z, near_status = _solve(near, 0, seed, [z])
        except InfeasibleBudget:
            near, near_z, near_status, sign = problem, z, "ok", 0.0
        ends.append(near.design(near_z)[0])
        steps.append(sign * _LOCAL_STEP)
        status = status if near_status == "ok" else near_status
    span = steps[0] - steps[1]
    return {
        **{f"local_{a}": float(np.log(ends[0][a] / ends[1][a]) / span) if span else float("nan") for a in RECIPE_AXES},
        "local_status": status,
    }


def recipe_path(
    law: Law,
    cost_model: Cost,
    budgets: Sequence[float],
    *,
    bounds: Bounds,
    fixed: Mapping[str, float] | None = None,
    synthetic: Mapping[str, SyntheticOption] | None = None,
    starts: int = 10,
    seed: int = 0,
    local: bool = True,
) -> pl.DataFrame:
    """One row per budget (ascending) of the optimal design.

    Columns: ``compute`` (the budget C), ``currency``, ``cost``, the four axes, ``ratio_<axis>`` per synthetic axis,
    ``predicted_loss``, ``predicted_success``, ``share_<axis>`` (``eps_i / C``: cost elasticity, sums to 1
    only for a linear cost), ``local_<axis>`` (with ``local``: ``d ln x_i* / d ln C`` by a central
    difference of warm-started re-solves at ``C e^{+-0.02}``), ``kkt_spread``, ``binding`` (list of
    active bounds/constraints) and ``status``. Each solve starts from the previous optimum, then from random
    starts until two converged runs agree (``_solve``).
    """
    return _path(law, cost_model, budgets, bounds, fixed, synthetic, starts, seed, local=local, draw=False)


def draw_path(
    law: Law,
    cost_model: Cost,
    budgets: Sequence[float],
    *,
    bounds: Bounds,
    fixed: Mapping[str, float] | None = None,
    synthetic: Mapping[str, SyntheticOption] | None = None,
    starts: int = 10,
    seed: int = 0,
    near: Mapping[str, float] | None = None,
) -> pl.DataFrame:
    """``recipe_path`` without local slopes, for the many bootstrap draws of a law: past the first budget
    each solve starts from the previous optimum alone and keeps it when it passes the KKT check, falling
    back to the random starts only where it does not (a draw's optimum moves smoothly with the budget).

    ``near``: a design close to the first budget's optimum, such as the first row of another draw's path
    (the axes, and ``ratio_<axis>`` per synthetic axis); the first solve then starts from it the same way.
    """
    return _path(law, cost_model, budgets, bounds, fixed, synthetic, starts, seed, local=False, draw=True, near=near)


def _path(
    law: Law,
    cost_model: Cost,
    budgets: Sequence[float],
    bounds: Bounds,
    fixed: Mapping[str, float] | None,
    synthetic: Mapping[str, SyntheticOption] | None,
    starts: int,
    seed: int,
    *,
    local: bool,
    draw: bool,
    near: Mapping[str, float] | None = None,
) -> pl.DataFrame:
    """The rows of ``recipe_path`` (``draw=False``) or of ``draw_path`` (``draw=True``)."""
    budgets = np.sort(np.asarray(budgets, dtype=np.float64))
    rows, z = [], None
    for budget in budgets:
        problem = _Problem(law, cost_model, budget, bounds, fixed, synthetic)
        if z is None and near is not None:
            z = problem.point(near)
        if draw and z is not None:
            z, status = _resolve(problem, starts, seed, z)
        else:
            z, status = _solve(problem, starts, seed, [] if z is None else [z])
        allocation = problem.allocation(z, status)
        row = {
            "compute": float(budget),
            "currency": allocation.currency,
            "cost": allocation.cost,
            **allocation.values,
            **{f"ratio_{a}": r for a, r in allocation.ratios.items()},
            "predicted_loss": allocation.predicted_loss,
            "predicted_success": allocation.predicted_success,
            **{f"share_{a}": s for a, s in allocation.shares.items()},
        }
        if local:
            row |= _local_exponents(problem, z, seed)
            status = status if row.pop("local_status") == "ok" else "local slope not converged"
        rows.append(row | {"kkt_spread": allocation.kkt_spread, "binding": list(allocation.binding), "status": status})
    return pl.DataFrame(rows, schema_overrides={"binding": pl.List(pl.String)})


def compute_efficiency(
    law: Law,
    cost_model: Cost,
    baseline_loss: float,
    budget: float,
    *,
    bounds: Bounds,
    fixed: Mapping[str, float] | None = None,
    synthetic: Mapping[str, SyntheticOption] | None = None,
    starts: int = 10,
    seed: int = 0,
) -> float:
    """Efficiency multiplier ``m = budget / C*(baseline_loss)`` of the recipe over a baseline.

    ``baseline_loss`` is the baseline's loss at ``budget``: for a measured baseline with held-out
    success ``p`` at cost ``budget`` pass ``-ln p``; for a predicted one, e.g.
    ``trajectories_only(...).predicted_loss``. ``C*`` inverts the monotone optimal frontier
    ``L*(C)`` by root finding on ``ln C`` (each evaluation a ``solve``, after the first one started from
    the previous optimum and kept when it passes the KKT check). ``m`` depends on the budget and the
    baseline, so state both with it. Raises ``ValueError`` when the baseline is worse than the cheapest
    feasible design (only a lower bound on ``m`` exists) or better than the frontier can reach within
    the bounds.
    """
    problem = _Problem(law, cost_model, budget, bounds, fixed, synthetic)
    target = np.log(baseline_loss)
    warm: list[np.ndarray] = []
    gaps: dict[float, float] = {}  # each budget solved once: brentq sees the bracket the search below found

    def gap(ln_cost: float) -> float:
        if ln_cost not in gaps:
            near = problem.at(float(np.exp(ln_cost)))
            z, status = _resolve(near, starts, seed, warm[0]) if warm else _solve(near, starts, seed)
            if status != "ok":
                raise RuntimeError(
                    f"the frontier solve at C = {near.budget:.6g} {cost_model.currency} failed: {status}"
                )
            warm[:] = [z]
            gaps[ln_cost] = near.objective(z)[0] - target
        return gaps[ln_cost]

    low = np.log(problem.min_cost)
    if problem.objective(problem.lowest())[0] <= target:
        raise ValueError(
            f"baseline loss {baseline_loss:.6g} is reached by the cheapest feasible design "
            f"({np.exp(low):.6g} {cost_model.currency}): m >= {budget / np.exp(low):.6g}"
        )
    high, top = np.log(budget), np.log(problem.max_cost)
    while gap(high) > 0:
        if high >= top:
            raise ValueError(f"baseline loss {baseline_loss:.6g} is below the optimal frontier within the bounds")
        high = min(high + np.log(10.0), top)
    return float(budget / np.exp(optimize.brentq(gap, low, high, xtol=1e-12, rtol=1e-12)))
