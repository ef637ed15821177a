"""The recipe of a study: its cost model from measured drivers, its law, the recipe path and
exponents with bootstrap intervals, Tables 18-21, and the pre-registered strategy designs.

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

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import polars as pl

from axisrl.budget import budget_problems, visits_per_run
from axisrl.laws.data import AXES, RunArrays, infer_centre, point_statistics, usable_runs
from axisrl.laws.joint import Law, bootstrap_joint, fit_joint, fitted_law, predict_loss
from axisrl.laws.tables import in_families
from axisrl.plan import Design
from axisrl.recipe.cost import RECIPE_AXES, CostModel
from axisrl.recipe.solve import (Allocation, InfeasibleBudget, allocation_at, bootstrap_exponents, compute_efficiency,
                                 draw_path, exponents, log_budgets, paper_convention, recipe_path, solve)
from axisrl.recipe.strategies import chinchilla_transfer, trajectories_only

DRIVERS = ("horizon", "rollout_steps_per_trajectory", "env_seconds_per_call", "verifier_seconds_per_trajectory",
           "failed_rollout_fraction", "utilization")
"""Table 18's measured cost drivers, as collect writes them per run."""
LAW_FAMILIES = ("axis_sweeps", "interaction", "calibration", "model_sizes")
"""The runs the recipe's joint law is fitted to: one setting apart from the four recipe axes."""
STRATEGIES = ("recipe", "trajectories_only", "chinchilla_transfer")
PERTURBED = ("c_env", "c_task", "c_token")
"""The coefficients Table 21 moves by +-50%: environments, tasks and rollouts."""


@dataclass(frozen=True)
class RecipeSettings:
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


def drivers_table(runs: pl.DataFrame) -> pl.DataFrame:
    """Table 18: per domain, the mean measured cost drivers over the usable runs the law is fitted
    to (the setting the strategy runs train under), and the FLOPs per width^2 per env step (rollout
    and training together) that price a rollout's compute."""
    ok = in_families(runs, *LAW_FAMILIES).filter(pl.col("status") == "ok")
    return ok.group_by("domain", maintain_order=True).agg(
        n_runs=pl.len(), **{name: pl.col(name).mean() for name in DRIVERS},
        flops_per_width2_step=((pl.col("rollout_flops") + pl.col("train_flops")).sum()
                               / (pl.col("env_steps") * pl.col("width").cast(pl.Float64) ** 2).sum()))


def cost_model(settings: Mapping[str, Any], drivers: Mapping[str, Any], visits: float) -> CostModel:
    """The domain's cost model: config coefficients, a null one replaced by its measured driver, and
    the task visits per run of the training budget."""
    measured = {"tokens_per_rollout": drivers["rollout_steps_per_trajectory"],
                "steps_per_rollout": drivers["rollout_steps_per_trajectory"],
                "env_seconds_per_call": drivers["env_seconds_per_call"],
                "verifier_seconds_per_rollout": drivers["verifier_seconds_per_trajectory"],
                "failed_fraction": drivers["failed_rollout_fraction"],
                "utilization": drivers["utilization"],
                "c_token": drivers["flops_per_width2_step"]}
    values = {name: measured[name] if value is None and name in measured else value
              for name, value in settings.items()}
    missing = [name for name, value in values.items() if value is None]
    if missing:
        raise ValueError(f"recipe.cost: {missing} are null and no run measured them")
    return CostModel.from_mapping(values | {"visits": float(visits)})


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
    draws = bootstrap_joint(law_runs, fit, axes, n_boot=settings.n_boot, seed=settings.seed, tier=settings.tier,
                            episodes=episodes)
    centre_values = infer_centre(in_families(runs, "axis_sweeps"), AXES)
    template = in_families(runs, "axis_sweeps").row(0, named=True)
    centre = Design(**{field: template[field] for field in Design.__dataclass_fields__} | centre_values)
    arrays = RunArrays.from_runs(ok, axes)
    stats = point_statistics(arrays.point_index, arrays.successes, arrays.trials, arrays.points.height)
    return FittedLaw(fit, fitted_law(fit, axes), draws,
                     {axis: (float(ok[axis].min()), float(ok[axis].max())) for axis in axes}, centre,
                     stats.seed_variance, float(np.mean(arrays.trials)))


def _fixed(fitted: FittedLaw) -> dict[str, float]:
    """Axes the law does not vary are held at the centre design."""
    return {axis: float(getattr(fitted.centre, axis)) for axis in RECIPE_AXES if axis not in fitted.law.alpha}


