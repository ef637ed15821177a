"""The recipe of a study: its cost model from measured drivers, the recipe path and exponents with
bootstrap intervals, and Tables 18-21. The ``recipe`` and ``validate`` stages call it beside the law
(``fitted``), the pre-registered strategy designs (``designs``) and what the strategy runs spent and
the recipe's compute efficiency (``efficiency``).

Reads collect's runs and episodes (polars frames) and returns polars frames; the ``recipe`` stage
writes them and the strategy runs it plans are trained like every other run.

Compute is priced in FLOPs for the embedded study: the tiny backend counts the FLOPs of the rows
it processes, and wall time is never compute. A design's cost is its declared synthesis prices
plus the rollout compute its training budget executes (``axisrl.budget``); the strategy and
validation runs are ``charged_flops`` designs, which train until they have spent their level's
budget less their declared prices, so what they are charged is what they spend. The measured
drivers of Table 18 (env steps per trajectory, env and verifier seconds, failed-rollout fraction,
utilisation, FLOPs per width^2 per env step) fill every coefficient the config leaves null; env
and verifier seconds become FLOP-equivalents at ``c_second`` FLOPs per second. The wall-time
drivers vary between identical studies, so the default config pins them (schema.yaml).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

import polars as pl

from axisrl.laws.joint import Law
from axisrl.laws.tables import in_families
from axisrl.recipe.cost import RECIPE_AXES, CostModel
from axisrl.recipe.exponents import bootstrap_exponents, exponents, paper_convention
from axisrl.recipe.fitted import LAW_FAMILIES, FittedLaw, RecipeSettings, budgets, fixed_axes
from axisrl.recipe.solve import recipe_path

__all__ = [
    "DRIVERS",
    "PERTURBED",
    "cost_frame",
    "cost_model",
    "drivers_table",
    "exponent_table",
    "identification",
    "perturbation_table",
    "progression_table",
]

DRIVERS = (
    "horizon",
    "rollout_steps_per_trajectory",
    "env_seconds_per_call",
    "verifier_seconds_per_trajectory",
    "failed_rollout_fraction",
    "utilization",
)
"""Table 18's measured cost drivers, as collect writes them per run."""
PERTURBED = ("c_env", "c_task", "c_token")
"""The coefficients Table 21 moves by +-50%: environments, tasks and rollouts."""


def drivers_table(runs: pl.DataFrame) -> pl.DataFrame:
    """Table 18: per domain, the mean measured cost drivers over the usable runs the law is fitted
    to (the setting the strategy runs train under), and the FLOPs per width^2 per env step (rollout
    and training together) that price a rollout's compute."""
    ok = in_families(runs, *LAW_FAMILIES).filter(pl.col("status") == "ok")
    return ok.group_by("domain", maintain_order=True).agg(
        n_runs=pl.len(),
        **{name: pl.col(name).mean() for name in DRIVERS},
        flops_per_width2_step=(
            (pl.col("rollout_flops") + pl.col("train_flops")).sum()
            / (pl.col("env_steps") * pl.col("width").cast(pl.Float64) ** 2).sum()
        ),
    )


def cost_model(settings: Mapping[str, Any], drivers: Mapping[str, Any], visits: float) -> CostModel:
    """The domain's cost model: config coefficients, a null one replaced by its measured driver, and
    the task visits per run of the training budget."""
    measured = {
        "tokens_per_rollout": drivers["rollout_steps_per_trajectory"],
        "steps_per_rollout": drivers["rollout_steps_per_trajectory"],
        "env_seconds_per_call": drivers["env_seconds_per_call"],
        "verifier_seconds_per_rollout": drivers["verifier_seconds_per_trajectory"],
        "failed_fraction": drivers["failed_rollout_fraction"],
        "utilization": drivers["utilization"],
        "c_token": drivers["flops_per_width2_step"],
    }
    values = {name: measured[name] if value is None and name in measured else value for name, value in settings.items()}
    missing = [name for name, value in values.items() if value is None]
    if missing:
        raise ValueError(f"recipe.cost: {missing} are null and no run measured them")
    return CostModel.from_mapping(values | {"visits": float(visits)})


def _path_exponents(fitted: FittedLaw, model: CostModel, settings: RecipeSettings) -> pl.DataFrame:
    """The OLS exponents of one cost model's path (Tables 19 and 21 report slopes only)."""
    path = recipe_path(
        fitted.law,
        model,
        budgets(fitted, model, settings),
        bounds=fitted.ranges,
        fixed=fixed_axes(fitted),
        seed=settings.seed,
        local=False,
    )
    return exponents(path)


