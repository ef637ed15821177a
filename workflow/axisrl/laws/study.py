"""Every analysis of one collected study, as named frames: what the ``laws`` stage and
``axisrl fit`` write. Each analysis picks its runs by experiment family (``families`` column);
runs without that column are treated as one set of axis sweeps, so a user's own runs table
(design columns + successes/trials) gets the per-axis and joint fits.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import polars as pl

from axisrl.diagnostics import TOOL_USE_COLLAPSE_FRACTION, tool_use_collapsed_runs
from axisrl.laws.axis import (
    axis_ordering,
    fit_axes,
    fit_axes_by,
    leave_one_out,
    local_slopes,
    success_trends,
)
from axisrl.laws.data import (
    AXES,
    TIERS,
    VALIDATION_TIER,
    axis_sweep,
    check_episodes,
    check_runs,
    infer_centre,
    pool_points,
    usable_runs,
)
from axisrl.laws.joint import fit_joint, interaction_pretest
from axisrl.laws.noise import noise_frame
from axisrl.laws.tables import (
    budget_convention_table,
    calibration_table,
    held_axis_table,
    in_families,
    pool_construction_table,
    subset_fit_table,
    task_dedup_table,
    worlds_variants_table,
)


@dataclass(frozen=True)
class LawSettings:
    """``tier``: the held-out tier every fit reads (T2, unseen worlds, is the headline);
    ``n_boot``: two-stage bootstrap resamples; ``subset_points``: Table 11 compares fits on the
    first this-many grid points of each axis with fits on all of them; ``take_off``: the ``noise``
    frame's take-off share counts the seeds whose held-out success exceeds this. ``n_boot`` and ``seed``
    drive Table 8's two-stage bootstrap (its loss differences are not linear in the points)."""

    tier: str = "T2"
    n_boot: int = 2000
    seed: int = 0
    calibration_tolerance: float = 0.01
    subset_points: int = 4
    take_off: float = 0.1

    def __post_init__(self) -> None:
        if self.n_boot < 1:
            raise ValueError(f"n_boot: bootstrap resamples must be at least 1, got {self.n_boot}")


def _present(runs: pl.DataFrame, *families: str) -> bool:
    """Whether the runs hold any run of these families (a runs table without families holds none)."""
    return "families" in runs.columns and in_families(runs, *families).height > 0


def _sweep_points(runs: pl.DataFrame, tier: str, series: str, axes: Sequence[str]) -> pl.DataFrame:
    """Seed-pooled points of each axis sweep (axis, x, series, loss, loss_se, p, n_runs, and p_base:
    the held-out success of the base the sweep's runs start from, null for random init)."""
    ok, _ = usable_runs(runs, tier)
    centre = infer_centre(ok)
    frames = []
    for axis in axes:
        sweep = axis_sweep(ok, axis, centre)
        if sweep.height:
            pooled = pool_points(sweep, [axis], tier)
            base = f"p_{tier}_base"  # the runs' base's own success (runs from a pretrained base carry it)
            frames.append(
                pooled.select(
                    pl.lit(axis).alias("axis"),
                    pl.col(axis).cast(pl.Float64).alias("x"),
                    pl.lit(series).alias("series"),
                    "p",
                    "loss",
                    "loss_se",
                    pl.col("n_seeds").alias("n_runs"),
                    pl.lit(sweep[base].mean() if base in sweep.columns else None, pl.Float64).alias("p_base"),
                )
            )
    return pl.concat(frames) if frames else pl.DataFrame()


def _tiers(runs: pl.DataFrame, tier: str) -> list[str]:
    """The held-out tiers the runs carry counts of (``p_<tier>``/``n_<tier>``), else the fits' tier
    (a user's runs table with one ``successes``/``trials`` pair)."""
    return [t for t in TIERS if {f"p_{t}", f"n_{t}"} <= set(runs.columns)] or [tier]


def _validation(runs: pl.DataFrame) -> list[str]:
    """The validation tier where the runs carry its counts: the noise frame shows its spread (the
    planner's noise), and no law reads it."""
    return [VALIDATION_TIER] if {f"p_{VALIDATION_TIER}", f"n_{VALIDATION_TIER}"} <= set(runs.columns) else []


