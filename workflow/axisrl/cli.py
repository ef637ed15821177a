"""``axisrl show PATH``, ``axisrl catalog [RESULTS]``: read artifacts without the workflow;
``axisrl fit RUNS --out DIR``: fit and plot a runs table the user brings (schema: ``axisrl.laws``; ``--curves FILE``:
learning curves, ``axisrl.laws.curves``);
``axisrl recipe --budget C``: the compute-optimal design (model width, environments, tasks, trajectories)
at a budget, from the recipe stage's fitted law and cost model, with its predicted held-out success;
``axisrl where [TARGET]``: which rule makes a table, figure or stage, and which function computes it;
``axisrl power CONFIG``: the interval half-widths a study design buys, and its compute, by simulation;
``axisrl model tiny DIR``: a small Qwen2-architecture model and its tokenizer, no download (the GPU smoke check)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from axisrl import __version__
from axisrl import cli_inputs as checks
from axisrl.artifacts import ArtifactError, catalog, first_line, not_a_file, read_artifact, read_meta, read_table

if TYPE_CHECKING:
    from axisrl.planner import Plan
    from axisrl.recipe import CostModel

UNWRAPPED = {"tbl_width_chars": 65_535}
"""polars' table width (its largest): a printed table is never wrapped to fit a width polars guesses, which for
a pipe or a file (no terminal) is 100 characters and breaks column names over lines a script cannot parse."""


def _show(path: str, rows: int) -> None:
    if Path(path).is_dir():
        raise ValueError(f"{path}: a folder, not an artifact (`axisrl catalog {path}` lists the artifacts under it)")
    meta = read_meta(path)
    frame = read_artifact(path)
    print(f"{path}\n  stage {meta.stage}  key {meta.key}  created {meta.created}  axisrl {meta.version}")
    print(f"  inputs {json.dumps(meta.inputs)}  libraries {json.dumps(meta.libraries)}")
    recorded = json.dumps(meta.machine) if meta.machine else "not recorded (an artifact older than the record)"
    print(f"  machine {recorded}")
    print(f"  {frame.height} rows x {frame.width} columns")
    print("schema:")
    for name, dtype in frame.schema.items():
        print(f"  {name}: {dtype}")
    shown = min(rows, frame.height)  # -n 10**30 asks for every row; polars takes at most 2**63 - 1
    if rows:
        with pl.Config(tbl_rows=max(shown, 1), tbl_cols=12, fmt_str_lengths=40, **UNWRAPPED):
            print(frame.head(shown))
    print("config:")
    print(json.dumps(meta.config, indent=2, sort_keys=True))


def _catalog(results: str) -> None:
    checks.results_folder(results)
    frame = catalog(results).select("stage", "key", "path", "created", "rows", "error")
    with pl.Config(tbl_rows=-1, fmt_str_lengths=80, **UNWRAPPED):
        print(frame)


def _fit(runs_path: str, episodes_path: str | None, out: str, tier: str | None, n_boot: int, seed: int) -> None:
    """``axisrl fit RUNS``; ``tier`` None: ``--tier`` not given (T2, where the table has tiers)."""
    folder = checks.out_folder(out)
    runs = read_table(runs_path)
    episodes = read_table(episodes_path) if episodes_path else None
    from axisrl.laws.data import TableError  # the laws and the report import in seconds: after the files are read
    from axisrl.laws.study import LawSettings, analyse

    try:
        runs = checks.fit_inputs(runs, episodes, tier)
        frames = analyse(runs, episodes, LawSettings(tier=tier or "T2", n_boot=n_boot, seed=seed))
    except TableError as exc:  # a table no fit should read: the file it came from
        raise ValueError(f"{episodes_path if exc.table == 'episodes' else runs_path}: {exc}") from None
    except checks.FlagError as exc:
        flag = f"--episodes {episodes_path}" if exc.flag == "--episodes" else exc.flag
        raise ValueError(f"{flag}: {runs_path}: {exc}") from None
    except (pl.exceptions.PolarsError, KeyError, IndexError, TypeError, ValueError, ArithmeticError) as exc:
        # columns, types or values other than a runs table's that the checks above let through: the files, in words
        inputs = runs_path if episodes_path is None else f"{runs_path} or {episodes_path}"
        reason = str(exc) if isinstance(exc, ValueError) else f"not a runs table axisrl fit reads ({first_line(exc)})"
        raise ValueError(f"{inputs}: {reason}") from None
    from axisrl.report.compact import fits_by_setting, markdown
    from axisrl.report.figures import figure2

    _write_frames(frames, folder)
    figure2(frames["points"], frames["axis_fits"], folder / "fig2.png", folder / "fig2.pdf", frames.get("trends"))
    table2 = fits_by_setting({"series": "model size"}).build(frames["axis_fits"])
    print("Table 2: log-log slope alpha of L = -ln p per axis, 95 % interval (every column: axis_fits.csv)")
    print(markdown(pl.DataFrame(table2, schema=dict.fromkeys(table2[0], pl.String))))
    for warning in frames["warnings"]["warning"]:
        print(f"axisrl: warning: {warning}", file=sys.stderr)
    print(f"wrote {len(frames)} tables and fig2 to {folder}")


def _write_frames(frames: dict[str, pl.DataFrame], folder: Path) -> Path:
    """Each frame as Parquet, with its Markdown and CSV tables, into ``folder`` (made if need be)."""
    from axisrl.report.tables import write_table

    folder.mkdir(parents=True, exist_ok=True)
    for name, frame in frames.items():
        frame.write_parquet(folder / f"{name}.parquet")
        write_table(frame, folder / f"{name}.md", folder / f"{name}.csv", name, name)
    return folder


def _fit_curves(curves_path: str, out: str, n_boot: int, seed: int) -> None:
    """``axisrl fit --curves FILE``: the saturating fits of a user's learning curves (``axisrl.laws.curves``)."""
    folder = checks.out_folder(out)
    table = read_table(curves_path)
    from axisrl.laws.curve_laws import curve_study, curves_from_table

    try:
        user = curves_from_table(table)
        frames = curve_study(user.curves, user.r0, user.axes, n_boot=n_boot, seed=seed)
    except (pl.exceptions.PolarsError, ValueError) as exc:
        raise ValueError(f"{curves_path}: {exc if isinstance(exc, ValueError) else first_line(exc)}") from None
    from axisrl.report.compact import compact_table, markdown
    from axisrl.report.curve_figure import curve_figure

    _write_frames(frames, folder)
    curve_figure(user.curves, frames["curve_points"], folder / "fig_curves.png", folder / "fig_curves.pdf", user.axes)
    points = frames["curve_points"]
    print(f"{points['A'].is_not_null().sum()} of {points.height} designs' curves identify the asymptote A")
    summary = frames["extrapolation"].filter(pl.col("unit").str.starts_with("all "))
    print("extrapolation from each curve's first half to its last point (every row: extrapolation.csv):")
    print(markdown(summary.select("unit", "n_predicted", "mean_abs_error", "coverage")))
    if "asymptote_laws" in frames:
        print("laws along the axes of the asymptote A and of C_mid (every column: asymptote_laws.csv):")
        print(markdown(compact_table("table2_asymptote", frames["asymptote_laws"])))
    print(f"wrote {len(frames)} tables and fig_curves to {folder}")


