"""Run tables in, seed-pooled grid points out: the one module that reads the input schema.

Every fit pools seeds at a grid point before taking logs (``p = sum k / sum n``), because averaging
``-ln p`` over seeds is biased by about ``(1-p)/(2np)``; the between-seed variance is pooled across
grid points because three seeds alone give an unstable per-point variance.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

AXES = ("d_env", "d_task", "d_traj")
TIERS = ("T0", "T1", "T2", "all")
"""The held-out tiers the laws read (T2, unseen worlds, is the headline)."""
VALIDATION_TIER = "V"
"""Validation worlds, drawn as T2's are: for choosing learner settings and seed counts (the
planner reads the noise frame's V rows), never fitted."""
SETTING_COLUMNS = ("width", "algo", "reward_density", "env_level", "worlds", "budget", "base")
DESIGN_COLUMNS = AXES + SETTING_COLUMNS
"""What makes two runs different experiments: a fit must not pool runs that differ in one of these."""


AMOUNT_COLUMNS = (*AXES, "width")
"""Design amounts a run was trained at: whole numbers, at least 1 (a log-log fit takes their logs)."""
EPISODE_COLUMNS = ("run_key", "task_id", "tier", "success")


class TableError(ValueError):
    """A runs or episodes table the laws must not read; ``table`` says which, so a caller names its file."""

    def __init__(self, table: str, problem: str) -> None:
        super().__init__(f"{table} table: {problem}")
        self.table = table


def count_columns(runs: pl.DataFrame, tier: str) -> tuple[str, str]:
    """The (successes, trials) columns of ``tier``: ``successes``/``trials``, else ``p_<tier>``/``n_<tier>``;
    a tier the table has no counts of is refused naming the tiers it has."""
    if {"successes", "trials"} <= set(runs.columns):
        return "successes", "trials"
    tiers = table_tiers(runs)
    if tier in tiers:
        return f"p_{tier}", f"n_{tier}"
    if tiers:
        raise TableError("runs", f"no p_{tier}/n_{tier} columns; the table has tiers {', '.join(tiers)}")
    raise ValueError(f"runs need successes/trials or p_{tier}/n_{tier} columns; got {runs.columns}")


def table_tiers(runs: pl.DataFrame) -> list[str]:
    """The tiers a runs table has counts of (``p_<tier>`` and ``n_<tier>``)."""
    return [t for t in (*TIERS, VALIDATION_TIER) if {f"p_{t}", f"n_{t}"} <= set(runs.columns)]


def refuse(rows: pl.DataFrame, column: str, bad: pl.Expr, problem: str, table: str = "runs") -> None:
    """Raise a ``TableError`` of ``table`` naming ``column``, the first of ``rows`` where ``bad`` holds (its
    1-based ``row`` in the table) and how many more; ``problem`` is formatted with the cell's ``value`` and
    its ``run`` (the row)."""
    hit = rows.filter(bad.fill_null(False))
    if hit.height:
        run = hit.row(0, named=True)
        more = f" (and {hit.height - 1} more rows)" if hit.height > 1 else ""
        cell = problem.format(value=run[column], run=run)
        raise TableError(table, f"column {column}, row {run['row']}: {cell}{more}")


def numbers(
    rows: pl.DataFrame,
    column: str,
    minimum: float,
    whole: bool,
    maximum: float = math.inf,
    nullable: bool = False,
    table: str = "runs",
) -> pl.DataFrame:
    """``rows`` with ``column`` as Float64, refusing cells that are empty (unless ``nullable``), not
    numbers, NaN or infinite, outside [``minimum``, ``maximum``] or (``whole``) not whole numbers."""
    if not nullable:
        refuse(rows, column, pl.col(column).is_null(), "empty cell", table)
    if not rows[column].dtype.is_numeric():
        text = pl.col(column).cast(pl.Float64, strict=False).is_null() & pl.col(column).is_not_null()
        refuse(rows, column, text, "must be a number, got {value!r}", table)
    rows = rows.with_columns(pl.col(column).cast(pl.Float64))
    refuse(rows, column, ~pl.col(column).is_finite(), "must be a finite number, got {value}", table)
    if whole:
        refuse(rows, column, pl.col(column) != pl.col(column).round(), "must be a whole number, got {value:g}", table)
    if maximum == math.inf:
        refuse(rows, column, pl.col(column) < minimum, f"must be at least {minimum:g}, got {{value:g}}", table)
    else:
        outside = (pl.col(column) < minimum) | (pl.col(column) > maximum)
        refuse(rows, column, outside, f"must be in [{minimum:g}, {maximum:g}], got {{value:g}}", table)
    return rows