def _effective_d_task(runs: pl.DataFrame) -> pl.DataFrame:
    """(run_key, rule, d_task_effective) from the train stage's ``d_task_<rule>`` columns."""
    columns = [c for c in runs.columns if c.startswith("d_task_")]
    return (
        runs.select("run_key", *columns)
        .unpivot(index="run_key", variable_name="rule", value_name="d_task_effective")
        .with_columns(pl.col("rule").str.strip_prefix("d_task_"))
        .drop_nulls()
    )


def analyse(
    runs: pl.DataFrame, episodes: pl.DataFrame | None = None, settings: LawSettings = LawSettings()
) -> dict[str, pl.DataFrame]:
    """The named result frames of a study; an analysis whose runs the study does not have is left out.

    Per-axis fits, points, slopes, leave-one-out and the bootstrap read the axis sweeps at the
    study's main settings (model size, algorithm, budget...); the tables read their own families.
    ``warnings`` also names the runs whose tool use collapsed (``axisrl.diagnostics``): they are
    fitted like any other, but their success may say more about the collapse than about the axis.
    A table no fit should read is refused first (``check_runs``, ``check_episodes``: ``TableError``).
    """
    tier = settings.tier
    check_runs(runs, tier)
    if episodes is not None:
        check_episodes(episodes)
    main = in_families(runs, "axis_sweeps")
    out: dict[str, pl.DataFrame] = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        collapsed = tool_use_collapsed_runs(runs)
        if collapsed:
            warnings.warn(
                "tool use collapsed in the last tenth of training (its tool-call rate below "
                f"{TOOL_USE_COLLAPSE_FRACTION} of the run's peak tenth: tool_use_collapsed in the runs table) "
                f"in {len(collapsed)} run(s): " + ", ".join(collapsed),
                stacklevel=2,
            )
        series = _model_size_series(runs, main)
        out["axis_fits"] = pl.concat(
            [
                fit_axes(group, axes, tier=tier).select(pl.lit(name).alias("series"), pl.all())
                for name, (group, axes) in series.items()
            ]
        )
        out["points"] = pl.concat(
            [_sweep_points(group, tier, name, axes) for name, (group, axes) in series.items()], how="diagonal_relaxed"
        )
        if "seed" in main.columns:  # without seeds every run is its own point's only one: no spread to show
            out["noise"] = noise_frame(main, _tiers(main, tier) + _validation(main), settings.take_off)
        out["local_slopes"] = local_slopes(main, tier=tier)
        out["trends"] = success_trends(main, tier=tier)
        out["loo"] = leave_one_out(main, tier=tier)
        out["ordering"] = axis_ordering(main, tier=tier)
        joint_runs = in_families(runs, "axis_sweeps", "interaction", "calibration")
        out["joint"] = fit_joint(joint_runs, tier=tier)
        if _present(runs, "interaction"):
            grid = in_families(runs, "interaction")
            out["interaction"] = interaction_pretest(grid, [a for a in AXES if grid[a].n_unique() > 1], tier=tier)
        tables: dict[str, tuple[tuple[str, ...], Callable[[], pl.DataFrame]]] = {
            "table2": (  # the axis sweeps alone are one setting's row: a study without the other families has it too
                ("axis_sweeps", "model_sizes", "algorithms", "reward_density"),
                lambda: fit_axes_by(
                    in_families(runs, "axis_sweeps", "model_sizes", "algorithms", "reward_density"),
                    ["width", "algo", "reward_density"],
                    tier=tier,
                ),
            ),
            "table4": (
                ("calibration",),
                lambda: calibration_table(runs, tolerance=settings.calibration_tolerance, tier=tier),
            ),
            "table5": (("held_axis",), lambda: held_axis_table(runs, tier=tier)),
            "table7": (("pool",), lambda: pool_construction_table(runs, tier=tier)),
            "table8": (
                ("worlds_variants",),
                lambda: worlds_variants_table(
                    runs, tier=tier, n_boot=settings.n_boot, seed=settings.seed, episodes=episodes
                ),
            ),
            "table10": (("budget",), lambda: budget_convention_table(runs, tier=tier)),
            "table11": (
                ("axis_sweeps",),
                lambda: subset_fit_table(main, _first_points(main, settings.subset_points), tier=tier),
            ),
            "table12": (("axis_sweeps",), lambda: out["local_slopes"]),
            "table14": (("axis_sweeps",), lambda: _dedup_rules(main, tier, embedding=True)),
            "table15": (("axis_sweeps",), lambda: _dedup_rules(main, tier, embedding=False)),
        }
        domains = "domain" in main.columns and main["domain"].n_unique() > 1
        if domains or _present(runs, "base_strength"):  # Table 13 needs a second domain or starting point
            out["table13"] = _robustness(in_families(runs, "axis_sweeps", "base_strength"), tier)
        for name, (families, build) in tables.items():
            if _present(runs, *families) or ("families" not in runs.columns and families == ("axis_sweeps",)):
                out[name] = build()
    out["warnings"] = pl.DataFrame({"warning": sorted({str(w.message) for w in caught})}, schema={"warning": pl.String})
    return {name: frame for name, frame in out.items() if frame is not None}


