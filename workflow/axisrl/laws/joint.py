"""Joint law over all runs (``docs/methods.md``): additive in named axes, or with tasks nested in environments.

* ``additive``: ``L = E + sum_i A_i x_i^-alpha_i`` over any named axes (``width`` = N included when
  it varies).
* ``nested``: ``d_task`` is replaced by ``D_T_eff = m* D_E (1 - exp(-D_T / (m* D_E)))`` (at small
  D_E extra tasks stop helping: ``m*`` is the number of useful tasks per environment) and, when
  ``d_traj`` is an axis, ``d_traj`` by ``tau_eff = k* (1 - exp(-D_tau / k*))``. Large ``m*``/``k*``
  give back the additive law.

Both are fitted by variable projection (VPNLS): for fixed exponents (and ``m*``, ``k*``) E and the
A_i are a weighted non-negative least-squares problem (weights ``1/var L``, to first order the
weights of a fit of ``ln L`` by ``1/var ln L``), and bounded trust-region least squares searches the nonlinear
parameters from a grid of starts. The nested
model is preferred only when its quasi-AICc is lower by more than 2 *and* its leave-one-grid-point
-out prediction error of ``ln L`` is lower.

``fit_chinchilla`` is the Hoffmann et al. / Epoch objective instead: ``log L_hat = LSE(a_i -
alpha_i log x_i, e)``, Huber loss (delta 1e-3) on log residuals summed over points, L-BFGS-B from
the Chinchilla grid of starts.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np
import polars as pl
from scipy import optimize, special, stats

from axisrl.laws.data import (
    AXES,
    RunArrays,
    check_one_setting,
    point_statistics,
    pool_points,
    resample,
    task_matrix,
    usable_runs,
)
from axisrl.laws.models import ALPHA_BOUNDS, LEVEL, quasi_aicc

if TYPE_CHECKING:
    from statsmodels.genmod.generalized_linear_model import GLMResults

JointModel = Literal["additive", "nested"]
ALPHA_STARTS = (0.1, 0.3, 0.7)
HOFFMANN_INIT_GRID = {"e": np.arange(-1.0, 1.5, 0.5), "a": np.arange(0.0, 30.0, 5.0), "alpha": np.arange(0.0, 2.5, 0.5)}
"""Hoffmann et al. (2022) App. D.2 starts, used per axis: e, then (a, alpha) for every axis."""


@dataclass(frozen=True)
class Law:
    """A joint law: ``L = E + sum_i A_i x_i^-alpha_i`` with ``d_task`` nested in ``d_env`` when
    ``m_star`` is set and ``d_traj`` saturating when ``k_star`` is set."""

    E: float
    A: Mapping[str, float]
    alpha: Mapping[str, float]
    m_star: float | None = None
    k_star: float | None = None


def effective_axes(
    values: Mapping[str, np.ndarray], m_star: float | None, k_star: float | None
) -> dict[str, np.ndarray]:
    """Axis values as the law sees them: nested tasks and saturating trajectories applied."""
    effective = dict(values)
    if m_star is not None:
        capacity = m_star * values["d_env"]
        effective["d_task"] = -capacity * np.expm1(-values["d_task"] / capacity)
    if k_star is not None:
        effective["d_traj"] = -k_star * np.expm1(-values["d_traj"] / k_star)
    return effective


def predict_loss(law: Law, designs: pl.DataFrame) -> np.ndarray:
    """``L`` of the law at each design row (needs the law's axes, and ``d_env`` when nested)."""
    columns = set(law.alpha) | ({"d_env"} if law.m_star is not None else set())
    values = {axis: designs[axis].to_numpy().astype(np.float64) for axis in columns}
    effective = effective_axes(values, law.m_star, law.k_star)
    return law.E + sum(law.A[axis] * effective[axis] ** -law.alpha[axis] for axis in law.alpha)


def _schema(axes: Sequence[str]) -> dict[str, pl.DataType]:
    schema: dict[str, pl.DataType] = {
        "model": pl.String,
        "objective": pl.String,
        "status": pl.String,
        "n_points": pl.Int64,
        "n_params": pl.Int64,
        "E": pl.Float64,
        "m_star": pl.Float64,
        "k_star": pl.Float64,
        "objective_value": pl.Float64,
        "dispersion": pl.Float64,
        "aicc": pl.Float64,
        "delta_aicc": pl.Float64,
        "cv_rmse": pl.Float64,
        "selected": pl.Boolean,
    }
    for axis in axes:
        schema |= {f"A_{axis}": pl.Float64, f"alpha_{axis}": pl.Float64}
    return schema


@dataclass(frozen=True)
class _Problem:
    """Pooled points of a joint fit and the nonlinear parameter layout of one model."""

    axes: tuple[str, ...]
    values: dict[str, np.ndarray]
    loss: np.ndarray
    weight: np.ndarray
    nested: bool

    @property
    def saturating(self) -> bool:
        return self.nested and "d_traj" in self.axes

    def law(self, theta: np.ndarray, coef: np.ndarray) -> Law:
        K = len(self.axes)
        m_star = float(np.exp(theta[K])) if self.nested else None
        k_star = float(np.exp(theta[K + 1])) if self.saturating else None
        return Law(
            float(coef[0]),
            dict(zip(self.axes, map(float, coef[1:]), strict=True)),
            dict(zip(self.axes, map(float, theta[:K]), strict=True)),
            m_star,
            k_star,
        )

    def features(self, theta: np.ndarray, keep: np.ndarray) -> np.ndarray:
        """Columns ``[1, x_i_eff^-alpha_i ...]`` at the points in ``keep``."""
        K = len(self.axes)
        values = {axis: v[keep] for axis, v in self.values.items()}
        effective = effective_axes(
            values, np.exp(theta[K]) if self.nested else None, np.exp(theta[K + 1]) if self.saturating else None
        )
        return np.column_stack([np.ones(keep.sum())] + [effective[a] ** -theta[i] for i, a in enumerate(self.axes)])

    def project(self, theta: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(weighted residuals, [E, A_i ...]) with E, A_i >= 0 by NNLS at fixed nonlinear parameters."""
        root_weight = np.sqrt(self.weight[keep])
        design = self.features(theta, keep) * root_weight[:, None]
        coef, _ = optimize.nnls(design, self.loss[keep] * root_weight)
        return design @ coef - self.loss[keep] * root_weight, coef

    def bounds(self) -> list[tuple[float, float]]:
        bounds = [ALPHA_BOUNDS] * len(self.axes)
        if self.nested:
            ratio = self.values["d_task"] / self.values["d_env"]
            bounds.append((float(np.log(ratio.min() / 10)), float(np.log(ratio.max() * 100))))
        if self.saturating:
            bounds.append(
                (float(np.log(self.values["d_traj"].min() / 10)), float(np.log(self.values["d_traj"].max() * 100)))
            )
        return bounds

    def fit(self, starts: Sequence[np.ndarray], keep: np.ndarray) -> tuple[np.ndarray, float]:
        """Best (nonlinear parameters, weighted RSS) of bounded trust-region least-squares runs
        from ``starts`` (Gauss-Newton on the projected residuals converges in a few steps where
        L-BFGS-B on their squared norm crawls)."""
        low, high = np.array(self.bounds()).T
        best_theta, best_rss = starts[0], np.inf
        for start in starts:
            result = optimize.least_squares(
                lambda theta: self.project(theta, keep)[0],
                np.clip(start, low, high),
                bounds=(low, high),
                method="trf",
                x_scale="jac",
                ftol=1e-12,
            )
            rss = float(np.sum(result.fun**2))
            if rss < best_rss:
                best_theta, best_rss = result.x, rss
        return best_theta, best_rss


def _nested_starts(problem: _Problem, additive_alpha: np.ndarray) -> list[np.ndarray]:
    """The additive fit's exponents crossed with a grid on m* (and k*), plus the coarse exponent
    grid at the middle of that grid."""
    bounds = problem.bounds()[len(problem.axes) :]
    scales = [np.linspace(low + np.log(10), high - np.log(100), 4) for low, high in bounds]
    middle = np.array([np.mean(scale) for scale in scales])
    return [np.concatenate([additive_alpha, scale]) for scale in itertools.product(*scales)] + [
        np.concatenate([alpha, middle]) for alpha in itertools.product(ALPHA_STARTS, repeat=len(problem.axes))
    ]


def _cv_rmse(problem: _Problem, theta: np.ndarray) -> float:
    """Root mean squared error of ``ln L`` at each grid point predicted by a refit without it."""
    errors = []
    for left_out in range(len(problem.loss)):
        keep = np.arange(len(problem.loss)) != left_out
        refit, _ = problem.fit([theta], keep)
        _, coef = problem.project(refit, keep)
        predicted = problem.features(refit, ~keep) @ coef
        errors.append(np.log(max(float(predicted[0]), 1e-12)) - np.log(problem.loss[left_out]))
    return float(np.sqrt(np.mean(np.square(errors))))


def fit_joint(
    runs: pl.DataFrame,
    axes: Sequence[str] = AXES,
    *,
    tier: str = "all",
    models: Sequence[JointModel] = ("additive", "nested"),
    objective: Literal["wls", "chinchilla"] = "wls",
) -> pl.DataFrame:
    """One row per model: E, ``A_<axis>``, ``alpha_<axis>``, ``m_star``, ``k_star``, the weighted RSS,
    quasi-AICc, leave-one-grid-point-out ``cv_rmse`` of ``ln L``, and which model is selected.

    Runs are pooled over seeds per design; runs that differ in a design column that is not one of
    ``axes`` are refused. ``objective="chinchilla"`` fits the additive law with ``fit_chinchilla``.
    """
    points = pool_points(runs, axes, tier)
    if objective == "chinchilla":
        return fit_chinchilla(points, axes)
    weight = 1.0 / points["loss_se"].to_numpy() ** 2
    values = {a: points[a].to_numpy().astype(np.float64) for a in axes}
    everything = np.ones(points.height, dtype=bool)
    fitted: dict[str, tuple[_Problem, np.ndarray, float]] = {}
    additive = _Problem(tuple(axes), values, points["loss"].to_numpy(), weight, nested=False)
    theta, rss = additive.fit([np.array(s) for s in itertools.product(ALPHA_STARTS, repeat=len(axes))], everything)
    if "additive" in models:
        fitted["additive"] = (additive, theta, rss)
    if "nested" in models:
        if not {"d_env", "d_task"} <= set(axes):
            raise ValueError("the nested model needs d_env and d_task among the axes")
        nested = _Problem(tuple(axes), values, additive.loss, weight, nested=True)
        fitted["nested"] = (nested, *nested.fit(_nested_starts(nested, theta[: len(axes)]), everything))
    n_points = points.height
    n_params = {m: 1 + len(axes) + len(p.bounds()) for m, (p, _, _) in fitted.items()}
    largest = max(fitted, key=n_params.get)
    spare = n_points - n_params[largest]
    dispersion = max(1.0, fitted[largest][2] / spare) if spare > 0 else 1.0
    rows = []
    for model, (problem, theta, rss) in fitted.items():
        k = n_params[model]
        law = problem.law(theta, problem.project(theta, everything)[1])
        aicc = quasi_aicc(rss, k, n_points, dispersion)
        rows.append(
            {
                "model": model,
                "objective": "wls",
                "status": "ok",
                "n_points": n_points,
                "n_params": k,
                "E": law.E,
                "m_star": law.m_star,
                "k_star": law.k_star,
                "objective_value": rss,
                "dispersion": rss / (n_points - k) if n_points > k else None,
                "aicc": aicc,
                "cv_rmse": _cv_rmse(problem, theta),
                **{f"A_{a}": law.A[a] for a in axes},
                **{f"alpha_{a}": law.alpha[a] for a in axes},
            }
        )
    best_aicc = min(row["aicc"] for row in rows)
    by_model = {row["model"]: row for row in rows}
    prefer_nested = (
        "nested" in by_model
        and "additive" in by_model
        and by_model["additive"]["aicc"] - by_model["nested"]["aicc"] > 2
        and by_model["nested"]["cv_rmse"] < by_model["additive"]["cv_rmse"]
    )
    for row in rows:
        row["delta_aicc"] = row["aicc"] - best_aicc
        row["selected"] = len(rows) == 1 or (row["model"] == "nested") == prefer_nested
    return pl.DataFrame(rows, schema=_schema(axes))


def fitted_law(fit: pl.DataFrame, axes: Sequence[str] = AXES) -> Law:
    """The selected model of a ``fit_joint`` frame as a ``Law``."""
    row = fit.filter(pl.col("selected")).row(0, named=True)
    return Law(
        row["E"], {a: row[f"A_{a}"] for a in axes}, {a: row[f"alpha_{a}"] for a in axes}, row["m_star"], row["k_star"]
    )


def bootstrap_joint(
    runs: pl.DataFrame,
    fit: pl.DataFrame,
    axes: Sequence[str] = AXES,
    *,
    n_boot: int = 200,
    seed: int = 0,
    tier: str = "all",
    episodes: pl.DataFrame | None = None,
) -> list[Law]:
    """The selected model of ``fit`` (a ``fit_joint`` frame of these runs) refitted to each
    two-stage bootstrap replicate of the runs (seeds, then held-out tasks; ``resample``), so that
    what is derived from the law (the recipe) can be re-derived per draw. Each refit starts from
    the full fit: a replicate's optimum lies near it, and one start keeps 200 draws at seconds."""
    ok, _ = usable_runs(runs, tier)
    check_one_setting(ok, free=axes)
    arrays = RunArrays.from_runs(ok, axes)
    tasks = None if episodes is None else task_matrix(episodes, arrays.run_keys, tier)
    row = fit.filter(pl.col("selected")).row(0, named=True)
    values = {a: arrays.points[a].to_numpy().astype(np.float64) for a in axes}
    nested = row["model"] == "nested"
    start = np.array(
        [row[f"alpha_{a}"] for a in axes]
        + ([np.log(row["m_star"])] if nested else [])
        + ([np.log(row["k_star"])] if nested and "d_traj" in axes else [])
    )
    everything = np.ones(arrays.points.height, dtype=bool)
    rng = np.random.default_rng(seed)
    laws = []
    for _ in range(n_boot):
        successes, trials = resample(arrays, rng, tasks)
        stats = point_statistics(arrays.point_index, successes, trials, arrays.points.height)
        problem = _Problem(tuple(axes), values, stats.loss, 1.0 / stats.var_loss, nested=nested)
        theta, _ = problem.fit([start], everything)
        laws.append(problem.law(theta, problem.project(theta, everything)[1]))
    return laws


def _huber_objective(
    theta: np.ndarray, log_x: np.ndarray, log_loss: np.ndarray, delta: float
) -> tuple[float, np.ndarray]:
    """Summed Huber loss of log residuals of ``LSE(e, a_i - alpha_i log x_i)`` and its gradient."""
    K = log_x.shape[1]
    terms = np.column_stack([np.full(len(log_loss), theta[0]), theta[1 : K + 1] - theta[K + 1 :] * log_x])
    residual = special.logsumexp(terms, axis=1) - log_loss
    slope = np.clip(residual, -delta, delta)
    share = special.softmax(terms, axis=1) * slope[:, None]
    gradient = np.concatenate([[share[:, 0].sum()], share[:, 1:].sum(0), -(share[:, 1:] * log_x).sum(0)])
    return float(special.huber(delta, residual).sum()), gradient


def _grid_objective(starts: np.ndarray, log_x: np.ndarray, log_loss: np.ndarray, delta: float) -> np.ndarray:
    """The Huber objective at many starts at once (chunked to bound memory)."""
    K = log_x.shape[1]
    values = []
    for chunk in np.array_split(starts, max(1, len(starts) // 2000)):
        terms = chunk[:, None, 1 : K + 1] - chunk[:, None, K + 1 :] * log_x[None]
        lse = special.logsumexp(
            np.concatenate([np.broadcast_to(chunk[:, None, :1], (*terms.shape[:2], 1)), terms], axis=2), axis=2
        )
        values.append(special.huber(delta, lse - log_loss[None]).sum(axis=1))
    return np.concatenate(values)


def fit_chinchilla(
    points: pl.DataFrame,
    axes: Sequence[str],
    *,
    loss: str = "loss",
    delta: float = 1e-3,
    init_grid: Mapping[str, Sequence[float]] = HOFFMANN_INIT_GRID,
    n_refine: int = 10,
) -> pl.DataFrame:
    """The Chinchilla Approach-3 fit on any frame with ``axes`` columns and a ``loss`` column.

    Returns ``E = exp(e)``, ``A_<axis> = exp(a_i)``, ``alpha_<axis>`` and the summed Huber loss.
    The objective is evaluated at every start of the grid (e x (a, alpha) per axis) and L-BFGS-B
    runs from the ``n_refine`` best: with delta = 1e-3 the loss is nearly L1, so each run is slow and
    running one from every one of Hoffmann's 4,500 starts is out of reach, while on Epoch's Chinchilla
    data the best 10 starts already reach the optimum of the full grid. Only converged runs count (as in Epoch's
    notebook); ``status`` says when none did.
    """
    log_x = np.log(points.select(axes).to_numpy().astype(np.float64))
    log_loss = np.log(points[loss].to_numpy().astype(np.float64))
    K = len(axes)
    per_axis = list(itertools.product(init_grid["a"], init_grid["alpha"]))
    starts = np.array(
        [
            [e, *(a for a, _ in pairs), *(alpha for _, alpha in pairs)]
            for e in init_grid["e"]
            for pairs in itertools.product(per_axis, repeat=K)
        ]
    )
    order = np.argsort(_grid_objective(starts, log_x, log_loss, delta), kind="stable")
    results = [
        optimize.minimize(_huber_objective, start, args=(log_x, log_loss, delta), jac=True, method="L-BFGS-B")
        for start in starts[order[:n_refine]]
    ]
    converged = [r for r in results if r.success]
    best = min(converged or results, key=lambda r: r.fun)
    e, a, alpha = best.x[0], best.x[1 : K + 1], best.x[K + 1 :]
    row = {
        "model": "additive",
        "objective": "chinchilla",
        "status": "ok" if converged else "not_converged",
        "n_points": points.height,
        "n_params": 1 + 2 * K,
        "E": float(np.exp(e)),
        "objective_value": float(best.fun),
        "selected": True,
        **{f"A_{ax}": float(np.exp(a[i])) for i, ax in enumerate(axes)},
        **{f"alpha_{ax}": float(alpha[i]) for i, ax in enumerate(axes)},
    }
    return pl.DataFrame([row], schema=_schema(axes))


def _quasi_binomial(proportion: np.ndarray, trials: np.ndarray, exog: np.ndarray) -> GLMResults:
    """Binomial GLM with the Pearson dispersion, floored at 1 (never less noise than binomial).

    Proportions with ``var_weights = trials``: statsmodels' two-column endog gets ``scale="X2"`` wrong.
    statsmodels (with pandas) is imported here, not with the module: only the pre-test needs it.
    """
    from statsmodels.genmod.families import Binomial
    from statsmodels.genmod.generalized_linear_model import GLM

    model = GLM(proportion, exog, family=Binomial(), var_weights=trials)
    first = model.fit()
    return model.fit(scale=max(1.0, first.pearson_chi2 / first.df_resid))


INTERACTION_SCHEMA = {
    "outer_axis": pl.String,
    "inner_axis": pl.String,
    "outer_value": pl.Float64,
    "inner_slope": pl.Float64,
    "inner_slope_lo": pl.Float64,
    "inner_slope_hi": pl.Float64,
    "beta_interaction": pl.Float64,
    "beta_interaction_se": pl.Float64,
    "f_stat": pl.Float64,
    "p_value": pl.Float64,
    "dispersion": pl.Float64,
}


def interaction_pretest(
    runs: pl.DataFrame,
    axes: Sequence[str] = AXES,
    *,
    interaction: tuple[str, str] = ("d_env", "d_task"),
    tier: str = "all",
) -> pl.DataFrame:
    """Cheap, exact test of an interaction before fitting nonlinear laws.

    Quasi-binomial GLM on run-level success rates weighted by trials: ``logit p = b0 + sum_i b_i ln x_i +
    b_io ln x_outer ln x_inner``; F-test of ``b_io`` on the deviance drop over the Pearson
    dispersion (seeds scatter more than binomially). One row per level of the outer axis with the
    inner axis's logit slope there, ``b_inner + b_io ln x_outer``, and its t-interval.
    """
    ok, _ = usable_runs(runs, tier)
    check_one_setting(ok, free=axes)
    outer, inner = interaction
    logs = {a: np.log(ok[a].to_numpy().astype(np.float64)) for a in axes}
    reduced_exog = np.column_stack([np.ones(ok.height)] + [logs[a] for a in axes])
    full_exog = np.column_stack([reduced_exog, logs[outer] * logs[inner]])
    if np.linalg.matrix_rank(full_exog) < full_exog.shape[1]:
        raise ValueError(f"the runs do not identify a {outer} x {inner} interaction: add a factorial grid")
    trials = ok["trials"].to_numpy().astype(np.float64)
    proportion = ok["successes"].to_numpy() / trials
    full, reduced = (_quasi_binomial(proportion, trials, exog) for exog in (full_exog, reduced_exog))
    f_stat = (reduced.deviance - full.deviance) / full.scale
    inner_index, product_index = 1 + list(axes).index(inner), full_exog.shape[1] - 1
    t_quantile = stats.t.ppf(0.5 + LEVEL / 2, full.df_resid)
    covariance = full.cov_params()
    rows = []
    for level in np.unique(ok[outer].to_numpy()):
        gradient = np.zeros(full_exog.shape[1])
        gradient[[inner_index, product_index]] = 1.0, np.log(level)
        slope, se = float(gradient @ full.params), float(np.sqrt(gradient @ covariance @ gradient))
        rows.append(
            {
                "outer_axis": outer,
                "inner_axis": inner,
                "outer_value": float(level),
                "inner_slope": slope,
                "inner_slope_lo": slope - t_quantile * se,
                "inner_slope_hi": slope + t_quantile * se,
                "beta_interaction": float(full.params[product_index]),
                "beta_interaction_se": float(full.bse[product_index]),
                "f_stat": float(f_stat),
                "p_value": float(stats.f.sf(f_stat, 1, full.df_resid)),
                "dispersion": float(full.scale),
            }
        )
    return pl.DataFrame(rows, schema=INTERACTION_SCHEMA)
