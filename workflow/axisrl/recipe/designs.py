"""The pre-registered strategy and validation runs: each strategy's allocation at a compute level,
rounded to a design the study can train and charged as a ``charged_flops`` run, with the law's
prediction interval for its measured success; and Figure 5b's predicted curves."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from typing import NamedTuple

import numpy as np
import polars as pl

from axisrl.budget import budget_problems
from axisrl.laws.joint import predict_loss
from axisrl.plan import Design
from axisrl.recipe.cost import RECIPE_AXES, CostModel
from axisrl.recipe.fitted import FittedLaw, RecipeSettings, budgets, centre_cost, fixed_axes
from axisrl.recipe.problem import Allocation, InfeasibleBudget, allocation_at
from axisrl.recipe.solve import solve
from axisrl.recipe.strategies import chinchilla_transfer, trajectories_only

STRATEGIES = ("recipe", "trajectories_only", "chinchilla_transfer")
"""The strategies pre-registered at every compute level: the recipe and the two baselines of Figure 5b."""


def round_design(
    values: Mapping[str, float], centre: Design, visits_per_update: int, capacity: Sequence[int]
) -> Design:
    """The nearest design the study can train: integer axes, at least one task per environment and
    one per visit of an update, no more than the pool holds (``capacity``, from
    ``datasets.task_capacity``), a width that is a multiple of 8."""
    d_env = min(max(1, round(values["d_env"])), len(capacity))
    d_task = min(max(d_env, visits_per_update, round(values["d_task"])), capacity[d_env - 1])
    return replace(
        centre,
        d_env=d_env,
        d_task=d_task,
        d_traj=max(1, round(values["d_traj"])),
        width=max(8, 8 * round(values["width"] / 8)),
    )


def _values(design: Design) -> dict[str, np.ndarray]:
    """A design's recipe axes as the cost model takes them."""
    return {axis: np.asarray(float(getattr(design, axis))) for axis in RECIPE_AXES}


def charged_design(design: Design, model: CostModel, compute: float, label: str) -> Design:
    """``design`` as a ``charged_flops`` run at budget ``compute``. With the other axes rounded, the
    budget they leave is spent on rollouts: ``d_traj`` is re-solved (the cost is linear in it), so
    rounding an expensive axis never leaves a run a budget its rollouts cannot spend in about
    ``train.updates`` updates; the run then trains until it has executed ``compute`` less its
    declared prices. Refused when one rollout per visit already costs more than ``compute``."""
    one, two = (float(model.cost(_values(replace(design, d_traj=d)))) for d in (1, 2))
    d_traj = round((compute - (2 * one - two)) / (two - one))
    if d_traj < 1:
        raise ValueError(
            f"{label}: d_env={design.d_env} d_task={design.d_task} width={design.width} costs "
            f"{one:.3g} {model.currency} with one rollout per visit, more than the budget {compute:.3g}"
        )
    spent = replace(design, d_traj=d_traj)
    return replace(spent, budget="charged_flops", flop_budget=compute - float(model.declared(_values(spent))))


class Prediction(NamedTuple):
    """The law's predicted success of a design and the interval its measured success should fall in."""

    success: float
    low: float
    high: float


def prediction_interval(
    fitted: FittedLaw, design: Design, n_seeds: int, level: float = 0.95, seed: int = 0
) -> Prediction:
    """The prediction of a design's measured success pooled over ``n_seeds`` seeds, with an interval
    from the law's bootstrap draws plus seed and held-out binomial noise on the loss scale."""
    frame = pl.DataFrame([asdict(design)])
    point = float(np.exp(-predict_loss(fitted.law, frame)[0]))
    losses = np.array([predict_loss(law, frame)[0] for law in fitted.draws])
    p = np.exp(-losses)
    var_loss = ((1 - p) / p / fitted.trials_per_run + fitted.seed_variance) / n_seeds
    rng = np.random.default_rng(seed)
    simulated = np.exp(-np.maximum(losses + rng.standard_normal(len(losses)) * np.sqrt(var_loss), 0.0))  # p <= 1
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(simulated, [tail, 100 - tail])
    return Prediction(point, float(low), float(high))