def centre_cost(fitted: FittedLaw, model: CostModel) -> float:
    return float(model.cost({axis: np.asarray(float(getattr(fitted.centre, axis))) for axis in RECIPE_AXES}))


def budgets(fitted: FittedLaw, model: CostModel, settings: RecipeSettings) -> np.ndarray:
    """``n`` log-spaced budgets from ``low`` to ``high`` times the centre design's cost, within what
    the cost model can buy inside the fitted bounds (a budget outside has no allocation in range;
    the exponent tables state the range used, ``c_low`` and ``c_high``)."""
    unit = centre_cost(fitted, model)
    low = max(settings.budgets["low"] * unit, 1.01 * corner_cost(model, fitted.ranges, _fixed(fitted), 0))
    high = min(settings.budgets["high"] * unit, 0.99 * corner_cost(model, fitted.ranges, _fixed(fitted), 1))
    if not low < high:
        raise ValueError(f"recipe.budgets: {settings.budgets['low']}-{settings.budgets['high']} x the centre "
                         f"cost {unit:.3g} {model.currency} leaves no budget inside the fitted bounds")
    return log_budgets(low, high, settings.budgets["n"])


def corner_cost(model: CostModel, ranges: Mapping[str, tuple[float, float]], fixed: Mapping[str, float],
                end: int) -> float:
    """The cost with every free axis at its lower (``end=0``) or upper (``end=1``) fitted bound."""
    values = {a: np.asarray(r[end]) for a, r in ranges.items()} | {a: np.asarray(v) for a, v in fixed.items()}
    return float(model.cost(values))


def _path_exponents(fitted: FittedLaw, model: CostModel, settings: RecipeSettings) -> pl.DataFrame:
    """The OLS exponents of one cost model's path (Tables 19 and 21 report slopes only)."""
    path = recipe_path(fitted.law, model, budgets(fitted, model, settings), bounds=fitted.ranges,
                       fixed=_fixed(fitted), seed=settings.seed, local=False)
    return exponents(path)


def exponent_table(fitted: FittedLaw, model: CostModel, settings: RecipeSettings) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(recipe path, exponents): OLS and local slopes with bootstrap percentile intervals of the
    slope (re-solved per draw of the law, on every other budget of the path, warm-started: the
    draws cost seconds, not minutes) and the paper's normalisation alongside."""
    grid = budgets(fitted, model, settings)
    path = recipe_path(fitted.law, model, grid, bounds=fitted.ranges, fixed=_fixed(fitted), seed=settings.seed)
    _, intervals = bootstrap_exponents(fitted.draws, model, grid[::2], bounds=fitted.ranges, fixed=_fixed(fitted),
                                       starts=2, seed=settings.seed)
    table = (exponents(path).join(intervals, on="axis", how="left")
             .join(paper_convention(fitted.law).select("axis", "paper_exponent"), on="axis", how="left")
             .join(identification(fitted.law, fitted.draws), on="axis", how="left"))
    return path, table


def identification(law: Law, draws: Sequence[Law]) -> pl.DataFrame:
    """Per law axis: does the fitted law give it an effect (``A > 0``), and in how many draws. An
    axis without one does not change the predicted loss, so its optimal allocation is whatever the
    budget constraint leaves once the axes that matter reach their bounds: its slope then describes
    the solver's start, not the data, and is reported as not identified."""
    axes = [axis for axis in RECIPE_AXES if axis in law.A]
    return pl.DataFrame({"axis": axes, "identified": [law.A[axis] > 0 for axis in axes],
                         "n_draws_identified": [sum(draw.A[axis] > 0 for draw in draws) for axis in axes]},
                        schema={"axis": pl.String, "identified": pl.Boolean, "n_draws_identified": pl.Int64})


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
        rows.append({"cost_model": label, **{a: s for a, s in zip(exps["axis"], exps["slope"], strict=True)},
                     **flags, "c_low": exps["c_low"][0], "c_high": exps["c_high"][0]})
    return pl.DataFrame(rows, schema_overrides=dict.fromkeys(flags, pl.Boolean))


