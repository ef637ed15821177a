"""The three allocation strategies of the paper's Figure 5b, at one budget and under one cost model.

Why: the recipe's value is its advantage over what people do instead, so the baselines are
spelled out as exact rules that spend the same budget under the same cost model:

* ``recipe``: the Lagrangian optimum (``solve``).
* ``trajectories_only``: the dominant practice, "scale the trajectories".
* ``chinchilla_transfer``: Chinchilla's equal split with ``D = D_E + D_T + D_tau`` as one scalar.

Baselines use real data only and ignore the recipe's bounds, as their practitioners would;
``compute_efficiency`` turns a baseline's predicted (or measured) loss into a multiplier.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping

import numpy as np
from scipy import optimize

from axisrl.laws.joint import Law
from axisrl.recipe.cost import RECIPE_AXES, Cost, SyntheticOption
from axisrl.recipe.problem import Allocation, Bounds, InfeasibleBudget, allocation_at
from axisrl.recipe.solve import solve


def recipe(
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
    """The recipe: the loss-minimising design at ``budget`` (``solve``)."""
    return solve(law, cost_model, budget, bounds=bounds, fixed=fixed, synthetic=synthetic, starts=starts, seed=seed)


def _reference(reference: Mapping[str, float]) -> dict[str, float]:
    if set(reference) != set(RECIPE_AXES):
        raise ValueError(f"the reference design needs exactly the axes {RECIPE_AXES}, got {sorted(reference)}")
    design = {a: float(reference[a]) for a in RECIPE_AXES}
    if not all(v > 0 and np.isfinite(v) for v in design.values()) or design["d_task"] < design["d_env"]:
        raise ValueError(f"the reference design must be positive with d_task >= d_env, got {design}")
    return design


def _scale_to_budget(cost_model: Cost, budget: float, design: Callable[[float], dict[str, float]], low: float) -> float:
    """The ``s >= low`` with ``C(design(s)) = budget`` (``C`` increasing in ``s``; ``C(design(low)) <= budget``)."""

    def gap(s: float) -> float:
        return float(np.log(cost_model.cost(design(s)) / budget))

    high = low + 1.0
    while gap(high) < 0:
        high = low + 2.0 * (high - low)
        if high - low > 1e3:
            raise ValueError(f"the cost does not reach the budget {budget:.6g} {cost_model.currency} along this rule")
    return optimize.brentq(gap, low, high, xtol=1e-13, rtol=1e-14)


def trajectories_only(law: Law, cost_model: Cost, budget: float, reference: Mapping[str, float]) -> Allocation:
    """ "Scale the trajectories": N, D_E and D_T stay at the reference design and all the budget the
    reference leaves goes into D_tau (``D_tau >= reference d_traj``, solved so that ``C = budget``).

    Raises ``InfeasibleBudget`` when the reference design alone costs more than the budget.
    """
    base = _reference(reference)
    floor = float(cost_model.cost(base))
    if floor > budget * (1 + 1e-12):
        raise InfeasibleBudget(budget, floor, cost_model.currency, "below", "the reference design alone")

    def design(log_scale: float) -> dict[str, float]:
        return base | {"d_traj": base["d_traj"] * float(np.exp(log_scale))}

    values = design(_scale_to_budget(cost_model, budget, design, 0.0) if floor < budget else 0.0)
    return allocation_at(law, cost_model, values, budget, strategy="trajectories_only")


def chinchilla_transfer(
    law: Law, cost_model: Cost, budget: float, reference: Mapping[str, float], *, hold: Collection[str] = ()
) -> Allocation:
    """Chinchilla's equal split transferred with ``D = D_E + D_T + D_tau`` treated as one scalar.

    Rule: ``N = k N_ref`` and ``D = k D_ref`` with one factor ``k`` for both (Chinchilla's
    ``a = b = 0.5``: N and D grow by the same factor, which is ``(C/C_ref)^0.5`` when ``C ~ N D``), and
    ``D`` is split across the three axes in the reference design's proportions, so every axis is
    ``x_a = k x_ref_a``. Since this cost model is not ``C ~ N D``, ``k`` is found by root finding so
    that ``C(x) = budget``. Axes in ``hold`` (e.g. ``width`` when model size is not a study axis)
    stay at the reference. ``k < 1`` is allowed down to the point where a scaled axis reaches 1; a
    smaller budget raises ``InfeasibleBudget``.
    """
    base = _reference(reference)
    unknown = set(hold) - set(RECIPE_AXES)
    if unknown or set(hold) >= set(RECIPE_AXES):
        raise ValueError(f"hold must name some, not all, of {RECIPE_AXES}, got {sorted(hold)}")
    scaled = [a for a in RECIPE_AXES if a not in hold]

    def design(log_k: float) -> dict[str, float]:
        return base | {a: base[a] * float(np.exp(log_k)) for a in scaled}

    floor_k = max(-np.log(base[a]) for a in scaled)
    floor = float(cost_model.cost(design(floor_k)))
    if floor > budget * (1 + 1e-12):
        raise InfeasibleBudget(
            budget, floor, cost_model.currency, "below", "the reference design scaled down until one scaled axis is 1"
        )
    values = design(_scale_to_budget(cost_model, budget, design, floor_k))
    return allocation_at(law, cost_model, values, budget, strategy="chinchilla_transfer", held=tuple(hold))