RECIPE_AXIS_NAMES = {
    "width": "policy width N",
    "d_env": "environments D_E",
    "d_task": "tasks D_T",
    "d_traj": "trajectories per task D_tau",
}


def _newest_law() -> Path:
    """The newest ``results/recipe/*/law.parquet`` under the current directory, by the artifact's
    ``created`` time (ties: the first in path order); unreadable ones are skipped with a warning."""
    dated = []
    for path in sorted(Path("results").glob("recipe/*/law.parquet")):
        try:
            meta = read_meta(path)
        except ArtifactError as exc:
            print(f"axisrl: warning: skipping {exc}", file=sys.stderr)
            continue
        if meta.stage != "recipe":
            print(f"axisrl: warning: skipping {path}: written by stage '{meta.stage}', not 'recipe'", file=sys.stderr)
            continue
        dated.append((datetime.fromisoformat(meta.created), path))
    if not dated:
        raise ValueError(
            f"no recipe law found (results/recipe/*/law.parquet under {Path.cwd()}): "
            "run `snakemake recipe` first or pass --law"
        )
    newest = max(created for created, _ in dated)
    return next(path for created, path in dated if created == newest)


def _cost_model(cost_path: Path, domain: str | None) -> tuple[str, CostModel]:
    """The cost model of ``domain`` (default: the only one) from a recipe ``cost.parquet``."""
    from axisrl.recipe import CostModel

    costs = read_artifact(cost_path, "recipe")
    if "domain" not in costs.columns or costs.height == 0:
        raise ValueError(f"{cost_path}: no cost model (a cost.parquet has one row per domain, with a domain column)")
    domains = costs["domain"].to_list()
    if domain is None:
        if len(domains) != 1:
            raise ValueError(f"{cost_path} has cost models for domains {domains}: pick one with --domain")
        domain = domains[0]
    elif domain not in domains:
        raise ValueError(f"{cost_path} has no cost model for domain {domain!r}; it has {domains}")
    row = costs.filter(pl.col("domain") == domain).row(0, named=True)
    try:
        return domain, CostModel.from_mapping({k: v for k, v in row.items() if k != "domain"})
    except (TypeError, ValueError) as exc:  # a coefficient stored as text, say: the model's own check, and the file
        raise ValueError(f"{cost_path}: domain {domain!r}: {exc}") from None


