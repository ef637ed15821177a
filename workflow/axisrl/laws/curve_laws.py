"""Data laws on the learning curves' parameters, beside Table 2's laws of final success; and a user's curves table.

``asymptote_laws``: along each axis sweep, the per-axis law of Table 2 (the log-log slope of ``L = -ln p``
over the sweep's points, ``laws.axis``) fitted to each point's asymptote ``A`` in place of its final success,
and the slope of ``ln C_mid``: which axis raises the ceiling, and which only gets there with less compute.
Its intervals are Table 2's (``intervals.linear_interval``: each point's variance from its own seeds, a t
quantile on Welch-Satterthwaite degrees of freedom), with each point's variance the seed bootstrap's of
``curves.fit_points``, so the seeds' resampling is carried through the curves' refits to the law. The points
weigh alike: a variance from 2-4 seeds is too noisy to weight by without biasing the slope toward the
points whose seeds happened to agree.

``curves_from_table``: a user's table of ``run, design, seed, compute, success`` (``axisrl fit --curves``)
checked and turned into the curve frame, refusing what would fit to nonsense, with the row it is in.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np
import polars as pl

from axisrl.laws.curve_extrapolation import extrapolation_table
from axisrl.laws.curves import LEVEL, fit_points, fit_runs
from axisrl.laws.data import AXES, TableError, axis_sweep, infer_centre, numbers, refuse
from axisrl.laws.intervals import PointEstimates, linear_interval, pooled_log_loss, slope_coefficients

MIN_LAW_POINTS = 3
"""Identified points a sweep's law needs: a slope and a residual degree of freedom, as Table 2's."""
A_CLIP = 1e-3
"""``A`` is held inside [A_CLIP, 1 - A_CLIP] before ``ln(-ln A)``, which is infinite at 0 and 1."""

ASYMPTOTE_LAW_SCHEMA = {
    "axis": pl.String,
    "status": pl.String,
    "reason": pl.String,
    "n_points": pl.Int64,
    "n_identified": pl.Int64,
    "x_min": pl.Float64,
    "x_max": pl.Float64,
    "alpha_final": pl.Float64,
    "alpha_final_lo": pl.Float64,
    "alpha_final_hi": pl.Float64,
    "alpha_A": pl.Float64,
    "alpha_A_lo": pl.Float64,
    "alpha_A_hi": pl.Float64,
    "alpha_A_dof": pl.Float64,
    "beta_C_mid": pl.Float64,
    "beta_C_mid_lo": pl.Float64,
    "beta_C_mid_hi": pl.Float64,
    "beta_C_mid_dof": pl.Float64,
    "C_mid_reason": pl.String,
}
"""One row per axis. ``alpha_final``: the slope of ``-ln`` of the last point's seed-pooled V success (Table 2's
quantity on V, the points alike). ``alpha_A``: ``-d ln(-ln A) / d ln x``, positive where the axis raises
the ceiling. ``beta_C_mid``: ``-d ln C_mid / d ln x``, positive where the axis reaches half its gain with
less compute. Intervals at ``LEVEL``; ``status`` is not "ok" (and the numbers null) where fewer than
``MIN_LAW_POINTS`` points' fits identify ``A``, ``reason`` naming them; ``C_mid_reason`` likewise for C_mid."""


def axes_from_designs(
    designs: pl.DataFrame, axes: Sequence[str] = AXES, centre: Mapping[str, int] | None = None
) -> pl.DataFrame:
    """The ``axes`` frame (``point_key, axis, amount``) of one-axis sweeps found as Table 2 finds them:
    ``designs`` has ``point_key`` and the axis amounts; the held values are ``centre`` or inferred (each
    axis's most frequent amount). The centre is in every sweep; an axis with one amount has no sweep."""
    present = [a for a in axes if a in designs.columns]
    unique = designs.select("point_key", *present).unique()
    held = dict(centre) if centre is not None else infer_centre(unique, present)
    frames = []
    for axis in present:
        sweep = axis_sweep(unique, axis, {a: v for a, v in held.items() if a in present})
        if sweep[axis].n_unique() > 1:
            frames.append(sweep.select("point_key", axis=pl.lit(axis), amount=pl.col(axis).cast(pl.Float64)))
    schema = {"point_key": pl.String, "axis": pl.String, "amount": pl.Float64}
    return pl.concat(frames).sort("axis", "amount") if frames else pl.DataFrame(schema=schema)


