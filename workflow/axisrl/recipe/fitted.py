"""The recipe's law: the joint fit its solves read, the study's centre design and settings, the
budgets the recipe is solved at, and the law's round trip through the ``law`` frame."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import polars as pl

from axisrl.budget import visits_per_run
from axisrl.laws.data import AXES, RunArrays, infer_centre, point_statistics, usable_runs
from axisrl.laws.joint import Law, bootstrap_joint, fit_joint, fitted_law
from axisrl.laws.tables import in_families
from axisrl.plan import Design
from axisrl.recipe.cost import RECIPE_AXES, CostModel
from axisrl.recipe.solve import log_budgets

LAW_FAMILIES = ("axis_sweeps", "interaction", "calibration", "model_sizes")
"""The runs the recipe's joint law is fitted to: one setting apart from the four recipe axes."""


@dataclass(frozen=True)
class RecipeSettings:
    """The study's ``recipe`` settings (one domain's cost coefficients) and the training-budget keys its
    strategy runs read: everything the recipe's functions take from the config."""

    tier: str
    cost: Mapping[str, Any]
    budgets: Mapping[str, Any]
    strategies: Sequence[float]
    validation: Mapping[str, Any]
    n_boot: int
    seed: int
    perturbation: float
    train: Mapping[str, Any]
    """The study's training-budget keys a strategy run reads (``axisrl.budget.TRAIN_KEYS["charged_flops"]``)."""

    @property
    def visits(self) -> int:
        """Task visits of a run of the law's convention (``fixed_visits``): the cost model's ``V``."""
        return visits_per_run(self.train)


@dataclass(frozen=True)
class FittedLaw:
    """The recipe's law: the selected joint fit over the axes that vary in its runs, its bootstrap
    draws, the range each axis was fitted over, and the study's centre design."""

    fit: pl.DataFrame
    law: Law
    draws: list[Law]
    ranges: dict[str, tuple[float, float]]
    centre: Design
    seed_variance: float
    trials_per_run: float


def fit_recipe_law(runs: pl.DataFrame, episodes: pl.DataFrame | None, settings: RecipeSettings) -> FittedLaw:
    """The joint law over the recipe axes that vary in the law's families, at one setting otherwise."""
    law_runs = in_families(runs, *LAW_FAMILIES)
    ok, _ = usable_runs(law_runs, settings.tier)
    axes = [axis for axis in RECIPE_AXES if ok[axis].n_unique() > 1]
    fit = fit_joint(law_runs, axes, tier=settings.tier)
    draws = bootstrap_joint(
        law_runs, fit, axes, n_boot=settings.n_boot, seed=settings.seed, tier=settings.tier, episodes=episodes
    )
    centre_values = infer_centre(in_families(runs, "axis_sweeps"), AXES)
    template = in_families(runs, "axis_sweeps").row(0, named=True)
    centre = Design(**{field: template[field] for field in Design.__dataclass_fields__} | centre_values)
    arrays = RunArrays.from_runs(ok, axes)
    stats = point_statistics(arrays.point_index, arrays.successes, arrays.trials, arrays.points.height)
    return FittedLaw(
        fit,
        fitted_law(fit, axes),
        draws,
        {axis: (float(ok[axis].min()), float(ok[axis].max())) for axis in axes},
        centre,
        stats.seed_variance,
        float(np.mean(arrays.trials)),
    )


def fixed_axes(fitted: FittedLaw) -> dict[str, float]:
    """Axes the law does not vary are held at the centre design."""
    return {axis: float(getattr(fitted.centre, axis)) for axis in RECIPE_AXES if axis not in fitted.law.alpha}


def centre_cost(fitted: FittedLaw, model: CostModel) -> float:
    """The cost of the study's centre design: the unit the recipe's budgets and compute levels are given in."""
    return float(model.cost({axis: np.asarray(float(getattr(fitted.centre, axis))) for axis in RECIPE_AXES}))


def budgets(fitted: FittedLaw, model: CostModel, settings: RecipeSettings) -> np.ndarray:
    """``n`` log-spaced budgets from ``low`` to ``high`` times the centre design's cost, within what
    the cost model can buy inside the fitted bounds (a budget outside has no allocation in range;
    the exponent tables state the range used, ``c_low`` and ``c_high``)."""
    unit = centre_cost(fitted, model)
    low = max(settings.budgets["low"] * unit, 1.01 * corner_cost(model, fitted.ranges, fixed_axes(fitted), 0))
    high = min(settings.budgets["high"] * unit, 0.99 * corner_cost(model, fitted.ranges, fixed_axes(fitted), 1))
    if not low < high:
        raise ValueError(
            f"recipe.budgets: {settings.budgets['low']}-{settings.budgets['high']} x the centre "
            f"cost {unit:.3g} {model.currency} leaves no budget inside the fitted bounds"
        )
    return log_budgets(low, high, settings.budgets["n"])


def corner_cost(
    model: CostModel, ranges: Mapping[str, tuple[float, float]], fixed: Mapping[str, float], end: int
) -> float:
    """The cost with every free axis at its lower (``end=0``) or upper (``end=1``) fitted bound."""
    values = {a: np.asarray(r[end]) for a, r in ranges.items()} | {a: np.asarray(v) for a, v in fixed.items()}
    return float(model.cost(values))


def law_frame(fitted: FittedLaw) -> pl.DataFrame:
    """The law and its bootstrap draws (draw -1 is the fit), one row each: what ``axisrl recipe`` reads."""

    def row(draw: int, law: Law) -> dict[str, Any]:
        return {
            "draw": draw,
            "E": law.E,
            "m_star": law.m_star,
            "k_star": law.k_star,
            **{f"A_{a}": law.A.get(a) for a in RECIPE_AXES},
            **{f"alpha_{a}": law.alpha.get(a) for a in RECIPE_AXES},
            **{f"lo_{a}": fitted.ranges.get(a, (None, None))[0] for a in RECIPE_AXES},
            **{f"hi_{a}": fitted.ranges.get(a, (None, None))[1] for a in RECIPE_AXES},
            **{f"centre_{a}": float(getattr(fitted.centre, a)) for a in RECIPE_AXES},
        }

    return pl.DataFrame(
        [row(-1, fitted.law)] + [row(k, law) for k, law in enumerate(fitted.draws)],
        schema_overrides={"m_star": pl.Float64, "k_star": pl.Float64},
    )


class StoredLaw(NamedTuple):
    """A recipe law read back from its ``law`` frame: what a solve needs of it."""

    law: Law
    draws: list[Law]
    ranges: dict[str, tuple[float, float]]
    """The range each law axis was fitted over: the solver's bounds."""
    fixed: dict[str, float]
    """Axes the law does not vary, at the centre design."""


def law_from_frame(frame: pl.DataFrame) -> StoredLaw:
    """The law, its draws, fitted ranges and fixed axes back from ``law_frame``."""
    axes = [a for a in RECIPE_AXES if frame[f"alpha_{a}"][0] is not None]

    def law(row: Mapping[str, Any]) -> Law:
        return Law(
            row["E"],
            {a: row[f"A_{a}"] for a in axes},
            {a: row[f"alpha_{a}"] for a in axes},
            row["m_star"],
            row["k_star"],
        )

    rows = frame.sort("draw").to_dicts()
    first = rows[0]
    ranges = {a: (first[f"lo_{a}"], first[f"hi_{a}"]) for a in axes}
    fixed = {a: first[f"centre_{a}"] for a in RECIPE_AXES if a not in axes}
    return StoredLaw(law(first), [law(r) for r in rows[1:]], ranges, fixed)