def _rounded(value: float) -> int:
    """A trainable amount: a whole number, at least 1."""
    return max(1, round(value))


def _recipe(budget: float, domain: str | None, law_path: str | None, starts: int) -> None:
    import numpy as np

    from axisrl.laws.joint import predict_loss
    from axisrl.recipe import RECIPE_AXES, InfeasibleBudget, solve
    from axisrl.recipe.fitted import law_from_frame

    path = Path(law_path) if law_path else _newest_law()
    frame = checks.law_columns(read_artifact(path, "recipe"), path)
    try:
        law, draws, ranges, fixed = law_from_frame(frame)
    except (KeyError, IndexError, pl.exceptions.ColumnNotFoundError) as exc:  # cost.parquet, say
        raise ValueError(f"{path}: a recipe artifact, not its law (law.parquet): {first_line(exc)}") from None
    first = frame.sort("draw").row(0, named=True)
    centre = {a: float(first[f"centre_{a}"]) for a in RECIPE_AXES}
    domain, model = _cost_model(path.parent / "cost.parquet", domain)
    centre_cost = float(model.cost({a: np.asarray(v) for a, v in centre.items()}))
    currency = model.currency
    try:
        allocation = solve(law, model, budget, bounds=ranges, fixed=fixed, starts=starts)
    except InfeasibleBudget as exc:  # the budget's fault: the flag
        raise ValueError(f"--budget {budget:g}: {exc}") from None
    except ValueError as exc:  # the law's or the cost model's (bounds out of order, say): the files
        raise ValueError(f"{path} or {path.parent / 'cost.parquet'}: {exc}") from None

    design = pl.DataFrame([allocation.values])
    success = np.exp(-np.array([predict_loss(draw, design)[0] for draw in draws], dtype=np.float64))
    success = success[np.isfinite(success)]
    rounded = {a: _rounded(v) for a, v in allocation.values.items()}
    rounded_cost = float(model.cost({a: np.asarray(float(v)) for a, v in rounded.items()}))

    print(f"compute-optimal design at a budget of {budget:.4g} {currency} (domain {domain})")
    axes = ", ".join(a for a in RECIPE_AXES if a in law.alpha)
    print(f"  law:     {path} (created {read_meta(path).created}; axes {axes}; {len(draws)} bootstrap draws)")
    print(f"  cost:    {currency}, terms {' + '.join(model.terms)}")
    centre_text = ", ".join(f"{a} {v:g}" for a, v in centre.items())
    print(
        f"  centre design ({centre_text}) costs {centre_cost:.4g} {currency}: "
        f"the budget is {budget / centre_cost:.3g}x that"
    )
    print()
    print(f"  {'axis':<8} {'':<28} {'use':>10} {'exact':>12} {'share':>7}  range")
    for axis in RECIPE_AXES:
        if axis in fixed:
            where = "held at the centre (not in the law)"
        else:
            low, high = ranges[axis]
            where = f"fitted [{low:g}, {high:g}]"
        print(
            f"  {axis:<8} {RECIPE_AXIS_NAMES[axis]:<28} {rounded[axis]:>10,} {allocation.values[axis]:>12.6g} "
            f"{allocation.shares[axis]:>7.3f}  {where}"
        )
    total = sum(allocation.shares.values())
    print(
        "  share = eps_i / C = dC/dln x_i / C, the part of the budget that scales with the axis"
        + (
            f" (sum {total:.3g}: a cost term that grows with several axes, like the rollouts, counts for each)"
            if abs(total - 1) > 0.01
            else ""
        )
    )
    print()
    point = allocation.predicted_success
    if success.size >= 2:
        low, high = np.percentile(success, [2.5, 97.5])
        print(
            f"  predicted held-out success: {point:.3f}, 95% interval [{low:.3f}, {high:.3f}] "
            f"({success.size} bootstrap draws of the law)"
        )
    else:
        print(f"  predicted held-out success: {point:.3f} (no interval: the law file has no bootstrap draws)")
    print(f"  binding bounds: {', '.join(allocation.binding) if allocation.binding else 'none (interior optimum)'}")
    print(
        f"  the rounded design costs {rounded_cost:.4g} {currency} ({100 * rounded_cost / budget:.1f}% of the budget)"
    )
    if allocation.status != "ok":
        print(f"axisrl: warning: the solver did not confirm the optimum: {allocation.status}", file=sys.stderr)