def axes_from_runs(runs: pl.DataFrame) -> pl.DataFrame:
    """The ``axes`` frame of a collected runs table: from its ``sweeps`` column (``axis_sweeps:<axis>``
    entries, as the plan lists a design's sweeps) where it has one, else found from the amounts
    (``axes_from_designs``)."""
    present = [a for a in AXES if a in runs.columns]
    if "sweeps" not in runs.columns:
        return axes_from_designs(runs.select("point_key", *present).unique(), present)
    swept = (
        runs.select("point_key", *present, axis=pl.col("sweeps"))
        .explode("axis")
        .filter(pl.col("axis").str.starts_with("axis_sweeps:"))
        .with_columns(pl.col("axis").str.strip_prefix("axis_sweeps:"))
        .unique(["point_key", "axis"])
    )
    amount = pl.coalesce(pl.when(pl.col("axis") == a).then(pl.col(a)) for a in present).cast(pl.Float64)
    return swept.select("point_key", "axis", amount=amount).sort("axis", "amount")


def _slope(x: np.ndarray, points: PointEstimates, level: float) -> tuple[float, float | None, float | None, float]:
    """(-slope of ``points.value`` on ``ln x`` with the points alike, lo, hi, dof); no interval where a
    point's variance is unknown (one seed)."""
    coefficients = -slope_coefficients(np.log(x), np.ones_like(x))
    if not np.all(np.isfinite(points.variance)):
        return float(coefficients @ points.value), None, None, math.nan
    interval = linear_interval(coefficients, points, level)
    return interval.estimate, interval.lo, interval.hi, interval.dof


def _final_points(curves: pl.DataFrame, keys: Sequence[str]) -> PointEstimates:
    """Per point of ``keys``: ``ln L`` of its runs' seed-pooled last V success, with its seed-level variance."""
    last = curves.filter(pl.col("point_key").is_in(list(keys))).sort("compute").group_by("run_key").last()
    index = {key: i for i, key in enumerate(keys)}
    trials = last["n_V"].fill_null(1).cast(pl.Float64).to_numpy()
    return pooled_log_loss(
        np.array([index[k] for k in last["point_key"]]), last["p_V"].to_numpy() * trials, trials, len(keys)
    )


def asymptote_laws(
    point_fits: pl.DataFrame, axes: pl.DataFrame, curves: pl.DataFrame | None = None, *, level: float = LEVEL
) -> pl.DataFrame:
    """Per axis of ``axes`` (``point_key, axis, amount``), the laws of ``A`` and ``C_mid`` over its
    points' fits (``curves.fit_points``) and, where ``curves`` is given, of the final V success
    (``ASYMPTOTE_LAW_SCHEMA``)."""
    order = {axis: i for i, axis in enumerate(AXES)}
    rows = []
    for axis in sorted(axes["axis"].unique().to_list(), key=lambda a: (order.get(a, len(order)), a)):
        sweep = axes.filter(pl.col("axis") == axis).join(point_fits, on="point_key", how="left").sort("amount")
        x = sweep["amount"].to_numpy().astype(np.float64)
        row: dict = {"axis": axis, "n_points": sweep.height, "x_min": float(x.min()), "x_max": float(x.max())}
        if curves is not None and sweep.height >= MIN_LAW_POINTS:
            final = _slope(x, _final_points(curves, sweep["point_key"].to_list()), level)
            row |= dict(zip(("alpha_final", "alpha_final_lo", "alpha_final_hi"), final[:3]))
        fitted = sweep.filter(pl.col("A").is_not_null())
        row["n_identified"] = fitted.height
        if fitted.height < MIN_LAW_POINTS:
            rows.append(row | {"status": "not_identified", "reason": _missing(sweep, "A"), "C_mid_reason": None})
            continue
        A = np.clip(fitted["A"].to_numpy(), A_CLIP, 1 - A_CLIP)
        A_se = fitted["A_se"].fill_null(np.nan).to_numpy()
        dof = fitted["dof"].fill_null(0).to_numpy().astype(np.float64)
        law_A = PointEstimates(np.log(-np.log(A)), (A_se / (A * np.log(A))) ** 2, dof)
        alpha = _slope(fitted["amount"].to_numpy().astype(np.float64), law_A, level)
        row |= {"status": "ok", "reason": _left_out(sweep, "A")}
        row |= dict(zip(("alpha_A", "alpha_A_lo", "alpha_A_hi", "alpha_A_dof"), alpha))
        rises = sweep.filter(pl.col("C_mid").is_not_null())
        if rises.height < MIN_LAW_POINTS:
            rows.append(row | {"C_mid_reason": _missing(sweep, "C_mid")})
            continue
        se = rises["ln_C_mid_se"].fill_null(np.nan).to_numpy()
        law_C = PointEstimates(np.log(rises["C_mid"].to_numpy()), se**2, rises["dof"].fill_null(0).to_numpy())
        beta = _slope(rises["amount"].to_numpy().astype(np.float64), law_C, level)
        row |= dict(zip(("beta_C_mid", "beta_C_mid_lo", "beta_C_mid_hi", "beta_C_mid_dof"), beta))
        rows.append(row | {"C_mid_reason": _left_out(sweep, "C_mid")})
    return pl.DataFrame(rows, schema=ASYMPTOTE_LAW_SCHEMA)