def perturbation_table(fitted: FittedLaw, model: CostModel, settings: RecipeSettings) -> pl.DataFrame:
    """Table 21: the exponents with one cost coefficient moved by +-``perturbation``."""
    flags = _identified_columns(fitted)
    rows = []
    for name, factor in [("default", 1.0)] + [(c, 1 + s * settings.perturbation) for c in PERTURBED for s in (1, -1)]:
        moved = model if name == "default" else model.perturbed(name, factor)
        exps = _path_exponents(fitted, moved, settings)
        rows.append({"perturbation": "default" if name == "default" else f"{name} x {factor:g}",
                     **{a: s for a, s in zip(exps["axis"], exps["slope"], strict=True)},
                     **flags, "c_low": exps["c_low"][0], "c_high": exps["c_high"][0]})
    return pl.DataFrame(rows, schema_overrides=dict.fromkeys(flags, pl.Boolean))


def round_design(values: Mapping[str, float], centre: Design, visits_per_update: int,
                 capacity: Sequence[int]) -> Design:
    """The nearest design the study can train: integer axes, at least one task per environment and
    one per visit of an update, no more than the pool holds (``capacity``, from
    ``datasets.task_capacity``), a width that is a multiple of 8."""
    d_env = min(max(1, round(values["d_env"])), len(capacity))
    d_task = min(max(d_env, visits_per_update, round(values["d_task"])), capacity[d_env - 1])
    return replace(centre, d_env=d_env, d_task=d_task, d_traj=max(1, round(values["d_traj"])),
                   width=max(8, 8 * round(values["width"] / 8)))


def _values(design: Design) -> dict[str, np.ndarray]:
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
        raise ValueError(f"{label}: d_env={design.d_env} d_task={design.d_task} width={design.width} costs "
                         f"{one:.3g} {model.currency} with one rollout per visit, more than the budget {compute:.3g}")
    spent = replace(design, d_traj=d_traj)
    return replace(spent, budget="charged_flops", flop_budget=compute - float(model.declared(_values(spent))))


def prediction_interval(fitted: FittedLaw, design: Design, n_seeds: int, level: float = 0.95,
                        seed: int = 0) -> tuple[float, float, float]:
    """(predicted success, low, high) of a design's measured success pooled over ``n_seeds``
    seeds: the law's bootstrap draws plus seed and held-out binomial noise on the loss scale."""
    frame = pl.DataFrame([asdict(design)])
    point = float(np.exp(-predict_loss(fitted.law, frame)[0]))
    losses = np.array([predict_loss(law, frame)[0] for law in fitted.draws])
    p = np.exp(-losses)
    var_loss = ((1 - p) / p / fitted.trials_per_run + fitted.seed_variance) / n_seeds
    rng = np.random.default_rng(seed)
    simulated = np.exp(-np.maximum(losses + rng.standard_normal(len(losses)) * np.sqrt(var_loss), 0.0))  # p <= 1
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(simulated, [tail, 100 - tail])
    return point, float(low), float(high)


def _strategy_allocation(strategy: str, fitted: FittedLaw, model: CostModel, compute: float,
                         fixed: Mapping[str, float] | None = None) -> Allocation:
    reference = {axis: float(getattr(fitted.centre, axis)) for axis in RECIPE_AXES}
    if strategy == "recipe":
        bounds = {a: r for a, r in fitted.ranges.items() if a not in (fixed or {})}
        return solve(fitted.law, model, compute, bounds=bounds, fixed=_fixed(fitted) | dict(fixed or {}))
    if strategy == "trajectories_only":
        return trajectories_only(fitted.law, model, compute, reference)
    return chinchilla_transfer(fitted.law, model, compute, reference, hold=tuple(_fixed(fitted)))


def strategy_designs(fitted: FittedLaw, model: CostModel, settings: RecipeSettings, n_seeds: int,
                     capacity: Sequence[int]) -> pl.DataFrame:
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
        design = charged_design(round_design(allocation.values, fitted.centre, settings.train["visits_per_update"],
                                             capacity), model, compute, label)
        problems = budget_problems(design.as_dict(), settings.train)
        if problems:
            raise ValueError(f"{label}: {design.as_dict()}: {'; '.join(problems)}")
        rounded = allocation_at(fitted.law, model, {a: float(getattr(design, a)) for a in RECIPE_AXES}, compute,
                                strategy=strategy)
        predicted, low, high = prediction_interval(fitted, design, n_seeds, seed=settings.seed)
        rows.append({"role": role, "strategy": strategy, "compute_factor": float(factor), "compute": compute,
                     "currency": model.currency, "point_key": design.point_key, **asdict(design),
                     "charged_compute": design.flop_budget, "declared_price": compute - design.flop_budget,
                     "cost": rounded.cost, "predicted_loss": rounded.predicted_loss,
                     "predicted_success": predicted, "success_lo": low, "success_hi": high,
                     **{f"share_{a}": rounded.shares[a] for a in RECIPE_AXES},
                     **{f"solved_{a}": allocation.values[a] for a in RECIPE_AXES}})
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
            rows.append({"strategy": strategy, "compute": float(compute), "currency": model.currency,
                         "predicted_success": allocation.predicted_success, **allocation.values,
                         **{f"share_{a}": allocation.shares[a] for a in RECIPE_AXES}})
    return pl.DataFrame(rows)


