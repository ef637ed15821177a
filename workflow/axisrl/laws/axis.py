"""Per-axis scaling laws: one axis swept, the others held (``docs/methods.md``), from a runs table.

Per axis: both models of ``models`` fitted to the seed-pooled sweep with the selected one marked
(``fit_axes``, ``fit_axes_by``), leave-one-out refits, fit-free local slopes, the trend of
held-out success, and the two-stage bootstrap of the exponents with the axis ordering it tests.
``floor`` is selected over ``power`` only if its quasi-AICc (chi2 divided by the larger model's
dispersion, floored at 1) is lower by more than 2 *and* the local slopes fall with ``x``.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np
import polars as pl
import statsmodels.api as sm

from axisrl.laws.data import (
    AXES,
    RunArrays,
    TaskMatrix,
    axis_sweep,
    check_one_setting,
    infer_centre,
    point_statistics,
    resample,
    task_matrix,
    usable_runs,
)
from axisrl.laws.models import (
    ALPHA_BOUNDS,
    ALPHA_GRID,
    LEVEL,
    MIN_POINTS,
    MODELS,
    N_PARAMS,
    ExponentFit,
    FloorProfile,
    fit_floor,
    fit_models,
    fit_power,
    floor_profile,
    quasi_aicc,
)

__all__ = [
    "ALPHA_BOUNDS",
    "ALPHA_GRID",
    "FIT_SCHEMA",
    "LEVEL",
    "LOO_SCHEMA",
    "MIN_POINTS",
    "MODELS",
    "N_PARAMS",
    "REPLICATE_SCHEMA",
    "SLOPE_SCHEMA",
    "TREND_SCHEMA",
    "ExponentFit",
    "FloorProfile",
    "axis_ordering",
    "bootstrap_alphas",
    "bootstrap_intervals",
    "fit_axes",
    "fit_axes_by",
    "fit_floor",
    "fit_power",
    "floor_profile",
    "leave_one_out",
    "local_slopes",
    "quasi_aicc",
    "success_trends",
]
"""With what it re-exports from ``models``, every name ``axis`` has held."""


FIT_SCHEMA = {
    "axis": pl.String,
    "model": pl.String,
    "status": pl.String,
    "reason": pl.String,
    "n_points": pl.Int64,
    "n_runs": pl.Int64,
    "n_failed_excluded": pl.Int64,
    "x_min": pl.Float64,
    "x_max": pl.Float64,
    "alpha": pl.Float64,
    "alpha_lo": pl.Float64,
    "alpha_hi": pl.Float64,
    "E": pl.Float64,
    "A": pl.Float64,
    "dispersion": pl.Float64,
    "r_squared": pl.Float64,
    "aicc": pl.Float64,
    "delta_aicc": pl.Float64,
    "selected": pl.Boolean,
    "max_loo_point_shift": pl.Float64,
    "max_loo_seed_shift": pl.Float64,
    "loo_unstable": pl.Boolean,
}
"""``loo_unstable``: some leave-one-out shift exceeds half the CI width, so one point or seed drives the fit."""

LOO_SCHEMA = {
    "axis": pl.String,
    "model": pl.String,
    "left_out": pl.String,
    "left_out_value": pl.Float64,
    "alpha": pl.Float64,
    "delta_alpha": pl.Float64,
}
SLOPE_SCHEMA = {
    "axis": pl.String,
    "segment": pl.Int64,
    "x_lo": pl.Float64,
    "x_hi": pl.Float64,
    "slope": pl.Float64,
    "slope_se": pl.Float64,
}
TREND_SCHEMA = {
    "axis": pl.String,
    "n_runs": pl.Int64,
    "n_points": pl.Int64,
    "slope": pl.Float64,
    "slope_lo": pl.Float64,
    "slope_hi": pl.Float64,
    "p_value": pl.Float64,
}
"""``slope``: held-out success gained per doubling of the axis, with its CI and two-sided p-value."""
REPLICATE_SCHEMA = {"replicate": pl.Int64, "axis": pl.String, "model": pl.String, "alpha": pl.Float64}


def _local_slopes(x: np.ndarray, loss: np.ndarray, var_loss: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Slopes ``-d ln L / d ln x`` between adjacent points and their delta-method SEs."""
    log_x, log_loss, var_log = np.log(x), np.log(loss), var_loss / loss**2
    step = np.diff(log_x)
    return -np.diff(log_loss) / step, np.sqrt(var_log[1:] + var_log[:-1]) / step


class _SweepFit(NamedTuple):
    """The seed-pooled points of one sweep and both model fits to them."""

    x: np.ndarray
    loss: np.ndarray
    var_loss: np.ndarray
    fits: dict[str, ExponentFit | None]