def exponent_table(fitted: FittedLaw, model: CostModel, settings: RecipeSettings) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(recipe path, exponents): OLS and local slopes with bootstrap percentile intervals of the
    slope (re-solved per draw of the law, on every other budget of the path, warm-started, so that
    the many draws stay cheap) and the paper's normalisation alongside."""
    grid = budgets(fitted, model, settings)
    path = recipe_path(fitted.law, model, grid, bounds=fitted.ranges, fixed=fixed_axes(fitted), seed=settings.seed)
    _, intervals = bootstrap_exponents(
        fitted.draws, model, grid[::2], bounds=fitted.ranges, fixed=fixed_axes(fitted), starts=2, seed=settings.seed
    )
    table = (
        exponents(path)
        .join(intervals, on="axis", how="left")
        .join(paper_convention(fitted.law).select("axis", "paper_exponent"), on="axis", how="left")
        .join(identification(fitted.law, fitted.draws), on="axis", how="left")
    )
    return path, table


def identification(law: Law, draws: Sequence[Law]) -> pl.DataFrame:
    """Per law axis: does the fitted law give it an effect (``A > 0``), and in how many draws. An
    axis without one does not change the predicted loss, so its optimal allocation is whatever the
    budget constraint leaves once the axes that matter reach their bounds: its slope then describes
    the solver's start, not the data, and is reported as not identified."""
    axes = [axis for axis in RECIPE_AXES if axis in law.A]
    return pl.DataFrame(
        {
            "axis": axes,
            "identified": [law.A[axis] > 0 for axis in axes],
            "n_draws_identified": [sum(draw.A[axis] > 0 for draw in draws) for axis in axes],
        },
        schema={"axis": pl.String, "identified": pl.Boolean, "n_draws_identified": pl.Int64},
    )


def _identified_columns(fitted: FittedLaw) -> dict[str, bool | None]:
    """``identified_<axis>`` for the wide Tables 19 and 21: ``identification``'s flag, which depends on
    the law and not the cost model, so every row carries it; null for an axis the law holds fixed."""
    flags = identification(fitted.law, fitted.draws)
    identified = dict(zip(flags["axis"], flags["identified"], strict=True))
    return {f"identified_{axis}": identified.get(axis) for axis in RECIPE_AXES}


def progression_table(fitted: FittedLaw, settings: RecipeSettings, drivers: Mapping[str, Any]) -> pl.DataFrame:
    """Table 19: the recipe exponents as the cost model's terms are switched on one by one."""
    flags = _identified_columns(fitted)
    rows = []
    for label, model in cost_model(settings.cost, drivers, settings.visits).progression():
        exps = _path_exponents(fitted, model, settings)
        rows.append(
            {
                "cost_model": label,
                **{a: s for a, s in zip(exps["axis"], exps["slope"], strict=True)},
                **flags,
                "c_low": exps["c_low"][0],
                "c_high": exps["c_high"][0],
            }
        )
    return pl.DataFrame(rows, schema_overrides=dict.fromkeys(flags, pl.Boolean))


def perturbation_table(fitted: FittedLaw, model: CostModel, settings: RecipeSettings) -> pl.DataFrame:
    """Table 21: the exponents with one cost coefficient moved by +-``perturbation``."""
    flags = _identified_columns(fitted)
    rows = []
    for name, factor in [("default", 1.0)] + [(c, 1 + s * settings.perturbation) for c in PERTURBED for s in (1, -1)]:
        moved = model if name == "default" else model.perturbed(name, factor)
        exps = _path_exponents(fitted, moved, settings)
        rows.append(
            {
                "perturbation": "default" if name == "default" else f"{name} x {factor:g}",
                **{a: s for a, s in zip(exps["axis"], exps["slope"], strict=True)},
                **flags,
                "c_low": exps["c_low"][0],
                "c_high": exps["c_high"][0],
            }
        )
    return pl.DataFrame(rows, schema_overrides=dict.fromkeys(flags, pl.Boolean))


def cost_frame(model: CostModel, domain: str) -> pl.DataFrame:
    """The cost model as used, one row per domain (coefficients, currency and terms)."""
    values = asdict(model)
    return pl.DataFrame(
        [{"domain": domain, **{k: v for k, v in values.items() if k != "terms"}, "terms": list(values["terms"])}]
    )