def _missing(sweep: pl.DataFrame, column: str) -> str:
    """Why a sweep has no law of ``column``: how many points identify it, and the first reason of one that does not."""
    without = sweep.filter(pl.col(column).is_null())
    why = without["reason"].drop_nulls()
    first = f" (e.g. {without['point_key'][0]}: {why[0]})" if why.len() else ""
    identified = sweep.height - without.height
    return f"{identified} of {sweep.height} points' curves identify {column}; a law needs {MIN_LAW_POINTS}{first}"


def _left_out(sweep: pl.DataFrame, column: str) -> str | None:
    """Which points a law of ``column`` leaves out (their fits do not identify it), None where none."""
    without = sweep.filter(pl.col(column).is_null())
    if not without.height:
        return None
    amounts = ", ".join(f"{v:g}" for v in without["amount"].to_list())
    return f"{column} of {without.height} points not identified (amounts {amounts}): left out of the law"


def curve_study(
    curves: pl.DataFrame,
    r0: pl.DataFrame | Mapping[str, float | None] | None = None,
    axes: pl.DataFrame | None = None,
    *,
    level: float = LEVEL,
    n_boot: int = 200,
    seed: int = 0,
) -> dict[str, pl.DataFrame]:
    """Every curve table: ``curve_runs``, ``curve_points``, ``extrapolation`` and, given ``axes``,
    ``asymptote_laws`` (what the workflow and ``axisrl fit --curves`` write)."""
    points = fit_points(curves, r0, level=level, n_boot=n_boot, seed=seed)
    tables = {
        "curve_runs": fit_runs(curves, r0),
        "curve_points": points,
        "extrapolation": extrapolation_table(curves, r0, level=level, n_boot=n_boot, seed=seed),
    }
    if axes is not None and axes.height:
        tables["asymptote_laws"] = asymptote_laws(points, axes, curves, level=level)
    return tables


TABLE = "curves"
"""What a refused user table is called in its error (``TableError``)."""
USER_COLUMNS = ("run", "design", "seed", "compute", "success")
OPTIONAL_COLUMNS = ("n", "r0", *AXES)
_SAYS = f"a curves table has one row per evaluation: {', '.join(USER_COLUMNS)} (optional {', '.join(OPTIONAL_COLUMNS)})"


class UserCurves(NamedTuple):
    """A user's table as the fits take it: the curve frame, the base's success per design (None: R0
    fitted everywhere) and the axis sweeps (None: the table has no d_env, d_task, d_traj)."""

    curves: pl.DataFrame
    r0: pl.DataFrame | None
    axes: pl.DataFrame | None