def _sweep_fit(arrays: RunArrays, axis: str, with_ci: bool) -> _SweepFit:
    """Pooled points of one sweep and both model fits."""
    pooled = point_statistics(arrays.point_index, arrays.successes, arrays.trials, arrays.points.height)
    x = arrays.points[axis].to_numpy().astype(np.float64)
    return _SweepFit(x, pooled.loss, pooled.var_loss, fit_models(x, pooled.loss, pooled.var_loss, with_ci))


def _loo_rows(arrays: RunArrays, axis: str, fits: Mapping[str, ExponentFit | None]) -> list[dict]:
    """Refits with one grid point, then one seed, left out; ``delta_alpha`` against the full fit."""
    x = arrays.points[axis].to_numpy().astype(np.float64)
    units = [("point", float(x[j]), arrays.point_index != j) for j in range(len(x))]
    seeds = np.unique(arrays.seed)
    if len(seeds) > 1:
        units += [("seed", float(s), arrays.seed != s) for s in seeds]
    rows = []
    for left_out, value, keep in units:
        refits = _sweep_fit(arrays.subset(keep), axis, with_ci=False).fits
        for model in MODELS:
            full, refit = fits[model], refits[model]
            if full is not None and refit is not None:
                rows.append(
                    {
                        "axis": axis,
                        "model": model,
                        "left_out": left_out,
                        "left_out_value": value,
                        "alpha": refit.alpha,
                        "delta_alpha": refit.alpha - full.alpha,
                    }
                )
    return rows


def _axis_rows(arrays: RunArrays, axis: str, n_failed: int) -> list[dict]:
    """The two model rows of one sweep, with selection and leave-one-out shifts."""
    n_points = arrays.points.height
    base = {"axis": axis, "n_points": n_points, "n_runs": len(arrays.point_index), "n_failed_excluded": n_failed}
    if n_points:
        x_all = arrays.points[axis].to_numpy()
        base |= {"x_min": float(x_all.min()), "x_max": float(x_all.max())}
    if n_points < MIN_POINTS["power"]:
        reason = f"{n_points} usable grid points; a fit needs at least {MIN_POINTS['power']}"
        return [base | {"model": m, "status": "too_few_points", "reason": reason, "selected": False} for m in MODELS]
    x, loss, var_loss, fits = _sweep_fit(arrays, axis, with_ci=True)
    largest = fits["floor"] or fits["power"]
    dispersion = max(1.0, largest.chi2 / largest.dof)
    aicc = {m: quasi_aicc(f.chi2, N_PARAMS[m], n_points, dispersion) for m, f in fits.items() if f}
    slopes, slope_se = _local_slopes(x, loss, var_loss)
    falling = np.polyfit(np.log(x[:-1] * x[1:]) / 2, slopes, 1, w=1 / slope_se)[0] < 0
    chosen = "floor" if ("floor" in aicc and aicc["power"] - aicc["floor"] > 2 and falling) else "power"
    loo = pl.DataFrame(_loo_rows(arrays, axis, fits), schema=LOO_SCHEMA)
    rows = []
    for model in MODELS:
        fit = fits[model]
        if fit is None:
            rows.append(
                base
                | {
                    "model": model,
                    "status": "too_few_points",
                    "selected": False,
                    "reason": f"{n_points} usable grid points; {model} needs {MIN_POINTS[model]}",
                }
            )
            continue
        shifts = loo.filter(pl.col("model") == model).group_by("left_out").agg(pl.col("delta_alpha").abs().max())
        shift = dict(zip(shifts["left_out"], shifts["delta_alpha"], strict=True))
        largest_shift = max(shift.values(), default=0.0)
        rows.append(
            base
            | {
                "model": model,
                "status": "ok",
                "alpha": fit.alpha,
                "alpha_lo": fit.alpha_lo,
                "alpha_hi": fit.alpha_hi,
                "E": fit.E,
                "A": fit.A,
                "dispersion": fit.chi2 / fit.dof,
                "r_squared": fit.r_squared,
                "aicc": aicc[model],
                "delta_aicc": aicc[model] - min(aicc.values()),
                "selected": model == chosen,
                "max_loo_point_shift": shift.get("point"),
                "max_loo_seed_shift": shift.get("seed"),
                "loo_unstable": largest_shift > (fit.alpha_hi - fit.alpha_lo) / 2,
            }
        )
    return rows


def _sweeps(
    runs: pl.DataFrame, axes: Sequence[str], tier: str, centre: Mapping[str, int] | None
) -> dict[str, tuple[pl.DataFrame, int]]:
    """Per axis: its usable sweep runs and the number of failed runs it lost."""
    ok, failed = usable_runs(runs, tier)
    held = dict(centre) if centre is not None else infer_centre(ok, [a for a in AXES if a in ok.columns])
    sweeps = {}
    for axis in axes:
        sweep = axis_sweep(ok, axis, held)
        check_one_setting(sweep, free=[axis])
        sweeps[axis] = (sweep, axis_sweep(failed, axis, held).height)
    return sweeps