def check_runs(runs: pl.DataFrame, tier: str) -> None:
    """Refuse a runs table whose fit of ``tier`` would mean nothing, naming the column, row and
    problem: no counts of the tier, a missing axis, a design amount that is not a whole number >= 1,
    a run (status ok, or any without a status column) whose trials are empty, NaN or below 1, or
    whose successes are missing, negative or more than its trials, and two rows of one design and
    seed. Without this such a table fails deep in a fit (a LAPACK error) or is fitted silently."""
    if tier not in TIERS:
        tiers = table_tiers(runs)
        has = f"the table has tiers {', '.join(tiers)}" if tiers else "the table has no p_<tier>/n_<tier> columns"
        if {"successes", "trials"} <= set(runs.columns):
            has = "the table has successes/trials, no p_<tier>/n_<tier> columns"
        raise TableError("runs", f"tier {tier!r} is none the laws fit ({', '.join(TIERS)}); {has}")
    successes, trials = count_columns(runs, tier)
    missing = [axis for axis in AXES if axis not in runs.columns]
    if missing:
        raise TableError("runs", f"no {', '.join(missing)} column: a fit needs every axis ({', '.join(AXES)})")
    measured = runs.with_row_index("row", offset=1)
    if "status" in measured.columns:  # a failed run is no measurement: usable_runs leaves it out
        measured = measured.filter(pl.col("status") == "ok")
    rows = measured
    for column in (c for c in AMOUNT_COLUMNS if c in rows.columns):
        rows = numbers(rows, column, 1, whole=True)
    rows = numbers(rows, trials, 1, whole=True)
    if successes == "successes":
        rows = numbers(rows, successes, 0, whole=True)
        more = "must be at most its trials ({run[trials]:g}), got {value:g}"
        refuse(rows, successes, pl.col(successes) > pl.col(trials), more)
    else:
        rows = numbers(rows, successes, 0, whole=False)
        refuse(rows, successes, pl.col(successes) > 1, "a success rate must be at most 1, got {value:g}")
    _refuse_repeats(measured)


def _refuse_repeats(rows: pl.DataFrame) -> None:
    """Two rows of one design (``point_key``, else the design columns) and seed: one run counted twice."""
    if "seed" not in rows.columns:
        return
    design = ["point_key"] if "point_key" in rows.columns else [c for c in DESIGN_COLUMNS if c in rows.columns]
    repeated = rows.group_by(*design, "seed", maintain_order=True).agg("row").filter(pl.col("row").list.len() > 1)
    if repeated.height:
        first = repeated.row(0, named=True)
        named = ", ".join(f"{c}={first[c]}" for c in (*design, "seed"))
        raise TableError("runs", f"rows {' and '.join(map(str, first['row']))} are one run ({named}): a run is one row")


def check_episodes(episodes: pl.DataFrame) -> None:
    """Refuse an episodes table without the columns the task-level bootstrap reads."""
    missing = [c for c in EPISODE_COLUMNS if c not in episodes.columns]
    if missing:
        raise TableError(
            "episodes",
            f"no {', '.join(missing)} column (one row per held-out episode: {', '.join(EPISODE_COLUMNS)}); "
            f"got {', '.join(episodes.columns)}",
        )


def clipped_success(successes: np.ndarray, trials: np.ndarray) -> np.ndarray:
    """``p = k / n`` clipped to [1/(2n), 1 - 1/(2n)], so 0/n and n/n give finite losses."""
    return np.clip(successes / trials, 0.5 / trials, 1.0 - 0.5 / trials)


def clipped_loss(successes: np.ndarray, trials: np.ndarray) -> np.ndarray:
    """``-ln p`` of the clipped success (``clipped_success``)."""
    return -np.log(clipped_success(successes, trials))


def usable_runs(runs: pl.DataFrame, tier: str = "all") -> tuple[pl.DataFrame, pl.DataFrame]:
    """(usable, failed) runs, both with integer ``successes`` and ``trials`` and a ``seed`` column.

    Counts come from ``successes``/``trials`` when present, else from ``p_<tier>``/``n_<tier>``.
    A run failed when ``status`` is not "ok" or it has no trials: a failure is not a measurement of
    zero success, so it is left out of every fit, counted, and warned about (``check_runs`` refuses
    a run of the fitted tier that claims success without trials). A missing ``seed`` column makes
    every row its own seed.
    """
    successes, trials = count_columns(runs, tier)
    if successes == "successes":
        counted = runs.with_columns(pl.col("successes").cast(pl.Int64), pl.col("trials").cast(pl.Int64))
    else:
        counted = runs.with_columns(
            successes=(pl.col(successes) * pl.col(trials)).round().cast(pl.Int64), trials=pl.col(trials).cast(pl.Int64)
        )
    if "seed" not in counted.columns:
        counted = counted.with_row_index("seed")
    usable = (pl.col("trials") > 0) & pl.col("successes").is_not_null()
    if "status" in counted.columns:
        usable &= pl.col("status") == "ok"
    usable = usable.fill_null(False)
    ok, failed = counted.filter(usable), counted.filter(~usable)
    if failed.height:
        warnings.warn(f"{failed.height} failed runs excluded from the fits", stacklevel=3)
    return ok, failed


