"""The seed paper's robustness tables, recomputed from a runs table (one function per table).

Each function picks its runs by experiment family when the runs carry a ``families`` column
(prefix match, so ``held_axis`` covers ``held_axis_quarter``; the axis sweeps are always kept as
the reference), then groups by the design column the table varies. Table 2 is
``fit_axes_by(runs, ["width", "algo", ...])`` and Table 12 is ``local_slopes``.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from functools import reduce

import numpy as np
import polars as pl

from axisrl.laws.axis import FIT_SCHEMA, fit_axes, fit_axes_by
from axisrl.laws.data import (
    AXES,
    RunArrays,
    axis_sweep,
    check_one_setting,
    infer_centre,
    point_statistics,
    resample,
    task_matrix,
    usable_runs,
)
from axisrl.laws.models import LEVEL, MIN_POINTS


def in_families(runs: pl.DataFrame, *prefixes: str) -> pl.DataFrame:
    """Runs of any family starting with one of ``prefixes`` (all runs when there is no ``families``)."""
    if "families" not in runs.columns:
        return runs
    matches = reduce(operator.or_, (pl.element().str.starts_with(prefix) for prefix in prefixes))
    return runs.filter(pl.col("families").list.eval(matches).list.any())


CALIBRATION_SCHEMA = {
    "axis": pl.String,
    "value": pl.Int64,
    "n_runs": pl.Int64,
    "p": pl.Float64,
    "loss": pl.Float64,
    "threshold": pl.Float64,
    "selected": pl.Boolean,
    "at_grid_edge": pl.Boolean,
}


def calibration_table(
    runs: pl.DataFrame,
    axes: Sequence[str] = AXES,
    *,
    tolerance: float = 0.01,
    tier: str = "all",
    centre: Mapping[str, int] | None = None,
) -> pl.DataFrame:
    """Table 4: the held value of each axis, chosen before any exponent is fitted.

    Rule (pre-specified; the paper's Appendix A is not in our copy, so it is inferred from Table
    4, whose selections it reproduces): per axis, the *smallest* calibration value whose pooled
    success is within ``tolerance`` (absolute, default one percentage point) of the best value on
    that axis's sweep, i.e. the cheapest point at saturation, so the other axes' sweeps are not
    limited by this one. ``at_grid_edge`` flags a selection at the largest value (saturation not
    reached inside the grid).
    """
    ok, _ = usable_runs(in_families(runs, "calibration"), tier)
    held = dict(centre) if centre is not None else infer_centre(ok, axes)
    rows = []
    for axis in axes:
        sweep = axis_sweep(ok, axis, held)
        check_one_setting(sweep, free=[axis])
        arrays = RunArrays.from_runs(sweep, [axis])
        pooled = point_statistics(arrays.point_index, arrays.successes, arrays.trials, arrays.points.height)
        values = arrays.points[axis].to_list()
        p = np.exp(-pooled.loss)
        threshold = float(p.max()) - tolerance
        chosen = int(np.flatnonzero(p >= threshold)[0])
        rows += [
            {
                "axis": axis,
                "value": value,
                "n_runs": int(pooled.n_seeds[j]),
                "p": float(p[j]),
                "loss": float(pooled.loss[j]),
                "threshold": threshold,
                "selected": j == chosen,
                "at_grid_edge": chosen == len(values) - 1,
            }
            for j, value in enumerate(values)
        ]
    return pl.DataFrame(rows, schema=CALIBRATION_SCHEMA)


def held_axis_table(runs: pl.DataFrame, axes: Sequence[str] = AXES, *, tier: str = "all") -> pl.DataFrame:
    """Table 5: alpha of each axis at every combination of held values of the other axes that
    has a sweep (at least ``MIN_POINTS["power"]`` values of the axis). The held values are the
    ``d_*`` columns; the swept axis's column is null."""
    selected = in_families(runs, "axis_sweeps", "held_axis")
    frames = []
    for axis in axes:
        others = [a for a in AXES if a != axis]
        sweeps = (
            selected.group_by(others)
            .agg(pl.col(axis).n_unique().alias("n_values"))
            .filter(pl.col("n_values") >= MIN_POINTS["power"])
            .sort(others)
        )
        for held in sweeps.select(others).iter_rows(named=True):
            fit = fit_axes(selected, [axis], tier=tier, centre=held)
            frames.append(fit.select(*(pl.lit(held.get(a), dtype=pl.Int64).alias(a) for a in AXES), pl.all()))
    return pl.concat(frames) if frames else pl.DataFrame(schema={a: pl.Int64 for a in AXES} | FIT_SCHEMA)