def law_frame(fitted: FittedLaw) -> pl.DataFrame:
    """The law and its bootstrap draws (draw -1 is the fit), one row each: what ``axisrl recipe`` reads."""
    def row(draw: int, law: Law) -> dict[str, Any]:
        return {"draw": draw, "E": law.E, "m_star": law.m_star, "k_star": law.k_star,
                **{f"A_{a}": law.A.get(a) for a in RECIPE_AXES}, **{f"alpha_{a}": law.alpha.get(a) for a in RECIPE_AXES},
                **{f"lo_{a}": fitted.ranges.get(a, (None, None))[0] for a in RECIPE_AXES},
                **{f"hi_{a}": fitted.ranges.get(a, (None, None))[1] for a in RECIPE_AXES},
                **{f"centre_{a}": float(getattr(fitted.centre, a)) for a in RECIPE_AXES}}
    return pl.DataFrame([row(-1, fitted.law)] + [row(k, law) for k, law in enumerate(fitted.draws)],
                        schema_overrides={"m_star": pl.Float64, "k_star": pl.Float64})


def law_from_frame(frame: pl.DataFrame) -> tuple[Law, list[Law], dict[str, tuple[float, float]], dict[str, float]]:
    """(law, draws, fitted ranges, fixed axes) back from ``law_frame``."""
    axes = [a for a in RECIPE_AXES if frame[f"alpha_{a}"][0] is not None]

    def law(row: Mapping[str, Any]) -> Law:
        return Law(row["E"], {a: row[f"A_{a}"] for a in axes}, {a: row[f"alpha_{a}"] for a in axes},
                   row["m_star"], row["k_star"])

    rows = frame.sort("draw").to_dicts()
    first = rows[0]
    ranges = {a: (first[f"lo_{a}"], first[f"hi_{a}"]) for a in axes}
    fixed = {a: first[f"centre_{a}"] for a in RECIPE_AXES if a not in axes}
    return law(first), [law(r) for r in rows[1:]], ranges, fixed


def cost_frame(model: CostModel, domain: str) -> pl.DataFrame:
    """The cost model as used, one row per domain (coefficients, currency and terms)."""
    values = asdict(model)
    return pl.DataFrame([{"domain": domain, **{k: v for k, v in values.items() if k != "terms"},
                          "terms": list(values["terms"])}])


ACCOUNTING = {"visits": "visits", "tasks_seen": "distinct_tasks_seen", "envs_seen": "distinct_envs_seen",
              "trajectories": "episodes", "rollout_steps": "env_steps", "gradient_steps": "gradient_steps",
              "updates": "updates", "executed_compute": "executed_compute", "charged_compute": "charged_compute"}
"""Table 9's columns (mean over a point's usable runs) and the runs' columns they average."""
BUDGET_COLUMNS = ("budget_rollouts", "max_rollout_steps", "max_flops")
"""What the train stage records of a run's training budget (``axisrl.budget``), read to charge it."""


def with_charged_compute(runs: pl.DataFrame, model: CostModel | None) -> pl.DataFrame:
    """Each run's ``charged_compute`` (what its budget is priced at in the cost model's executed
    part): its FLOP cap where it has one (``iso_flop``, ``charged_flops``), else the executed price
    of one rollout at its width times what its budget plays: its rollouts (``fixed_visits``), or its
    env-step cap over the model's steps per rollout (``token_cap``). Without a cost model (a domain
    the recipe has no coefficients for), only the caps."""
    runs = runs.with_columns(pl.lit(None, pl.Float64).alias(column) for column in BUDGET_COLUMNS
                             if column not in runs.columns)
    if model is None:
        return runs.with_columns(charged_compute=pl.col("max_flops").cast(pl.Float64))
    widths = runs["width"].cast(pl.Float64).to_numpy()
    ones = np.ones_like(widths)
    per_rollout = model.executed({"width": widths, "d_env": ones, "d_task": ones, "d_traj": ones}) / model.visits
    rollouts = pl.when(pl.col("max_rollout_steps").is_not_null()).then(
        pl.col("max_rollout_steps") / model.tokens_per_rollout).otherwise(pl.col("budget_rollouts"))
    return runs.with_columns(pl.Series("_per_rollout", per_rollout)).with_columns(
        charged_compute=pl.coalesce(pl.col("max_flops").cast(pl.Float64), pl.col("_per_rollout") * rollouts)
    ).drop("_per_rollout")


