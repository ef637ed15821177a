"""The analysis family: scaling laws, the pricing of synthetic sources, the compute-optimal recipe and
its validation, each reading the collected runs."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import polars as pl

from axisrl.artifacts import read_artifact, write_artifact
from axisrl.config import StageSpec
from axisrl.stages.collect import success_by_tier
from axisrl.stages.registry import episodes_stage

log = logging.getLogger("axisrl")


def laws(spec: StageSpec, settings: Mapping[str, Any], inputs: Mapping[str, str], outputs: Mapping[str, str]) -> None:
    """Every scaling-law analysis of the collected study; an analysis the study has no runs for
    writes one row saying so."""
    from axisrl.laws.study import LawSettings, analyse

    frames = analyse(
        read_artifact(inputs["runs"], "collect"),
        read_artifact(inputs["episodes"], "collect"),
        LawSettings(**settings["laws"]),
    )
    for name, path in outputs.items():
        frame = frames.get(name)
        if frame is None:
            frame = pl.DataFrame({"status": ["not_run"], "reason": [f"the study has no runs that {name} reads"]})
        write_artifact(frame, path, spec)
    for warning in frames["warnings"]["warning"]:
        log.warning("%s", warning)


def curve_fits(
    spec: StageSpec, settings: Mapping[str, Any], inputs: Mapping[str, str], outputs: Mapping[str, str]
) -> None:
    """The saturating fits of the runs' learning curves on V (``learning_curves``): each run's, each
    design point's with seed-bootstrap intervals, the extrapolation check, and along each axis sweep
    the laws of the fitted asymptote and midpoint (``axisrl.laws.curve_laws.curve_study``). A point's
    R0 is its base's V success (every run of a point starts from the same base); free for random init."""
    from axisrl.laws.curve_laws import axes_from_runs, curve_study

    runs = read_artifact(inputs["runs"], "collect").filter(pl.col("status") == "ok")
    curves = read_artifact(inputs["curves"], "collect").join(runs.select("run_key"), on="run_key", how="semi")
    r0 = runs.group_by("point_key").agg(r0=pl.col("p_V_base").first()) if "p_V_base" in runs.columns else None
    frames = curve_study(curves, r0, axes_from_runs(runs), n_boot=settings["n_boot"], seed=settings["seed"])
    for name, path in outputs.items():
        frame = frames.get(name)
        if frame is None:
            frame = pl.DataFrame({"status": ["not_run"], "reason": [f"the study has no axis sweep that {name} reads"]})
        write_artifact(frame, path, spec)


def pricing(
    spec: StageSpec, settings: Mapping[str, Any], inputs: Mapping[str, str], outputs: Mapping[str, str]
) -> None:
    """Discount kappa and collapse ratios r* of every synthetic source (Tables 3, 16, 17; Figure 4)."""
    from axisrl.plan import pricing_points
    from axisrl.pricing import PRICING_POINT_COLUMNS, price, pricing_tables

    options = settings["pricing"]
    rows = [
        {"point_key": point.design.point_key, **{c: getattr(point, c) for c in PRICING_POINT_COLUMNS[1:]}}
        for point in pricing_points(settings["study"])
    ]
    unit_costs = {method: values["unit_cost"] for method, values in settings["sources"]["methods"].items()}
    if rows:
        points = pl.DataFrame(rows, schema_overrides={"ratio": pl.Float64}).select(PRICING_POINT_COLUMNS)
        frames = price(
            read_artifact(inputs["runs"], "collect"),
            points,
            unit_costs,
            options["tier"],
            options["threshold"],
            options["n_boot"],
            options["seed"],
        )
        frames.update(pricing_tables(frames["pricing"], options["threshold"]))
    else:
        frames = {}
    for name, path in outputs.items():
        frame = frames.get(name)
        if frame is None or frame.height == 0:
            frame = pl.DataFrame(
                {"status": ["not_run"], "reason": ["the study has no mixture runs (study.families.mixtures)"]}
            )
        write_artifact(frame, path, spec)
    for row in frames.get("pricing", pl.DataFrame()).iter_rows(named=True):
        log.info(
            "%s at %s=%s: kappa %s (%s), r* %s",
            row["source"],
            row["axis"],
            row["real_amount"],
            row["kappa"],
            row["kappa_status"],
            row.get("r_star_threshold"),
        )


def _recipe_settings(settings: Mapping[str, Any]) -> Any:
    from axisrl.recipe.fitted import RecipeSettings

    recipe = settings["recipe"]
    return RecipeSettings(
        tier=recipe["tier"],
        cost=recipe["cost"][settings["domain"]],
        budgets=recipe["budgets"],
        strategies=recipe["strategies"],
        validation=recipe["validation"],
        n_boot=recipe["n_boot"],
        seed=recipe["seed"],
        perturbation=recipe["perturbation"],
        train=settings["train"],
    )