def curves_from_table(table: pl.DataFrame) -> UserCurves:
    """A user's curves table checked (a ``TableError`` naming the column, row and problem) and mapped to
    the curve frame: ``run`` -> run_key, ``design`` -> point_key, ``success`` -> p_V, ``n`` -> n_V (null
    without it: the points weigh alike); ``r0`` (one per design) fixes R0; ``d_env, d_task, d_traj`` give
    the sweeps of the asymptote laws."""
    if table.height == 0:
        raise TableError(TABLE, f"empty: no rows ({_SAYS})")
    missing = [c for c in USER_COLUMNS if c not in table.columns]
    if missing:
        raise TableError(TABLE, f"no column {', '.join(missing)}: {_SAYS}; got {', '.join(table.columns)}")
    rows = table.with_row_index("row", offset=1).with_columns(pl.col("run", "design").cast(pl.String))
    rows = numbers(rows, "compute", 0.0, whole=False, table=TABLE)
    rows = numbers(rows, "success", 0.0, whole=False, maximum=1.0, table=TABLE)
    rows = numbers(rows, "seed", -math.inf, whole=True, table=TABLE)
    for column, low, high, whole in (("n", 1, math.inf, True), ("r0", 0, 1, False)):
        if column in rows.columns:
            rows = numbers(rows, column, low, whole, high, nullable=column == "r0", table=TABLE)
    amounts = [a for a in AXES if a in rows.columns]
    for axis in amounts:
        rows = numbers(rows, axis, 1, whole=True, table=TABLE)
    refuse(rows, "run", pl.col("run").is_null(), "empty cell", TABLE)
    refuse(rows, "design", pl.col("design").is_null(), "empty cell", TABLE)
    _check_runs(rows)
    _one_per_design(rows, [c for c in ("r0", *amounts) if c in rows.columns])
    curves = rows.sort("run", "compute").select(
        run_key="run",
        point_key="design",
        seed=pl.col("seed").cast(pl.Int64),
        update=pl.int_range(pl.len()).over("run").cast(pl.Int64),
        compute="compute",
        p_V="success",
        n_V=pl.col("n").cast(pl.Int64) if "n" in rows.columns else pl.lit(None, pl.Int64),
    )
    designs = rows.group_by("design").first().rename({"design": "point_key"})
    r0 = designs.select("point_key", "r0") if "r0" in rows.columns else None
    axes = axes_from_designs(designs, amounts) if amounts else None
    return UserCurves(curves, r0, axes)


def _check_runs(rows: pl.DataFrame) -> None:
    """One row per (run, compute), at least two points a run, each run in one design."""
    repeated = rows.group_by("run", "compute", maintain_order=True).agg("row").filter(pl.col("row").list.len() > 1)
    if repeated.height:
        first = repeated.row(0, named=True)
        rows_text = " and ".join(map(str, first["row"][:2]))
        where = f"run {first['run']!r}, compute {first['compute']:g}"
        raise TableError(TABLE, f"rows {rows_text} are one evaluation ({where}): a run has one row per compute")
    counts = rows.group_by("run", maintain_order=True).agg(pl.len(), pl.col("design").n_unique(), pl.first("row"))
    short = counts.filter(pl.col("len") < 2)
    if short.height:
        first = short.row(0, named=True)
        where = f"run {first['run']!r} (row {first['row']})"
        raise TableError(TABLE, f"{where} has 1 point: a learning curve needs at least 2")
    mixed = counts.filter(pl.col("design") > 1)
    if mixed.height:
        raise TableError(TABLE, f"run {mixed['run'][0]!r} is in several designs: a run belongs to one design")


def _one_per_design(rows: pl.DataFrame, columns: Sequence[str]) -> None:
    """A design's r0 and axis amounts are one value, not one per row."""
    for column in columns:
        varying = rows.group_by("design").agg(pl.col(column).n_unique(), pl.first("row")).filter(pl.col(column) > 1)
        if varying.height:
            first = varying.row(0, named=True)
            raise TableError(TABLE, f"design {first['design']!r} has several values of {column}: one per design")