def accounting(runs: pl.DataFrame, by: Sequence[str]) -> pl.DataFrame:
    """Table 9's check per group of ``by``: the usable runs' mean visits (cells), distinct tasks and
    environments seen, trajectories, rollout steps, gradient steps, updates, executed and charged
    compute, and the mean, least and largest ratio of executed to charged compute over the runs.
    ``runs`` carry ``charged_compute`` (``with_charged_compute``, or a strategy's own)."""
    ok = runs.with_columns(pl.lit(None, pl.Float64).alias(column) for column in ACCOUNTING.values()
                           if column not in runs.columns)
    ok = ok.filter(pl.col("status") == "ok").with_columns(
        ratio=pl.col("executed_compute") / pl.col("charged_compute"))
    return ok.group_by(by, maintain_order=True).agg(
        runs=pl.len(), **{name: pl.col(column).cast(pl.Float64).mean() for name, column in ACCOUNTING.items()},
        executed_over_charged=pl.col("ratio").mean(), executed_over_charged_min=pl.col("ratio").min(),
        executed_over_charged_max=pl.col("ratio").max())


def _frontier(law: Law, model: CostModel, ranges: Mapping[str, tuple[float, float]], fixed: Mapping[str, float],
              low: float, high: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(ln C, optimal L) on a grid of budgets: the law's optimal frontier, decreasing in C."""
    path = draw_path(law, model, log_budgets(low, high, 25), bounds=ranges, fixed=fixed, starts=2, seed=seed)
    return np.log(path["compute"].to_numpy()), path["predicted_loss"].to_numpy()


def _needed_compute(frontier: tuple[np.ndarray, np.ndarray], loss: float) -> float | None:
    """The budget at which the frontier reaches ``loss`` (None outside the frontier's range)."""
    ln_c, frontier_loss = frontier
    if not frontier_loss.min() <= loss <= frontier_loss.max():
        return None
    return float(np.exp(np.interp(-loss, -np.minimum.accumulate(frontier_loss), ln_c)))


def _needed_measured(costs: np.ndarray, success: np.ndarray, target: float) -> tuple[float, str]:
    """The least spent compute at which the recipe's measured success reaches ``target``: its levels
    in order of spent compute, success as the running best, linear in log compute between levels.
    ``("below", cheapest level's cost)`` when the cheapest level already reaches it (so the real
    value is at most that), ``("above", dearest level's cost)`` when no level does (at least that)."""
    order = np.argsort(costs)
    ln_c, best = np.log(costs[order]), np.maximum.accumulate(success[order])
    if target <= best[0]:
        return float(costs[order][0]), "below"
    if target > best[-1]:
        return float(costs[order][-1]), "above"
    k = int(np.searchsorted(best, target))
    frac = (target - best[k - 1]) / (best[k] - best[k - 1])
    return float(np.exp(ln_c[k - 1] + frac * (ln_c[k] - ln_c[k - 1]))), "measured"


def _resampled_success(seeds: Mapping[str, tuple[np.ndarray, np.ndarray]], rng: np.random.Generator
                       ) -> dict[str, float]:
    """One two-stage bootstrap draw of each point's pooled success: seeds resampled with replacement,
    then each drawn seed's successes redrawn from its binomial."""
    drawn = {}
    for point, (successes, trials) in seeds.items():
        pick = rng.integers(0, len(trials), size=len(trials))
        drawn[point] = float(rng.binomial(trials[pick], successes[pick] / trials[pick]).sum() / trials[pick].sum())
    return drawn


def efficiency_table(measured: pl.DataFrame, seed_runs: pl.DataFrame, law: Law, draws: Sequence[Law],
                     model: CostModel, ranges: Mapping[str, tuple[float, float]], fixed: Mapping[str, float],
                     n_draws: int, n_boot: int, seed: int) -> pl.DataFrame:
    """Per baseline and compute level, the recipe's compute efficiency over the baseline twice.

    ``measured_efficiency`` is measured on both sides: the baseline's spent compute (``total_cost``:
    executed FLOPs plus declared prices) over the spent compute at which the recipe's measured
    success curve reaches the baseline's measured success (``_needed_measured``), with a percentile
    interval over ``n_boot`` two-stage bootstrap draws of every strategy point's success (seeds, then
    binomial); ``measured_status`` says when that is only a bound, and ``n_censored`` how many draws
    were. ``predicted_efficiency`` is the law's prediction: the baseline's spent compute over the
    compute the law's optimal frontier needs for the baseline's measured loss (``compute_efficiency``),
    with a percentile interval over ``n_draws`` law draws. ``recipe_success``, ``difference`` and
    ``difference_se`` compare the two strategies' measured success at the same level.

    ``measured`` is validate's frame (one row per strategy point, ``total_cost``, ``p`` and ``p_se``
    among its columns); ``seed_runs`` has one row per run: ``point_key``, ``successes``, ``trials``."""
    runs = measured.filter(pl.col("role") == "strategy")
    baselines = runs.filter(pl.col("strategy") != "recipe")
    recipe_runs = runs.filter(pl.col("strategy") == "recipe")
    recipe_by_level = {row["compute_factor"]: row for row in recipe_runs.to_dicts()}
    recipe_costs = recipe_runs["total_cost"].to_numpy()
    seeds = {point: (group["successes"].to_numpy(), group["trials"].to_numpy())
             for (point,), group in seed_runs.filter(pl.col("trials") > 0).group_by("point_key")}
    rng = np.random.default_rng(seed)
    boot = [_resampled_success(seeds, rng) for _ in range(n_boot)]
    corners = [corner_cost(model, ranges, fixed, end) for end in (0, 1)]
    picks = rng.choice(len(draws), size=min(n_draws, len(draws)), replace=False)
    frontiers = [_frontier(draws[k], model, ranges, fixed, 1.01 * corners[0], 0.99 * corners[1], seed)
                 for k in picks]
    rows = []
    for row in baselines.iter_rows(named=True):
        spent = row["total_cost"]
        needed, status = _needed_measured(recipe_costs, recipe_runs["p"].to_numpy(), row["p"])
        sampled = []
        for draw in boot:
            value, draw_status = _needed_measured(recipe_costs, np.array([draw[k] for k in recipe_runs["point_key"]]),
                                                  draw[row["point_key"]])
            sampled.append((spent / value, draw_status != "measured"))
        values = np.array([v for v, _ in sampled])
        try:
            predicted = compute_efficiency(law, model, row["loss"], spent, bounds=ranges, fixed=fixed)
        except ValueError:
            predicted = None
        law_needed = [_needed_compute(f, row["loss"] + rng.standard_normal() * row["loss_se"]) for f in frontiers]
        law_sampled = [spent / c for c in law_needed if c is not None]
        law_low, law_high = np.percentile(law_sampled, [2.5, 97.5]) if len(law_sampled) >= 10 else (None, None)
        recipe_row = recipe_by_level.get(row["compute_factor"], {})
        rows.append({"baseline": row["strategy"], "compute_factor": row["compute_factor"], "compute": row["compute"],
                     "baseline_spent": spent, "baseline_success": row["p"],
                     "measured_efficiency": spent / needed, "measured_status": status,
                     "measured_efficiency_lo": float(np.percentile(values, 2.5)) if len(values) else None,
                     "measured_efficiency_hi": float(np.percentile(values, 97.5)) if len(values) else None,
                     "n_boot": len(values), "n_censored": sum(censored for _, censored in sampled),
                     "predicted_efficiency": predicted, "predicted_efficiency_lo": law_low,
                     "predicted_efficiency_hi": law_high, "n_law_draws": len(law_sampled),
                     "recipe_success": recipe_row.get("p"),
                     "difference": None if recipe_row.get("p") is None else recipe_row["p"] - row["p"],
                     "difference_se": None if recipe_row.get("p") is None else
                     math.hypot(recipe_row["p_se"], row["p_se"])})
    return pl.DataFrame(rows, schema_overrides={name: pl.Float64 for name in (
        "measured_efficiency_lo", "measured_efficiency_hi", "predicted_efficiency", "predicted_efficiency_lo",
        "predicted_efficiency_hi", "recipe_success", "difference", "difference_se")})