def _cell(value: object) -> str:
    """A power-table cell: half-widths, probabilities and costs, read on the scale of a success rate, so a
    floating-point residue (``4.7e-17``) prints as 0."""
    from axisrl.report.compact import number

    return number(value, 1.0)


def _power(
    configs: list[str],
    noise: str | None,
    results: str | None,
    budget: float | None,
    targets: list[str],
    sims: int,
    adaptive: bool = False,
) -> None:
    frame = read_artifact(noise, "laws") if noise else None
    folder = checks.results_folder(results) if results is not None else Path("results")
    config, keys = checks.study_config(configs)
    from axisrl.planner import candidates, design_of, plan
    from axisrl.report.compact import markdown, number

    wanted = checks.targets(targets)
    searching = bool(wanted) or budget is not None
    if searching and not candidates(design_of(config), (2,)):  # the search's own list of designs, empty
        flag = f"--budget {budget:g}" if budget is not None else f"--target {targets[0]}"
        longest = max(len(values) for values in design_of(config).grids.values())
        raise ValueError(
            f"{flag}: {' + '.join(configs)}: no other design to search: its grids have at most {longest} points "
            "an axis, and a slope's interval needs 3 (search a study with longer grids, or drop the flag)"
        )
    answer = plan(config, frame, folder, keys=keys, search_designs=searching, n_sims=sims)
    design, model, truth = answer.design, answer.noise, answer.truth
    grids = ", ".join(f"{axis} {min(v)}..{max(v)} ({len(v)} points)" for axis, v in design.grids.items())
    print(f"design: {design.seeds} seeds per point; {grids}; {design.episodes} T2 episodes per run; {design.runs} runs")
    print(
        f"noise ({'from ' + noise if noise else 'stated: the default study'}): {model.describe()}; "
        f"truth: centre success {np.exp(-truth.centre_loss):.3f}, slopes "
        + ", ".join(f"{axis} {alpha:.3f}" for axis, alpha in truth.slopes().items())
        + f", {truth.offsets_kept:.0%} of the points' offsets about them kept as real"
    )
    unit = answer.cost.unit.replace("_", "-")
    print(f"cost: {number(answer.cost.of(design))} {unit} ({sims} simulated studies)")
    print(f"  priced by {answer.cost.source}")
    cells = ("half_width", "half_width_se", "half_width_q10", "half_width_q90")
    shown = answer.predicted.select(
        "quantity",
        "name",
        pl.format(
            "{} (MC SE {}; one study 10-90 %: {} to {})",
            *(pl.col(c).map_elements(_cell, return_dtype=pl.String) for c in cells),
        ).alias("expected 95 % half-width"),
        pl.col("p_decides").map_elements(_cell, return_dtype=pl.String).alias("P(interval excludes 0)"),
    )
    print(markdown(shown))
    if answer.kappa is not None:
        print(
            "\nkappa at r = 1 (mixtures family, a synthetic unit assumed worth a real one; intervals by the pricing "
            "stage's bootstrap): median half-width of a bounded interval, one study 10-90 %, and the share bounded"
        )
        print(markdown(answer.kappa.select(pl.all().map_elements(_cell, return_dtype=pl.String))))
    print("not predicted: the recipe's measured efficiency (its runs depend on the fitted recipe)")
    if adaptive:
        _adaptive_power(config, answer, sims)
    if answer.searched is not None:
        searched = answer.searched.with_columns(
            meets=pl.all_horizontal(True, *(pl.col(f"max_half_width_{q}") <= width for q, width in wanted.items()))
            & (pl.col("cost") <= (budget if budget is not None else float("inf")))
        )
        print(f"\ncandidate designs (largest expected half-width per quantity, cost in {unit}):")
        print(markdown(searched.select(pl.all().map_elements(_cell, return_dtype=pl.String))))
        chosen = searched.filter("meets")
        if chosen.is_empty():
            print("no candidate meets the targets within the budget")
        else:
            best = (
                chosen.sort("cost").row(0, named=True)
                if wanted
                else chosen.sort([f"max_half_width_{q}" for q in ("trend", "alpha", "alpha_diff")]).row(0, named=True)
            )
            print(f"chosen: {best['design']}, {number(best['cost'])} {unit}")