def infer_centre(runs: pl.DataFrame, axes: Sequence[str] = AXES) -> dict[str, int]:
    """The held value of each axis: its most frequent value over distinct designs (ties: the smaller).

    In one-axis sweeps the centre is the only design in every sweep, so each of its coordinates
    occurs in all sweeps but one, more often than any other value.
    """
    designs = runs.unique(subset=list(axes))
    centre = {}
    for axis in axes:
        counts = designs.group_by(axis).len().sort(["len", axis], descending=[True, False])
        centre[axis] = counts[axis][0]
    return centre


def axis_sweep(runs: pl.DataFrame, axis: str, centre: Mapping[str, int]) -> pl.DataFrame:
    """The runs of one axis's sweep: every other axis at its held value."""
    held = [pl.col(other) == value for other, value in centre.items() if other != axis]
    return runs.filter(*held) if held else runs


def check_one_setting(runs: pl.DataFrame, free: Sequence[str]) -> None:
    """Refuse to pool runs that differ in a design column other than the ``free`` (fitted) ones."""
    mixed = {
        column: runs[column].unique().sort(nulls_last=True).to_list()
        for column in DESIGN_COLUMNS
        if column in runs.columns and column not in free and runs[column].n_unique() > 1
    }
    if mixed:
        raise ValueError(f"runs mix settings {mixed}: filter to one setting, or group them (fit_axes_by)")


@dataclass(frozen=True)
class RunArrays:
    """Runs as arrays, sorted by grid point, so the bootstrap can resample seeds within a point."""

    points: pl.DataFrame
    """One row per grid point: the ``by`` columns, sorted."""
    point_index: np.ndarray
    seed: np.ndarray
    successes: np.ndarray
    trials: np.ndarray
    run_keys: list[str] | None

    @classmethod
    def from_runs(cls, runs: pl.DataFrame, by: Sequence[str]) -> RunArrays:
        points = runs.select(by).unique().sort(by)
        indexed = runs.join(points.with_row_index("point_index"), on=list(by), how="left", nulls_equal=True).sort(
            "point_index", "seed"
        )
        return cls(
            points=points,
            point_index=indexed["point_index"].to_numpy().astype(np.int64),
            seed=indexed["seed"].to_numpy(),
            successes=indexed["successes"].to_numpy().astype(np.float64),
            trials=indexed["trials"].to_numpy().astype(np.float64),
            run_keys=indexed["run_key"].to_list() if "run_key" in indexed.columns else None,
        )

    def subset(self, keep: np.ndarray) -> RunArrays:
        """The runs where ``keep`` holds, points without runs dropped (leave-one-out refits)."""
        kept_points = np.unique(self.point_index[keep])
        new_index = np.full(self.points.height, -1, dtype=np.int64)
        new_index[kept_points] = np.arange(len(kept_points))
        return RunArrays(
            points=self.points[kept_points.tolist()],
            point_index=new_index[self.point_index[keep]],
            seed=self.seed[keep],
            successes=self.successes[keep],
            trials=self.trials[keep],
            run_keys=None
            if self.run_keys is None
            else [k for k, kept in zip(self.run_keys, keep, strict=True) if kept],
        )


@dataclass(frozen=True)
class PointStats:
    """Seed-pooled success per grid point and the delta-method variance of its loss."""

    trials: np.ndarray
    n_seeds: np.ndarray
    loss: np.ndarray
    var_loss: np.ndarray
    seed_variance: float
    """tau^2: between-seed variance of L beyond binomial noise, pooled over points, floored at 0."""


