"""What the strategy runs spent against what they were charged (Table 9), and the recipe's compute
efficiency over each baseline, measured from the runs and predicted by the law."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import polars as pl

from axisrl.laws.joint import Law
from axisrl.recipe.cost import CostModel
from axisrl.recipe.fitted import corner_cost
from axisrl.recipe.solve import compute_efficiency, draw_path, log_budgets

ACCOUNTING = {
    "visits": "visits",
    "tasks_seen": "distinct_tasks_seen",
    "envs_seen": "distinct_envs_seen",
    "trajectories": "episodes",
    "rollout_steps": "env_steps",
    "gradient_steps": "gradient_steps",
    "updates": "updates",
    "executed_compute": "executed_compute",
    "charged_compute": "charged_compute",
}
"""Table 9's columns (mean over a point's usable runs) and the runs' columns they average."""
BUDGET_COLUMNS = ("budget_rollouts", "token_cap", "flop_cap")
"""What the train stage records of a run's training budget (``axisrl.budget``), read to charge it."""


def with_charged_compute(runs: pl.DataFrame, model: CostModel | None) -> pl.DataFrame:
    """Each run's ``charged_compute`` (what its budget is priced at in the cost model's executed
    part): its FLOP cap where it has one (``iso_flop``, ``charged_flops``), else the executed price
    of one rollout at its width times what its budget plays: its rollouts (``fixed_visits``), or its
    env-step cap over the model's steps per rollout (``token_cap``). Without a cost model (a domain
    the recipe has no coefficients for), only the caps."""
    runs = runs.with_columns(
        pl.lit(None, pl.Float64).alias(column) for column in BUDGET_COLUMNS if column not in runs.columns
    )
    if model is None:
        return runs.with_columns(charged_compute=pl.col("flop_cap").cast(pl.Float64))
    widths = runs["width"].cast(pl.Float64).to_numpy()
    ones = np.ones_like(widths)
    per_rollout = model.executed({"width": widths, "d_env": ones, "d_task": ones, "d_traj": ones}) / model.visits
    rollouts = (
        pl.when(pl.col("token_cap").is_not_null())
        .then(pl.col("token_cap") / model.tokens_per_rollout)
        .otherwise(pl.col("budget_rollouts"))
    )
    return (
        runs.with_columns(pl.Series("_per_rollout", per_rollout))
        .with_columns(
            charged_compute=pl.coalesce(pl.col("flop_cap").cast(pl.Float64), pl.col("_per_rollout") * rollouts)
        )
        .drop("_per_rollout")
    )


def accounting(runs: pl.DataFrame, by: Sequence[str]) -> pl.DataFrame:
    """Table 9's check per group of ``by``: the usable runs' mean visits (cells), distinct tasks and
    environments seen, trajectories, rollout steps, gradient steps, updates, executed and charged
    compute, and the mean, least and largest ratio of executed to charged compute over the runs.
    ``runs`` carry ``charged_compute`` (``with_charged_compute``, or a strategy's own)."""
    ok = runs.with_columns(
        pl.lit(None, pl.Float64).alias(column) for column in ACCOUNTING.values() if column not in runs.columns
    )
    ok = ok.filter(pl.col("status") == "ok").with_columns(ratio=pl.col("executed_compute") / pl.col("charged_compute"))
    return ok.group_by(by, maintain_order=True).agg(
        runs=pl.len(),
        **{name: pl.col(column).cast(pl.Float64).mean() for name, column in ACCOUNTING.items()},
        executed_over_charged=pl.col("ratio").mean(),
        executed_over_charged_min=pl.col("ratio").min(),
        executed_over_charged_max=pl.col("ratio").max(),
    )


def _frontier(
    law: Law,
    model: CostModel,
    ranges: Mapping[str, tuple[float, float]],
    fixed: Mapping[str, float],
    low: float,
    high: float,
    seed: int,
) -> tuple[np.ndarray, np.ndarray]:
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


def _resampled_success(
    seeds: Mapping[str, tuple[np.ndarray, np.ndarray]], rng: np.random.Generator
) -> dict[str, float]:
    """One two-stage bootstrap draw of each point's pooled success: seeds resampled with replacement,
    then each drawn seed's successes redrawn from its binomial."""
    drawn = {}
    for point, (successes, trials) in seeds.items():
        pick = rng.integers(0, len(trials), size=len(trials))
        drawn[point] = float(rng.binomial(trials[pick], successes[pick] / trials[pick]).sum() / trials[pick].sum())
    return drawn


def efficiency_table(
    measured: pl.DataFrame,
    seed_runs: pl.DataFrame,
    law: Law,
    draws: Sequence[Law],
    model: CostModel,
    ranges: Mapping[str, tuple[float, float]],
    fixed: Mapping[str, float],
    n_draws: int,
    n_boot: int,
    seed: int,
) -> pl.DataFrame:
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
    usable = seed_runs.filter(pl.col("trials") > 0).sort("point_key", "successes", "trials")  # a fixed order to draw in
    seeds = {
        point: (group["successes"].to_numpy(), group["trials"].to_numpy())
        for (point,), group in usable.group_by("point_key", maintain_order=True)
    }
    rng = np.random.default_rng(seed)
    boot = [_resampled_success(seeds, rng) for _ in range(n_boot)]
    corners = [corner_cost(model, ranges, fixed, end) for end in (0, 1)]
    picks = rng.choice(len(draws), size=min(n_draws, len(draws)), replace=False)
    frontiers = [_frontier(draws[k], model, ranges, fixed, 1.01 * corners[0], 0.99 * corners[1], seed) for k in picks]
    rows = []
    for row in baselines.iter_rows(named=True):
        spent = row["total_cost"]
        needed, status = _needed_measured(recipe_costs, recipe_runs["p"].to_numpy(), row["p"])
        sampled = []
        for draw in boot:
            value, draw_status = _needed_measured(
                recipe_costs, np.array([draw[k] for k in recipe_runs["point_key"]]), draw[row["point_key"]]
            )
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
        rows.append(
            {
                "baseline": row["strategy"],
                "compute_factor": row["compute_factor"],
                "compute": row["compute"],
                "baseline_spent": spent,
                "baseline_success": row["p"],
                "measured_efficiency": spent / needed,
                "measured_status": status,
                "measured_efficiency_lo": float(np.percentile(values, 2.5)) if len(values) else None,
                "measured_efficiency_hi": float(np.percentile(values, 97.5)) if len(values) else None,
                "n_boot": len(values),
                "n_censored": sum(censored for _, censored in sampled),
                "predicted_efficiency": predicted,
                "predicted_efficiency_lo": law_low,
                "predicted_efficiency_hi": law_high,
                "n_law_draws": len(law_sampled),
                "recipe_success": recipe_row.get("p"),
                "difference": None if recipe_row.get("p") is None else recipe_row["p"] - row["p"],
                "difference_se": None if recipe_row.get("p") is None else math.hypot(recipe_row["p_se"], row["p_se"]),
            }
        )
    return pl.DataFrame(
        rows,
        schema_overrides={
            name: pl.Float64
            for name in (
                "measured_efficiency_lo",
                "measured_efficiency_hi",
                "predicted_efficiency",
                "predicted_efficiency_lo",
                "predicted_efficiency_hi",
                "recipe_success",
                "difference",
                "difference_se",
            )
        },
    )