def fit_axes(
    runs: pl.DataFrame, axes: Sequence[str] = AXES, *, tier: str = "all", centre: Mapping[str, int] | None = None
) -> pl.DataFrame:
    """Per axis and model (``power``, ``floor``): alpha with its CI, E, A, dispersion, R^2, AICc,
    which model is selected, and the largest leave-one-point-out and leave-one-seed-out shifts.

    ``centre`` gives the held value of each axis (default: inferred, see ``infer_centre``). An axis
    with fewer usable points than a model needs gets ``status = "too_few_points"`` and a reason.
    """
    rows = []
    for axis, (sweep, n_failed) in _sweeps(runs, axes, tier, centre).items():
        rows += _axis_rows(RunArrays.from_runs(sweep, [axis]), axis, n_failed)
    return pl.DataFrame(rows, schema=FIT_SCHEMA)


def fit_axes_by(
    runs: pl.DataFrame,
    by: Sequence[str],
    axes: Sequence[str] = AXES,
    *,
    tier: str = "all",
    centre: Mapping[str, int] | None = None,
) -> pl.DataFrame:
    """``fit_axes`` per group of ``by`` (model size, algorithm, budget convention, ...)."""
    frames = [
        fit_axes(group, axes, tier=tier, centre=centre).select(
            *(pl.lit(value).alias(column) for column, value in zip(by, key, strict=True)), pl.all()
        )
        for key, group in runs.sort(by).group_by(by, maintain_order=True)
    ]
    return pl.concat(frames, how="vertical_relaxed")


def leave_one_out(
    runs: pl.DataFrame, axes: Sequence[str] = AXES, *, tier: str = "all", centre: Mapping[str, int] | None = None
) -> pl.DataFrame:
    """Alpha of each model refitted with each grid point, then each seed, left out."""
    rows = []
    for axis, (sweep, _) in _sweeps(runs, axes, tier, centre).items():
        arrays = RunArrays.from_runs(sweep, [axis])
        if arrays.points.height >= MIN_POINTS["power"]:
            rows += _loo_rows(arrays, axis, _sweep_fit(arrays, axis, with_ci=False).fits)
    return pl.DataFrame(rows, schema=LOO_SCHEMA)


def local_slopes(
    runs: pl.DataFrame, axes: Sequence[str] = AXES, *, tier: str = "all", centre: Mapping[str, int] | None = None
) -> pl.DataFrame:
    """Fit-free slopes ``-(ln L_{j+1} - ln L_j) / (ln x_{j+1} - ln x_j)`` with delta-method SEs
    (Table 12); a downward trend in ``x`` is the signature of a floor ``E``."""
    rows = []
    for axis, (sweep, _) in _sweeps(runs, axes, tier, centre).items():
        arrays = RunArrays.from_runs(sweep, [axis])
        if arrays.points.height < 2:
            continue
        s = point_statistics(arrays.point_index, arrays.successes, arrays.trials, arrays.points.height)
        x = arrays.points[axis].to_numpy().astype(np.float64)
        slopes, slope_se = _local_slopes(x, s.loss, s.var_loss)
        rows += [
            {
                "axis": axis,
                "segment": j + 1,
                "x_lo": x[j],
                "x_hi": x[j + 1],
                "slope": slopes[j],
                "slope_se": slope_se[j],
            }
            for j in range(len(slopes))
        ]
    return pl.DataFrame(rows, schema=SLOPE_SCHEMA)


def success_trends(
    runs: pl.DataFrame, axes: Sequence[str] = AXES, *, tier: str = "all", centre: Mapping[str, int] | None = None
) -> pl.DataFrame:
    """The fitted trend of held-out success along each sweep: ordinary least squares of every run's
    success on ``log2 x``, with a t-interval on ``n_runs - 2`` degrees of freedom.

    Whether success rises with an axis is a question about runs, not about the seed-pooled law:
    tiny-backend runs are bimodal (a seed learns or it does not), so the law's few pooled points
    scatter widely while the runs, as replicates, still resolve the sign. Needs two grid points
    and a residual degree of freedom; sweeps without them are left out.
    """
    rows = []
    for axis, (sweep, _) in _sweeps(runs, axes, tier, centre).items():
        n_points = sweep[axis].n_unique()
        if n_points < 2 or sweep.height < 3:
            continue
        success = (sweep["successes"] / sweep["trials"]).to_numpy()
        design = sm.add_constant(np.log2(sweep[axis].to_numpy().astype(np.float64)))
        fit = sm.OLS(success, design).fit()
        lo, hi = fit.conf_int(1 - LEVEL)[1]
        rows.append(
            {
                "axis": axis,
                "n_runs": sweep.height,
                "n_points": n_points,
                "slope": float(fit.params[1]),
                "slope_lo": float(lo),
                "slope_hi": float(hi),
                "p_value": float(fit.pvalues[1]),
            }
        )
    return pl.DataFrame(rows, schema=TREND_SCHEMA)