def _adaptive_power(config: dict, answer: Plan, sims: int) -> None:
    """What the two-stage design of ``study.adaptive`` is expected to place, cost and buy against
    the fixed design at the same cost (``planner.against_fixed``)."""
    from axisrl.laws.data import AXES
    from axisrl.planner import against_fixed
    from axisrl.report.compact import markdown, number

    settings = config["study"]["adaptive"]
    two_stage, compared = against_fixed(answer.design, answer.truth, answer.noise, settings, answer.cost, sims)
    unit = answer.cost.unit.replace("_", "-")
    budget = "the fixed design's cost" if not settings["budget"] else f"a budget of {number(settings['budget'])} {unit}"
    print(
        f"\nadaptive design ({settings['first_seeds']} seeds a point first, then {budget} for the second wave, "
        f"at most {settings['max_seeds']} a point): {number(two_stage.runs)} runs on average "
        f"(MC SE {number(two_stage.runs_se)}) for {number(two_stage.cost)} {unit}"
    )
    print("expected seeds per point (mean over the simulated studies):")
    points = two_stage.extra.select(
        *AXES, sweeps=pl.col("sweeps").list.join(", "), first="first_seeds", extra="extra_seeds"
    )
    print(markdown(points.select(pl.all().map_elements(_cell, return_dtype=pl.String))))
    print(
        f"against the fixed design at the same cost ({number(compared['fixed_seeds'][0])} seeds a point, "
        "interpolated): expected 95 % half-widths"
    )
    print(markdown(compared.drop("fixed_seeds").select(pl.all().map_elements(_cell, return_dtype=pl.String))))