def _strategy_allocation(
    strategy: str, fitted: FittedLaw, model: CostModel, compute: float, fixed: Mapping[str, float] | None = None
) -> Allocation:
    """One strategy's unrounded allocation at ``compute``; ``fixed`` holds axes at a value (the validation
    point's width), and the baselines start from the centre design."""
    reference = {axis: float(getattr(fitted.centre, axis)) for axis in RECIPE_AXES}
    if strategy == "recipe":
        bounds = {a: r for a, r in fitted.ranges.items() if a not in (fixed or {})}
        return solve(fitted.law, model, compute, bounds=bounds, fixed=fixed_axes(fitted) | dict(fixed or {}))
    if strategy == "trajectories_only":
        return trajectories_only(fitted.law, model, compute, reference)
    return chinchilla_transfer(fitted.law, model, compute, reference, hold=tuple(fixed_axes(fitted)))


def strategy_designs(
    fitted: FittedLaw, model: CostModel, settings: RecipeSettings, n_seeds: int, capacity: Sequence[int]
) -> pl.DataFrame:
    """The pre-registered runs: each strategy at each compute level (multiples of the centre
    design's cost) and the validation point beyond the fitted range (a larger compute and a width
    outside the fitted widths), rounded to trainable designs, with the law's prediction and a
    prediction interval for the measured success. Each is a ``charged_flops`` design
    (``charged_design``): ``charged_compute`` is what it trains until it has executed,
    ``declared_price`` its synthesis prices, and the two sum to ``compute``. ``cost`` is the cost
    model's price of the rounded design (which moves from ``compute`` where rounding or the pool moves
    an axis; the run still spends ``compute``)."""
    unit = centre_cost(fitted, model)
    jobs = [(s, factor, "strategy", None) for factor in settings.strategies for s in STRATEGIES]
    jobs.append(("recipe", settings.validation["compute"], "validation", {"width": settings.validation["width"]}))
    rows = []
    for strategy, factor, role, fixed in jobs:
        compute = factor * unit
        try:
            allocation = _strategy_allocation(strategy, fitted, model, compute, fixed)
        except InfeasibleBudget as exc:
            key = "recipe.validation" if role == "validation" else "recipe.strategies"
            raise ValueError(f"{key}: {strategy} at {factor:g}x the centre cost: {exc}") from None
        label = f"{'recipe.validation' if role == 'validation' else 'recipe.strategies'}: {strategy} at {factor:g}x"
        design = charged_design(
            round_design(allocation.values, fitted.centre, settings.train["visits_per_update"], capacity),
            model,
            compute,
            label,
        )
        problems = budget_problems(design.as_dict(), settings.train)
        if problems:
            raise ValueError(f"{label}: {design.as_dict()}: {'; '.join(problems)}")
        rounded = allocation_at(
            fitted.law, model, {a: float(getattr(design, a)) for a in RECIPE_AXES}, compute, strategy=strategy
        )
        predicted, low, high = prediction_interval(fitted, design, n_seeds, seed=settings.seed)
        rows.append(
            {
                "role": role,
                "strategy": strategy,
                "compute_factor": float(factor),
                "compute": compute,
                "currency": model.currency,
                "point_key": design.point_key,
                **asdict(design),
                "charged_compute": design.flop_budget,
                "declared_price": compute - design.flop_budget,
                "cost": rounded.cost,
                "predicted_loss": rounded.predicted_loss,
                "predicted_success": predicted,
                "success_lo": low,
                "success_hi": high,
                **{f"share_{a}": rounded.shares[a] for a in RECIPE_AXES},
                **{f"solved_{a}": allocation.values[a] for a in RECIPE_AXES},
            }
        )
    return pl.DataFrame(rows)


def strategy_curves(fitted: FittedLaw, model: CostModel, settings: RecipeSettings) -> pl.DataFrame:
    """Figure 5b's curves: each strategy's predicted success at every budget of the recipe path
    (the law at the strategy's unrounded allocation), with its cost shares; a budget a strategy
    cannot spend (below the reference design a baseline starts from) has no row."""
    rows = []
    for compute in budgets(fitted, model, settings):
        for strategy in STRATEGIES:
            try:
                allocation = _strategy_allocation(strategy, fitted, model, float(compute))
            except InfeasibleBudget:
                continue
            rows.append(
                {
                    "strategy": strategy,
                    "compute": float(compute),
                    "currency": model.currency,
                    "predicted_success": allocation.predicted_success,
                    **allocation.values,
                    **{f"share_{a}": allocation.shares[a] for a in RECIPE_AXES},
                }
            )
    return pl.DataFrame(rows)