def _robustness(runs: pl.DataFrame, tier: str) -> pl.DataFrame:
    """Table 13: the per-axis fits per domain and starting point, each row with ``p_base``, its
    base's own success on the fitted tier (null from random init)."""
    runs = _with_starts(runs)
    base = f"p_{tier}_base"
    own = runs.group_by("domain", "base").agg(
        (pl.col(base).mean() if base in runs.columns else pl.lit(None, pl.Float64)).alias("p_base")
    )
    return fit_axes_by(runs, ["domain", "base"], tier=tier).join(own, on=["domain", "base"], how="left")


def _with_starts(runs: pl.DataFrame) -> pl.DataFrame:
    """Runs with ``base`` saying what each started from, where it says the study's own ``train.init``
    (null): ``base`` where the run records a base, else ``random``; and a ``domain`` column."""
    recorded = pl.col("base_param_hash").is_not_null() if "base_param_hash" in runs.columns else pl.lit(False)
    default = pl.when(recorded).then(pl.lit("base")).otherwise(pl.lit("random"))
    base = pl.col("base").fill_null(default) if "base" in runs.columns else default
    domain = [] if "domain" in runs.columns else [pl.lit("toolworld").alias("domain")]
    return runs.with_columns(base.alias("base"), *domain)


def _model_size_series(runs: pl.DataFrame, main: pl.DataFrame) -> dict[str, tuple[pl.DataFrame, list[str]]]:
    """Figure 2's series: ``"N=<width>"`` -> (its runs, the axes they sweep). The main axis sweeps
    first, then each other width of the model-size family."""
    width = main["width"][0] if "width" in main.columns and main.height else None
    series = {f"N={width}" if width is not None else "main": (main, list(AXES))}
    if _present(runs, "model_sizes"):
        sized = in_families(runs, "model_sizes")
        for (other,), group in sized.filter(pl.col("width") != width).group_by("width", maintain_order=True):
            series[f"N={other}"] = (group, [axis for axis in AXES if group[axis].n_unique() > 1])
    return series


def _first_points(runs: pl.DataFrame, n: int) -> Mapping[str, list[int]]:
    """Per axis, its ``n`` smallest swept values: the narrower grid Table 11 compares with the full one."""
    return {axis: sorted(runs[axis].unique().to_list())[:n] for axis in AXES}


def _dedup_rules(runs: pl.DataFrame, tier: str, embedding: bool) -> pl.DataFrame | None:
    """Table 14 (embedding thresholds) or 15 (signature rules): the task exponent re-read with
    ``d_task`` the effective number of distinct tasks under each rule."""
    if "run_key" not in runs.columns or not any(c.startswith("d_task_") for c in runs.columns):
        return None
    effective = _effective_d_task(runs).filter(pl.col("rule").str.starts_with("emb_") == embedding)
    if not effective.height:
        return None
    try:
        return task_dedup_table(runs, effective, tier=tier)
    except ValueError as exc:  # e.g. runs trained before effective counts were recorded
        return pl.DataFrame({"status": ["not_run"], "reason": [str(exc)]})