def _where(name: str | None) -> None:
    """A target's rule (named after it), what it reads and the function that makes it: a newcomer's two hops."""
    from axisrl.stages import STAGES
    from axisrl.targets import FIGURES, TABLES

    targets = {**TABLES, **FIGURES}
    if name is None:
        for target, entry in targets.items():
            print(f"{target:8} {entry.computed_by or entry.make}")
        for stage, entry in STAGES.items():
            print(f"{stage:8} {', '.join(entry.targets())}")
    elif name in targets:
        entry = targets[name]
        frames = ", ".join(f"{arg}={stage}/{frame}" for arg, (stage, frame) in entry.frames.items())
        print(f"{name}: rule {name} (workflow/rules/report.smk, one per entry of axisrl.targets)")
        print(f"  made by {entry.make}({frames})")
        if entry.computed_by:
            print(f"  its frame computed by {entry.computed_by}")
    elif name in STAGES:
        entry = STAGES[name]
        print(f"{name}: rule {name}, runs {', '.join(entry.targets())}")
        print(
            f"  reads {', '.join(entry.reads) or 'nothing of its own'}; upstream {', '.join(entry.upstream) or 'none'}"
        )
    else:
        raise ValueError(f"no table, figure or stage is named {name!r} (axisrl where lists them)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="axisrl", description=__doc__)
    parser.add_argument("--version", action="version", version=f"axisrl {__version__}")
    commands = parser.add_subparsers(dest="command")  # required: below, after an unknown flag is named
    show = commands.add_parser("show", help="print an artifact's schema, row count, head and config")
    show.add_argument("path")
    show.add_argument(
        "-n", "--rows", type=checks.nonnegative_int, default=5, help="rows of the head to print (default 5)"
    )
    listing = commands.add_parser("catalog", help="list the artifacts under a results folder")
    listing.add_argument("results", nargs="?", default="results")
    fit = commands.add_parser("fit", help="fit scaling laws to a runs table (Parquet or CSV) and plot them")
    fit.add_argument(
        "runs",
        nargs="?",
        help="one row per run: design columns (d_env, d_task, d_traj, ...) and "
        "successes/trials, or p_<tier>/n_<tier> as collect writes them",
    )
    fit.add_argument(
        "--curves",
        metavar="FILE",
        help="learning curves instead of a runs table (CSV or Parquet, one row per evaluation: run, design, seed, "
        "compute, success; optional n, r0, d_env, d_task, d_traj): their saturating fits, extrapolation check, "
        "asymptote laws (with d_* columns) and fig_curves",
    )
    fit.add_argument("--out", required=True, help="folder for the result tables and fig2")
    fit.add_argument(
        "--episodes", help="optional per-episode rows (run_key, task_id, tier, success) for the task-level bootstrap"
    )
    fit.add_argument("--tier", help="held-out tier to fit when runs carry p_<tier>/n_<tier> (default T2)")
    fit.add_argument("--n-boot", type=checks.positive_int, default=2000, help="bootstrap resamples (default 2000)")
    fit.add_argument("--seed", type=checks.seed, default=0, help="the bootstrap's random seed (default 0)")
    recipe = commands.add_parser("recipe", help="the compute-optimal design at a budget, from a fitted recipe law")
    recipe.add_argument(
        "--budget",
        type=checks.positive_float,
        required=True,
        help="the budget C in the cost model's currency (e.g. 3.4e10 FLOPs)",
    )
    recipe.add_argument("--domain", help="the cost model's domain (default: the only one in cost.parquet)")
    recipe.add_argument(
        "--law",
        help="a recipe law.parquet (default: the newest results/recipe/*/law.parquet "
        "here); cost.parquet is read from the same folder",
    )
    recipe.add_argument("--starts", type=checks.positive_int, default=10, help="solver starts (default 10)")
    power = commands.add_parser("power", help="a study design's expected interval half-widths and cost, by simulation")
    power.add_argument(
        "config",
        nargs="+",
        help="study config overlays on config/config.yaml (config/config.yaml alone: the default study)",
    )
    power.add_argument("--noise", help="a finished study's noise frame (default: stated values, the default study's)")
    power.add_argument(
        "--results",
        help="a finished study's results, for the tiny backend's measured CPU-seconds of its train jobs "
        "(default: results; without jobs of this study, a stated cost model)",
    )
    power.add_argument(
        "--budget", type=checks.positive_float, help="search other designs: the best whose cost is at most this"
    )
    power.add_argument(
        "--target",
        action="append",
        default=[],
        metavar="QUANTITY=HALF_WIDTH",
        help="search other designs: the cheapest whose largest expected half-width of QUANTITY "
        "(alpha, trend, alpha_diff) is at most HALF_WIDTH (repeatable)",
    )
    power.add_argument("--sims", type=checks.positive_int, default=200, help="simulated studies (default 200)")
    power.add_argument(
        "--adaptive",
        action="store_true",
        help="also the two-stage design of study.adaptive (budget 0: the fixed design's cost): its expected "
        "allocation, cost and half-widths against the fixed design at the same cost",
    )
    where = commands.add_parser("where", help="the rule and the function behind a table, figure or stage")
    where.add_argument("target", nargs="?", help="e.g. fig2, table8, train (default: list them all)")
    model = commands.add_parser("model", help="write a model directory a verl study can train, with no download")
    kinds = model.add_subparsers(dest="kind")
    tiny = kinds.add_parser("tiny", help="a small Qwen2-architecture model with random weights (the GPU smoke check)")
    tiny.add_argument("directory", help="a new or empty folder")
    args, unknown = parser.parse_known_args(argv)
    # the usage of the (sub)command the flag was given to; a missing command is named only without one
    # (`axisrl --nope`: the flag is the mistake)
    command, missing = (parser, "command") if args.command is None else (commands.choices[args.command], None)
    if args.command == "model":
        command, missing = (model, "kind") if args.kind is None else (kinds.choices[args.kind], None)
    if unknown:
        command.error(f"unrecognized arguments: {' '.join(unknown)}")
    if missing:
        command.error(f"the following arguments are required: {missing}")
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            # numpy's floating-point and polars' warnings say nothing a user can act on; axisrl's own
            # warnings are printed as "axisrl: warning:" lines
            warnings.simplefilter("ignore", RuntimeWarning)
            warnings.simplefilter("ignore", pl.exceptions.PolarsWarning)
            _run(args)
            sys.stdout.flush()  # here, where a reader that went away (`| head`) is caught, not at exit
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing left to flush at exit
        return 0
    except (ArtifactError, ValueError, OSError, pl.exceptions.PolarsError, KeyError, IndexError) as exc:
        # one line, naming the file where a file is at fault (a ConfigError's problems joined by "; "); an OS
        # error names its file, and the last resort (a polars or lookup error no check above foresaw) the inputs
        if isinstance(exc, (ArtifactError, ValueError)):
            message = str(exc)
        elif isinstance(exc, OSError):
            message = f"{exc.filename}: {first_line(exc)}" if exc.filename is not None else first_line(exc)
        else:
            message = (
                f"{checks.given_inputs(args)}: cannot be read as axisrl {args.command} reads it ({first_line(exc)})"
            )
        print(f"axisrl: error: {_one_line(message)}", file=sys.stderr)
        return 2
    return 0


def _run(args: argparse.Namespace) -> None:
    if args.command == "show":
        _show(args.path, args.rows)
    elif args.command == "catalog":
        _catalog(args.results)
    elif args.command == "recipe":
        _recipe(args.budget, args.domain, args.law, args.starts)
    elif args.command == "where":
        _where(args.target)
    elif args.command == "power":
        _power(args.config, args.noise, args.results, args.budget, args.target, args.sims, args.adaptive)
    elif args.command == "model":
        from axisrl.model_command import write_tiny

        if not args.directory:
            raise ValueError("axisrl model tiny: empty path (name a new or empty folder)")
        target = Path(args.directory)
        if os.path.lexists(target) and not target.is_dir():  # a link to nothing or a loop too: not a folder to fill
            problem = not_a_file(target) or "a file"
            raise ValueError(f"{args.directory}: {problem}, not a folder (axisrl model tiny writes a new model folder)")
        print(write_tiny(args.directory))
    elif args.curves is not None or args.runs is None:
        if args.runs is not None or args.curves is None:
            raise ValueError("axisrl fit reads a runs table or --curves FILE: give one of them")
        for flag, value in (("--tier", args.tier), ("--episodes", args.episodes)):
            if value is not None:  # refused, not ignored: a curves file has one success per evaluation
                raise ValueError(f"{flag} {value}: axisrl fit --curves reads no tiers or episodes: drop {flag}")
        _fit_curves(args.curves, args.out, args.n_boot, args.seed)
    else:
        _fit(args.runs, args.episodes, args.out, args.tier, args.n_boot, args.seed)


def _one_line(message: str) -> str:
    """A message of several lines (a ConfigError lists one problem a line) as one: the problems joined by "; "."""
    head, *problems = [line.strip() for line in message.strip().splitlines() if line.strip()] or [""]
    return f"{head} {'; '.join(problems)}" if problems else head


if __name__ == "__main__":
    sys.exit(main())