def bootstrap_alphas(
    runs: pl.DataFrame,
    axes: Sequence[str] = AXES,
    *,
    n_boot: int = 2000,
    seed: int = 0,
    tier: str = "all",
    centre: Mapping[str, int] | None = None,
    episodes: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Alpha of each axis and model in each two-stage bootstrap replicate (seeds, then tasks).

    All axes are refitted from the *same* replicate, so the shared centre point moves together
    across sweeps and differences between axes are bootstrapped correctly (``axis_ordering``).
    With ``episodes`` tasks are resampled from the per-task rows, else successes are binomial.
    """
    sweeps = _sweeps(runs, axes, tier, centre)
    union = pl.concat([sweep for sweep, _ in sweeps.values()], how="diagonal_relaxed").unique(
        subset=["run_key"] if "run_key" in runs.columns else None, maintain_order=True
    )
    design = [a for a in AXES if a in union.columns]
    arrays = RunArrays.from_runs(union, design)
    tasks: TaskMatrix | None = None
    if episodes is not None:
        if arrays.run_keys is None:
            raise ValueError("a task-level bootstrap needs a run_key column to match episodes")
        tasks = task_matrix(episodes, arrays.run_keys, tier)
    members = {}
    for axis in sweeps:
        point_in_sweep = (
            arrays.points.with_row_index("i")
            .join(sweeps[axis][0].select(design).unique(), on=design, how="semi")["i"]
            .to_numpy()
        )
        run_mask = np.isin(arrays.point_index, point_in_sweep)
        local = np.searchsorted(point_in_sweep, arrays.point_index[run_mask])
        members[axis] = (run_mask, local, arrays.points[point_in_sweep.tolist()][axis].to_numpy().astype(float))
    rng = np.random.default_rng(seed)
    rows = []
    for replicate in range(n_boot):
        successes, trials = resample(arrays, rng, tasks)
        for axis, (run_mask, local, x) in members.items():
            s = point_statistics(local, successes[run_mask], trials[run_mask], len(x))
            for model, fit in fit_models(x, s.loss, s.var_loss, with_ci=False).items():
                rows.append((replicate, axis, model, fit.alpha if fit else None))
    return pl.DataFrame(rows, schema=REPLICATE_SCHEMA, orient="row")


def bootstrap_intervals(replicates: pl.DataFrame, level: float = LEVEL) -> pl.DataFrame:
    """Percentile interval of alpha per axis and model (``alpha_boot_lo``, ``alpha_boot_hi``)."""
    tail = (1 - level) / 2
    return (
        replicates.drop_nulls("alpha")
        .group_by("axis", "model", maintain_order=True)
        .agg(
            alpha_boot_lo=pl.col("alpha").quantile(tail, "linear"),
            alpha_boot_hi=pl.col("alpha").quantile(1 - tail, "linear"),
            n_boot=pl.len(),
        )
    )


def axis_ordering(replicates: pl.DataFrame, model: str = "power", level: float = LEVEL) -> pl.DataFrame:
    """Ordering claims tested on bootstrapped differences, not on overlapping marginal CIs: per
    pair of axes, the percentile CI of ``alpha_a - alpha_b`` and the fraction of replicates with
    ``alpha_a > alpha_b``. ``model`` picks which fit's alphas are compared."""
    wide = replicates.filter(pl.col("model") == model).pivot(on="axis", index="replicate", values="alpha").drop_nulls()
    tail = (1 - level) / 2
    rows = []
    for a, b in itertools.combinations([c for c in wide.columns if c != "replicate"], 2):
        diff = (wide[a] - wide[b]).to_numpy()
        if not len(diff):  # an axis without a fit in any replicate: nothing to order
            continue
        rows.append(
            {
                "axis_a": a,
                "axis_b": b,
                "model": model,
                "alpha_diff_lo": float(np.quantile(diff, tail)),
                "alpha_diff_hi": float(np.quantile(diff, 1 - tail)),
                "frac_a_greater": float(np.mean(diff > 0)),
                "n_boot": len(diff),
            }
        )
    return pl.DataFrame(
        rows,
        schema={
            "axis_a": pl.String,
            "axis_b": pl.String,
            "model": pl.String,
            "alpha_diff_lo": pl.Float64,
            "alpha_diff_hi": pl.Float64,
            "frac_a_greater": pl.Float64,
            "n_boot": pl.Int64,
        },
    )