def pool_construction_table(runs: pl.DataFrame, *, tier: str = "all") -> pl.DataFrame:
    """Table 7: the environment exponent per pool construction (``env_level``: signature levels,
    placebo)."""
    return fit_axes_by(in_families(runs, "axis_sweeps", "pool"), ["env_level"], ["d_env"], tier=tier)


def budget_convention_table(runs: pl.DataFrame, axes: Sequence[str] = AXES, *, tier: str = "all") -> pl.DataFrame:
    """Table 10: exponents per training-budget convention (``budget``)."""
    return fit_axes_by(in_families(runs, "axis_sweeps", "budget"), ["budget"], axes, tier=tier)


WORLDS_SCHEMA = {
    "d_env": pl.Int64,
    "worlds": pl.Int64,
    "variants": pl.Int64,
    "n_runs": pl.Int64,
    "p": pl.Float64,
    "p_lo": pl.Float64,
    "p_hi": pl.Float64,
    "loss": pl.Float64,
    "delta_loss_per_doubling": pl.Float64,
    "delta_loss_lo": pl.Float64,
    "delta_loss_hi": pl.Float64,
}


def worlds_variants_table(
    runs: pl.DataFrame, *, tier: str = "all", n_boot: int = 2000, seed: int = 0, episodes: pl.DataFrame | None = None
) -> pl.DataFrame:
    """Table 8: success per (worlds W, variants V = D_E / W) at fixed D_E, and the loss reduction
    per doubling of W between successive W, ``(L(W_prev) - L(W)) / log2(W / W_prev)``, with
    two-stage bootstrap percentile CIs (seeds, then tasks; binomial without ``episodes``)."""
    ok, _ = usable_runs(in_families(runs, "worlds_variants").filter(pl.col("worlds").is_not_null()), tier)
    check_one_setting(ok, free=["d_env", "worlds"])
    arrays = RunArrays.from_runs(ok, ["d_env", "worlds"])
    tasks = task_matrix(episodes, arrays.run_keys, tier) if episodes is not None else None
    d_env, worlds = (arrays.points[c].to_numpy() for c in ("d_env", "worlds"))
    previous = np.flatnonzero(np.r_[False, d_env[1:] == d_env[:-1]])
    doublings = np.log2(worlds[previous] / worlds[previous - 1])

    def statistics(successes: np.ndarray, trials: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        loss = point_statistics(arrays.point_index, successes, trials, len(d_env)).loss
        return loss, (loss[previous - 1] - loss[previous]) / doublings

    loss, delta = statistics(arrays.successes, arrays.trials)
    rng = np.random.default_rng(seed)
    replicates = [statistics(*resample(arrays, rng, tasks)) for _ in range(n_boot)]
    tail = (1 - LEVEL) / 2
    p_bounds = np.quantile(np.exp(-np.array([r[0] for r in replicates])), [tail, 1 - tail], axis=0)
    delta_bounds = np.quantile(np.array([r[1] for r in replicates]).reshape(n_boot, -1), [tail, 1 - tail], axis=0)
    n_runs = np.bincount(arrays.point_index, minlength=len(d_env))
    rows = []
    for j in range(len(d_env)):
        k = np.flatnonzero(previous == j)
        rows.append(
            {
                "d_env": int(d_env[j]),
                "worlds": int(worlds[j]),
                "variants": int(d_env[j] // worlds[j]),
                "n_runs": int(n_runs[j]),
                "p": float(np.exp(-loss[j])),
                "p_lo": float(p_bounds[0, j]),
                "p_hi": float(p_bounds[1, j]),
                "loss": float(loss[j]),
                "delta_loss_per_doubling": float(delta[k[0]]) if len(k) else None,
                "delta_loss_lo": float(delta_bounds[0, k[0]]) if len(k) else None,
                "delta_loss_hi": float(delta_bounds[1, k[0]]) if len(k) else None,
            }
        )
    return pl.DataFrame(rows, schema=WORLDS_SCHEMA)


SUBSET_SCHEMA = {
    "axis": pl.String,
    "x_min": pl.Float64,
    "x_max": pl.Float64,
    "range_ratio": pl.Float64,
    "n_points_subset": pl.Int64,
    "alpha_subset": pl.Float64,
    "alpha_subset_lo": pl.Float64,
    "alpha_subset_hi": pl.Float64,
    "n_points_all": pl.Int64,
    "alpha_all": pl.Float64,
    "alpha_all_lo": pl.Float64,
    "alpha_all_hi": pl.Float64,
    "r_squared": pl.Float64,
    "max_loo_point_shift": pl.Float64,
}


def subset_fit_table(
    runs: pl.DataFrame,
    subsets: Mapping[str, Sequence[int]],
    *,
    tier: str = "all",
    centre: Mapping[str, int] | None = None,
) -> pl.DataFrame:
    """Table 11: the log-log slope alpha fitted on a subset of each axis's grid points (``subsets[axis]``, e.g. the
    six-point grid) next to the fit on all points, with R^2 and the largest leave-one-point-out
    shift of the full fit."""
    selected = in_families(runs, "axis_sweeps")
    held = dict(centre) if centre is not None else infer_centre(usable_runs(selected, tier)[0])
    rows = []
    for axis, values in subsets.items():
        full = fit_axes(selected, [axis], tier=tier, centre=held).row(0, named=True)
        part = fit_axes(selected.filter(pl.col(axis).is_in(list(values))), [axis], tier=tier, centre=held).row(
            0, named=True
        )
        rows.append(
            {
                "axis": axis,
                "x_min": full["x_min"],
                "x_max": full["x_max"],
                "range_ratio": full["x_max"] / full["x_min"],
                "n_points_subset": part["n_points"],
                "alpha_subset": part["alpha"],
                "alpha_subset_lo": part["alpha_lo"],
                "alpha_subset_hi": part["alpha_hi"],
                "n_points_all": full["n_points"],
                "alpha_all": full["alpha"],
                "alpha_all_lo": full["alpha_lo"],
                "alpha_all_hi": full["alpha_hi"],
                "r_squared": full["r_squared"],
                "max_loo_point_shift": full["max_loo_point_shift"],
            }
        )
    return pl.DataFrame(rows, schema=SUBSET_SCHEMA)


def task_dedup_table(
    runs: pl.DataFrame, effective: pl.DataFrame, *, tier: str = "all", centre: Mapping[str, int] | None = None
) -> pl.DataFrame:
    """Tables 14-15: the task exponent with ``d_task`` replaced by the effective number of distinct
    tasks under each deduplication rule.

    ``effective`` has ``rule``, ``d_task_effective`` and one key column, ``run_key``, ``point_key``
    or ``d_task`` (raw), first found wins. The same runs are refitted per rule; the reference
    columns give the effective count at the held (centre) raw ``d_task``, as the tables quote it.
    """
    selected = in_families(runs, "axis_sweeps")
    held = dict(centre) if centre is not None else infer_centre(usable_runs(selected, tier)[0])
    sweep = axis_sweep(selected, "d_task", held)
    key = next(k for k in ("run_key", "point_key", "d_task") if k in effective.columns)
    frames = []
    for (rule,), mapping in effective.group_by("rule", maintain_order=True):
        relabelled = sweep.join(mapping.select(key, "d_task_effective").unique(), on=key, how="left")
        if relabelled["d_task_effective"].null_count():
            raise ValueError(f"rule {rule!r}: no effective d_task for some runs of the d_task sweep")
        if (
            relabelled.group_by("d_task")
            .agg(pl.col("d_task_effective").n_unique())
            .get_column("d_task_effective")
            .max()
            > 1
        ):
            raise ValueError(f"rule {rule!r}: the effective d_task differs between runs of one grid point")
        reference = relabelled.filter(pl.col("d_task") == held["d_task"])["d_task_effective"]
        fit = fit_axes(relabelled.with_columns(d_task=pl.col("d_task_effective")), ["d_task"], tier=tier, centre=held)
        frames.append(
            fit.select(
                pl.lit(rule).alias("rule"),
                pl.lit(held["d_task"]).alias("d_task_reference"),
                pl.lit(reference[0] if len(reference) else None).alias("d_task_effective_reference"),
                pl.all(),
            )
        )
    return pl.concat(frames)