def point_statistics(point_index: np.ndarray, successes: np.ndarray, trials: np.ndarray, n_points: int) -> PointStats:
    """Pooled loss per point; ``var(L) = (binomial variance per seed + tau^2) / seeds``."""
    pooled_trials = np.bincount(point_index, trials, n_points)
    loss = clipped_loss(np.bincount(point_index, successes, n_points), pooled_trials)
    p = np.exp(-loss)
    n_seeds = np.bincount(point_index, minlength=n_points)
    run_loss = clipped_loss(successes, trials)
    run_binomial = ((1.0 - p) / p)[point_index] / trials
    mean_run_loss = np.bincount(point_index, run_loss, n_points) / n_seeds
    scatter = np.bincount(point_index, (run_loss - mean_run_loss[point_index]) ** 2, n_points)
    binomial_sum = np.bincount(point_index, run_binomial, n_points)
    dof = (n_seeds - 1).sum()
    seed_variance = max(0.0, (scatter - binomial_sum * (n_seeds - 1) / n_seeds).sum() / dof) if dof else 0.0
    var_loss = (binomial_sum / n_seeds + seed_variance) / n_seeds
    return PointStats(pooled_trials, n_seeds, loss, var_loss, seed_variance)


def pool_points(runs: pl.DataFrame, by: Sequence[str], tier: str = "all") -> pl.DataFrame:
    """One row per grid point: ``by`` columns, pooled ``successes``/``trials``, ``n_seeds``, ``p``,
    ``loss`` and ``loss_se`` (with the pooled between-seed variance). Failed runs are excluded."""
    ok, _ = usable_runs(runs, tier)
    check_one_setting(ok, free=by)
    arrays = RunArrays.from_runs(ok, by)
    stats = point_statistics(arrays.point_index, arrays.successes, arrays.trials, arrays.points.height)
    return arrays.points.with_columns(
        successes=np.bincount(arrays.point_index, arrays.successes, arrays.points.height).astype(np.int64),
        trials=stats.trials.astype(np.int64),
        n_seeds=stats.n_seeds,
        p=np.exp(-stats.loss),
        loss=stats.loss,
        loss_se=np.sqrt(stats.var_loss),
    )


@dataclass(frozen=True)
class TaskMatrix:
    """Per-run, per-held-out-task success counts and trials, rows aligned with a ``RunArrays``."""

    successes: np.ndarray
    present: np.ndarray


def task_matrix(episodes: pl.DataFrame, run_keys: Sequence[str], tier: str) -> TaskMatrix:
    """The task-level bootstrap's input: episodes (``run_key``, ``task_id``, ``tier``, ``success``)
    of the given runs and tier (all tiers for "all") as run x task arrays."""
    rows = episodes if tier == "all" else episodes.filter(pl.col("tier") == tier)
    rows = rows.filter(pl.col("run_key").is_in(list(run_keys)))
    missing = set(run_keys) - set(rows["run_key"].unique().to_list())
    if missing:
        raise ValueError(f"no {tier} episodes for {len(missing)} runs, e.g. {min(missing)}")
    run_row = {key: i for i, key in enumerate(run_keys)}
    tasks = rows["task_id"].unique().sort()
    task_col = {task: j for j, task in enumerate(tasks.to_list())}
    r = np.array([run_row[k] for k in rows["run_key"].to_list()])
    c = np.array([task_col[t] for t in rows["task_id"].to_list()])
    successes = np.zeros((len(run_keys), len(task_col)))
    present = np.zeros_like(successes)
    np.add.at(successes, (r, c), rows["success"].cast(pl.Float64).to_numpy())
    np.add.at(present, (r, c), 1.0)
    return TaskMatrix(successes, present)


def resample(
    arrays: RunArrays, rng: np.random.Generator, tasks: TaskMatrix | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(successes, trials) of one two-stage bootstrap replicate, aligned with ``arrays``' runs.

    Stage 1 redraws each point's seeds with replacement; stage 2 redraws the held-out tasks, once
    for all runs (they share the task set, so task difficulty correlates runs), or, without
    episodes, draws binomial successes per run. The naive seed-only bootstrap under-covers with
    three seeds: they allow few distinct resamples, and it leaves out the held-out tasks' noise.
    """
    counts = np.bincount(arrays.point_index, minlength=arrays.points.height)
    starts = np.cumsum(counts) - counts
    drawn = starts[arrays.point_index] + (rng.random(len(arrays.point_index)) * counts[arrays.point_index]).astype(
        np.int64
    )
    if tasks is None:
        trials = arrays.trials[drawn]
        return rng.binomial(trials.astype(np.int64), arrays.successes[drawn] / trials).astype(np.float64), trials
    n_tasks = tasks.successes.shape[1]
    weights = rng.multinomial(n_tasks, np.full(n_tasks, 1.0 / n_tasks)).astype(np.float64)
    return tasks.successes[drawn] @ weights, tasks.present[drawn] @ weights