def recipe(spec: StageSpec, settings: Mapping[str, Any], inputs: Mapping[str, str], outputs: Mapping[str, str]) -> None:
    """The compute-optimal recipe (Tables 18-21) and the strategy and validation runs it
    pre-registers: their designs and predicted success are written before any of them is trained."""
    from axisrl.datasets import task_capacity
    from axisrl.recipe import study
    from axisrl.recipe.designs import strategy_curves, strategy_designs
    from axisrl.recipe.fitted import centre_cost, fit_recipe_law, law_frame

    options = _recipe_settings(settings)
    runs = read_artifact(inputs["runs"], "collect")
    runs = runs.filter(pl.col("domain") == settings["domain"])
    drivers = study.drivers_table(runs)
    model = study.cost_model(options.cost, drivers.row(0, named=True), options.visits)
    fitted = fit_recipe_law(runs, read_artifact(inputs["episodes"], "collect"), options)
    log.info(
        "recipe law over %s: %s; centre cost %.3g %s",
        sorted(fitted.law.alpha),
        fitted.law,
        centre_cost(fitted, model),
        model.currency,
    )
    path, exponents = study.exponent_table(fitted, model, options)
    frames = {
        "law": law_frame(fitted),
        "cost": study.cost_frame(model, settings["domain"]),
        "path": path,
        "exponents": exponents,
        "curves": strategy_curves(fitted, model, options),
        "table18": drivers,
        "table19": study.progression_table(fitted, options, drivers.row(0, named=True)),
        "table20": exponents.filter(pl.col("axis") != "share_weighted_sum").select(
            pl.lit(settings["domain"]).alias("domain"),
            "axis",
            "slope",
            "slope_lo",
            "slope_hi",
            "identified",
            "paper_exponent",
        ),
        "table21": study.perturbation_table(fitted, model, options),
        "strategies": strategy_designs(
            fitted,
            model,
            options,
            len(settings["study"]["seeds"]),
            task_capacity(read_artifact(inputs["envs"], "dedup"), read_artifact(inputs["tasks"], "dedup")),
        ),
    }
    for name, path_ in outputs.items():
        write_artifact(frames[name], path_, spec)
    for row in exponents.iter_rows(named=True):
        log.info("exponent %s: %s [%s, %s]", row["axis"], row["slope"], row.get("slope_lo"), row.get("slope_hi"))
        if row["identified"] is False:
            log.warning(
                "exponent %s is not identified: the fitted law gives %s no effect (A = 0), so its slope "
                "is where the budget constraint left the spare compute",
                row["axis"],
                row["axis"],
            )


def validate(
    spec: StageSpec, settings: Mapping[str, Any], inputs: Mapping[str, str], outputs: Mapping[str, str]
) -> None:
    """The strategy runs measured against their pre-registered predictions, what each spent against
    what it was charged, and the recipe's compute efficiency over each baseline at each level."""
    from axisrl.laws.data import pool_points, usable_runs
    from axisrl.plan import run_key
    from axisrl.recipe import CostModel
    from axisrl.recipe.efficiency import accounting, efficiency_table
    from axisrl.recipe.fitted import law_from_frame

    strategies = read_artifact(inputs["strategies"], "recipe")
    trained = pl.concat([read_artifact(p, "train") for p in inputs["train_runs"]], how="diagonal_relaxed")
    episodes = pl.concat(
        [read_artifact(p, episodes_stage(settings["train"]["backend"])) for p in inputs["episodes"]],
        how="diagonal_relaxed",
    )
    keys = pl.DataFrame(
        [
            {"run_key": run_key(point, seed), "point_key": point}
            for point in strategies["point_key"].unique().to_list()
            for seed in settings["study"]["seeds"]
        ]
    )
    runs = trained.join(success_by_tier(episodes), on="run_key", how="left").join(keys, on="run_key")
    tier = settings["recipe"]["tier"]
    measured = pool_points(runs, ["point_key"], tier)
    charged = strategies.select("point_key", "charged_compute").unique("point_key")
    spent = accounting(runs.join(charged, on="point_key"), ["point_key"])
    table = (
        strategies.join(
            measured.select("point_key", "n_seeds", "p", "loss", "loss_se", "trials"), on="point_key", how="left"
        )
        .join(spent.drop("charged_compute"), on="point_key", how="left")
        .with_columns(
            p_se=(pl.col("p") * (1 - pl.col("p")) / pl.col("trials")).sqrt(),
            inside_interval=pl.col("p").is_between(pl.col("success_lo"), pl.col("success_hi")),
            total_cost=pl.col("executed_compute") + pl.col("declared_price"),
        )
        .with_columns(total_over_budget=pl.col("total_cost") / pl.col("compute"))
    )
    law, draws, ranges, fixed = law_from_frame(read_artifact(inputs["law"], "recipe"))
    cost_row = read_artifact(inputs["cost"], "recipe").row(0, named=True)
    model = CostModel.from_mapping({k: v for k, v in cost_row.items() if k != "domain"})
    seed_runs, _ = usable_runs(runs, tier)
    efficiency = efficiency_table(
        table,
        seed_runs.select("point_key", "successes", "trials"),
        law,
        draws,
        model,
        ranges,
        fixed,
        settings["recipe"]["efficiency_draws"],
        settings["recipe"]["efficiency_boot"],
        settings["recipe"]["seed"],
    )
    write_artifact(table, outputs["measured"], spec)
    write_artifact(efficiency, outputs["efficiency"], spec)
    for row in table.iter_rows(named=True):
        log.info(
            "%s %s at %gx: spent %.3g (executed %.3g of %.3g charged, x%.3f), measured %.3f",
            row["role"],
            row["strategy"],
            row["compute_factor"],
            row["total_cost"],
            row["executed_compute"],
            row["charged_compute"],
            row["executed_over_charged"],
            row["p"],
        )
    for row in table.filter(pl.col("role") == "validation").iter_rows(named=True):
        log.info(
            "validation at %gx: measured %.3f, predicted %.3f [%.3f, %.3f], inside: %s",
            row["compute_factor"],
            row["p"],
            row["predicted_success"],
            row["success_lo"],
            row["success_hi"],
            row["inside_interval"],
        )
    for row in efficiency.iter_rows(named=True):
        log.info(
            "efficiency over %s at %gx: measured %.3g [%.3g, %.3g] (%s), predicted %s",
            row["baseline"],
            row["compute_factor"],
            row["measured_efficiency"],
            row["measured_efficiency_lo"],
            row["measured_efficiency_hi"],
            row["measured_status"],
            row["predicted_efficiency"],
        )
