"""The paper's figures, drawn from polars frames the caller prepares (PNG + PDF out).

* ``figure2`` -- per-axis scaling laws (paper Figure 2): one log-log panel per swept data axis
  (``d_env``, ``d_task``, ``d_traj``), held-out loss ``L = -ln p`` against the axis value, mean +- SE
  per model size, with the selected fit ``L = E + A x^-alpha`` and its exponent and CI in the legend.
* ``figure3`` -- cross-axis interaction (paper Figure 3): held-out success over the
  (``d_env``, ``d_task``) grid as an annotated heatmap, with dashed iso-cost contours of the caller's
  cost model. Cells the study did not run stay blank.
* ``figure4`` -- synthesis collapse (paper Figure 4): success relative to real-only against the
  synthetic-to-real ratio, per axis, with the fitted logistic and r* lines.
* ``figure1`` -- same compute, different outcomes (paper Figure 1): at the largest pre-registered
  compute level, measured held-out success per strategy (bars, 95% CI) against its prediction, and
  one pie per strategy of its cost shares.
* ``figure5`` -- the recipe (paper Figure 5): (a) the optimal allocation of each axis against the
  budget with its fitted exponent, (b) held-out success against the budget per strategy, predicted
  and measured, with the out-of-range validation point and its pre-registered interval.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import polars as pl
from matplotlib.contour import ContourSet
from matplotlib.lines import Line2D
from matplotlib.ticker import LogFormatter

from axisrl.laws.data import pool_points
from axisrl.report import style

AXIS_ORDER = ("d_env", "d_task", "d_traj")
POINT_COLUMNS = ("axis", "x", "series", "loss", "loss_se")
TREND_COLUMNS = ("axis", "n_runs", "slope", "slope_lo", "slope_hi")
FIT_COLUMNS = (
    "axis",
    "series",
    "model",
    "status",
    "selected",
    "alpha",
    "alpha_lo",
    "alpha_hi",
    "E",
    "A",
    "x_min",
    "x_max",
)


class _PlainLog(LogFormatter):
    """Log-axis tick labels as plain numbers (0.6, 10), on the ticks matplotlib would label."""

    def __call__(self, x: float, pos: int | None = None) -> str:
        return f"{x:g}" if super().__call__(x, pos) else ""


def _require(frame: pl.DataFrame, columns: tuple[str, ...], name: str) -> None:
    """Raise ``ValueError`` naming the columns of ``columns`` that ``frame`` lacks."""
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{name} is missing required column(s): {', '.join(missing)}")


def _num(value: float | None, default: float = math.nan) -> float:
    """``value`` as a float, ``default`` where it is null or NaN."""
    return default if value is None or math.isnan(value) else float(value)


def _natural(label: str) -> list:
    """Sort key that orders 'N=64' before 'N=128'."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", label)]


def _fit_label(fit: dict) -> str:
    """Legend text of one selected fit: exponent, its CI where known, and the floor E if fitted."""
    text = f"$\\alpha$ = {fit['alpha']:.2f}"
    lo, hi = _num(fit["alpha_lo"]), _num(fit["alpha_hi"])
    if not (math.isnan(lo) or math.isnan(hi)):
        text += f" [{lo:.2f}, {hi:.2f}]"
    if fit["model"] == "floor":
        text += f", $E$ = {_num(fit['E'], 0.0):.2f}"
    return text


def _trend_label(trend: dict) -> str:
    """Panel title: held-out success gained per doubling of the axis, its CI and the runs behind it."""
    return (
        f"success {trend['slope']:+.3f} per doubling [{trend['slope_lo']:+.3f}, {trend['slope_hi']:+.3f}]"
        f"\n(axis sweeps, {trend['n_runs']} runs)"
    )


def _cost_levels(cost: np.ndarray) -> np.ndarray:
    """Contour levels: the 20/40/60/80 % quantiles of the finite costs, strictly inside their range."""
    finite = cost[np.isfinite(cost)]
    if finite.size == 0:
        return finite
    levels = np.unique(np.quantile(finite, [0.2, 0.4, 0.6, 0.8]))
    return levels[(levels > finite.min()) & (levels < finite.max())]


def _label_spots(lines: ContourSet) -> list[tuple[float, float]]:
    """Per contour level, the point of its line farthest from any cell centre (where values are
    written), so contour labels do not cover the cell annotations."""
    spots = []
    for segments in lines.allsegs:
        pts = [np.linspace(a, b, 12) for seg in segments for a, b in zip(seg[:-1], seg[1:])]
        if pts:
            pts = np.concatenate(pts)
            spots.append(tuple(pts[np.argmax(np.hypot(*(pts - np.round(pts)).T))]))
    return spots


def figure2(points: pl.DataFrame, fits: pl.DataFrame, png: Path, pdf: Path, trends: pl.DataFrame | None = None) -> None:
    """Per-axis scaling laws: one log-log panel per axis, points mean +- SE, selected fit curves.
    ``trends`` (the laws stage's frame), where given, titles each panel with its fitted trend of
    held-out success, the check that success rises at all, which the law's interval may not show."""
    _require(points, POINT_COLUMNS, "points")
    _require(fits, FIT_COLUMNS, "fits")
    trend_of: dict[str, dict] = {}
    if trends is not None:
        _require(trends, TREND_COLUMNS, "trends")
        trend_of = {row["axis"]: row for row in trends.iter_rows(named=True)}
    present = points["axis"].unique().to_list()
    axes_names = [a for a in AXIS_ORDER if a in present] + sorted(set(present) - set(AXIS_ORDER))
    if not axes_names:
        raise ValueError("points is empty")
    series_names = sorted(points["series"].unique().to_list(), key=_natural)
    color = {s: style.COLORS[i % len(style.COLORS)] for i, s in enumerate(series_names)}

    with style.figure_style():
        fig, panels = plt.subplots(1, len(axes_names), figsize=(4.2 * len(axes_names), 3.8), sharey=True, squeeze=False)
        for ax, axis in zip(panels[0], axes_names):
            for series in series_names:
                pts = points.filter((pl.col("axis") == axis) & (pl.col("series") == series)).sort("x")
                if pts.is_empty():
                    continue
                rows = fits.filter((pl.col("axis") == axis) & (pl.col("series") == series))
                chosen = rows.filter(pl.col("selected") & (pl.col("status") == "ok"))
                if chosen.height > 1:
                    raise ValueError(f"fits selects {chosen.height} models for ({axis}, {series})")
                label = series
                if chosen.height == 1:
                    fit = chosen.row(0, named=True)
                    x = np.geomspace(fit["x_min"], fit["x_max"], 100)
                    ax.plot(x, _num(fit["E"], 0.0) + fit["A"] * x ** -fit["alpha"], color=color[series])
                    label += f": {_fit_label(fit)}"
                elif (rows["status"] == "too_few_points").any():
                    label += ": too few points"
                ax.errorbar(
                    pts["x"].to_numpy(),
                    pts["loss"].to_numpy(),
                    yerr=pts["loss_se"].to_numpy(),
                    fmt="o",
                    color=color[series],
                    label=label,
                )
            ax.set_xscale("log")
            ax.set_yscale("log")
            for scale in (ax.xaxis, ax.yaxis):
                scale.set_major_formatter(_PlainLog())
                scale.set_minor_formatter(_PlainLog(labelOnlyBase=False))
            ax.set_xlabel(style.AXIS_LABELS.get(axis, axis))
            ax.legend(loc="best")
            if axis in trend_of:
                ax.set_title(_trend_label(trend_of[axis]), fontsize="small")
        panels[0][0].set_ylabel(style.LOSS_LABEL)
    style.save(fig, png, pdf)


def figure3(grid: pl.DataFrame, png: Path, pdf: Path, *, value: str = "p", cost: str = "cost") -> None:
    """Heatmap of ``value`` over the (d_env, d_task) grid, annotated, with dashed iso-``cost`` contours."""
    _require(grid, ("d_env", "d_task", value, cost), "grid")
    if grid.is_empty():
        raise ValueError("grid is empty")
    if grid.select("d_env", "d_task").is_duplicated().any():
        raise ValueError("grid has more than one row for some (d_env, d_task) cell")
    envs = sorted(grid["d_env"].unique().to_list())
    tasks = sorted(grid["d_task"].unique().to_list())
    z = np.full((len(tasks), len(envs)), np.nan)
    c = np.full_like(z, np.nan)
    for row in grid.iter_rows(named=True):
        i, j = tasks.index(row["d_task"]), envs.index(row["d_env"])
        z[i, j], c[i, j] = _num(row[value]), _num(row[cost])

    with style.figure_style():
        fig, ax = plt.subplots(figsize=(1.0 * len(envs) + 2.6, 0.8 * len(tasks) + 1.8))
        image = ax.imshow(z, origin="lower", cmap="viridis", aspect="auto")
        ax.grid(False)
        for (i, j), v in np.ndenumerate(z):
            if not math.isnan(v):
                r, g, b, _ = image.cmap(image.norm(v))
                ink = "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=9, color=ink)
        levels = _cost_levels(c)
        if len(envs) > 1 and len(tasks) > 1 and levels.size:
            lines = ax.contour(
                np.ma.masked_invalid(c), levels=levels, colors="black", linestyles="dashed", linewidths=1.0
            )
            ax.clabel(lines, fmt=lambda v: f"{v:.3g}", fontsize=8, manual=_label_spots(lines))
            ax.legend(
                handles=[Line2D([], [], color="black", linestyle="dashed", label=f"iso-{cost}")],
                loc="lower left",
                bbox_to_anchor=(0, 1),
                fontsize=8,
            )
        ax.set_xticks(range(len(envs)), [f"{v:g}" for v in envs])
        ax.set_yticks(range(len(tasks)), [f"{v:g}" for v in tasks])
        ax.set_xlabel(style.AXIS_LABELS["d_env"])
        ax.set_ylabel(style.AXIS_LABELS["d_task"])
        fig.colorbar(image, ax=ax, label=style.SUCCESS_LABEL)
    style.save(fig, png, pdf)


def interaction_grid(runs: pl.DataFrame, tier: str, cost_per_env: float, cost_per_task: float) -> pl.DataFrame:
    """Figure 3's cells from collected runs: the interaction family's (d_env, d_task) designs with
    seed-pooled held-out success ``p`` on ``tier``, its binomial SE, and the data cost
    ``cost_per_env * d_env + cost_per_task * d_task``. Failed runs are left out."""
    cells = runs.filter(pl.col("families").list.contains("interaction"))
    if not cells.height:
        return pl.DataFrame(
            schema={"d_env": pl.Int64, "d_task": pl.Int64, "p": pl.Float64, "se": pl.Float64, "cost": pl.Float64}
        )
    grid = pool_points(cells, ["d_env", "d_task"], tier)
    return grid.select(
        "d_env",
        "d_task",
        "p",
        se=(pl.col("p") * (1 - pl.col("p")) / pl.col("trials")).sqrt(),
        cost=cost_per_env * pl.col("d_env") + cost_per_task * pl.col("d_task"),
    ).sort("d_env", "d_task")


def interaction_figure(
    runs: pl.DataFrame, tier: str, cost_per_env: float, cost_per_task: float, png: Path | str, pdf: Path | str
) -> None:
    """Figure 3 from the collected runs (``interaction_grid``), or a panel saying the study has none."""
    grid = interaction_grid(runs, tier, cost_per_env, cost_per_task)
    if grid.height:
        figure3(grid, png, pdf)
    else:
        placeholder("Figure 3: this study has no interaction-family runs (study.families.interaction)", png, pdf)


def placeholder(message: str, png: Path, pdf: Path) -> None:
    """A figure target whose study has no runs to draw: an empty panel that says why."""
    with style.figure_style():
        fig, ax = plt.subplots(figsize=(6, 2))
        ax.axis("off")
        ax.text(0.5, 0.5, message, ha="center", va="center", wrap=True)
    style.save(fig, png, pdf)


def figure4(curves: pl.DataFrame, collapse: pl.DataFrame, threshold: float, png: Path | str, pdf: Path | str) -> None:
    """Synthesis collapse per axis (paper Figure 4): normalised held-out success ``s(r)`` against
    the synthetic-to-real ratio (log x), one panel per axis and one series per source and real
    amount, with the fitted logistic and a dashed line at each uncensored ``r*``. A study without
    mixture runs gets a panel that says so."""
    if "ratio" not in curves.columns:
        placeholder("Figure 4: this study has no mixture runs (study.families.mixtures)", png, pdf)
        return
    from axisrl.pricing import logistic

    _require(curves, ("source", "axis", "real_amount", "ratio", "s", "s_lo", "s_hi"), "curves")
    axes_present = [a for a in AXIS_ORDER if a in set(curves["axis"])]
    fits = (
        {
            (r["source"], r["real_amount"]): r
            for r in collapse.iter_rows(named=True)
            if r.get("criterion") == "threshold" and r.get("status") == "ok"
        }
        if "criterion" in collapse.columns
        else {}
    )
    with style.figure_style():
        fig, panels = plt.subplots(
            1, len(axes_present), figsize=(4.6 * len(axes_present), 3.8), squeeze=False, sharey=True
        )
        for panel, axis in zip(panels[0], axes_present):
            mine = curves.filter(pl.col("axis") == axis)
            series = mine.select("source", "real_amount").unique(maintain_order=True).iter_rows()
            for (source, amount), color in zip(series, style.COLORS):
                points = mine.filter((pl.col("source") == source) & (pl.col("real_amount") == amount)).sort("ratio")
                ratio, s = points["ratio"].to_numpy(), points["s"].to_numpy()
                error = np.vstack([s - points["s_lo"].to_numpy(), points["s_hi"].to_numpy() - s])
                panel.errorbar(ratio, s, yerr=error, fmt="o", color=color, label=f"{source} ($D_r$={amount})")
                fit = fits.get((source, amount))
                if fit is not None:
                    grid = np.exp(np.linspace(np.log(ratio.min()), np.log(ratio.max()), 200))
                    panel.plot(
                        grid, logistic(grid, fit["lower"], fit["upper"], fit["slope"], fit["r_mid"]), color=color
                    )
                    if fit["r_star"] is not None:
                        panel.axvline(fit["r_star"], color=color, linestyle="--", linewidth=1.0)
            panel.axhline(1.0, color="grey", linewidth=0.8)
            panel.axhline(threshold, color="grey", linewidth=0.8, linestyle=":")
            panel.set_xscale("log")
            panel.xaxis.set_major_formatter(_PlainLog())
            panel.set_xlabel(f"synthetic-to-real ratio $r$ on {style.AXIS_LABELS[axis]}")
            panel.legend(loc="lower left")
        panels[0][0].set_ylabel("success relative to real-only, $p(r)/p(0)$")
    style.save(fig, png, pdf)


RECIPE_AXIS_ORDER = ("width", "d_env", "d_task", "d_traj")
STRATEGY_ORDER = ("recipe", "trajectories_only", "chinchilla_transfer")
STRATEGY_LABELS = {
    "recipe": "recipe",
    "trajectories_only": "trajectories only",
    "chinchilla_transfer": "Chinchilla transfer",
}
STRATEGY_COLORS = {
    "recipe": style.COLORS[0],
    "trajectories_only": style.COLORS[1],
    "chinchilla_transfer": style.COLORS[2],
}
RECIPE_AXIS_COLORS = {
    "width": style.COLORS[7],
    "d_env": style.COLORS[3],
    "d_task": style.COLORS[4],
    "d_traj": style.COLORS[5],
}
"""Figures 1 and 5: one colour per strategy and one per axis, the same in both figures."""
_SHORT_AXIS = {"width": "$N$", "d_env": "$D_E$", "d_task": "$D_T$", "d_traj": "$D_\\tau$"}


def _strategies_in(frame: pl.DataFrame) -> list[str]:
    """The strategies of ``frame`` in the paper's order, unknown ones after (sorted)."""
    present = set(frame["strategy"].unique().to_list())
    return [s for s in STRATEGY_ORDER if s in present] + sorted(present - set(STRATEGY_ORDER))


def _strategy_color(strategy: str, order: list[str]) -> str:
    return STRATEGY_COLORS.get(strategy, style.COLORS[(3 + order.index(strategy)) % len(style.COLORS)])


def _has_measurements(frame: pl.DataFrame) -> bool:
    return "p" in frame.columns and frame["p"].cast(pl.Float64).fill_nan(None).drop_nulls().len() > 0


def _slope_label(axis: str, row: dict | None) -> str:
    """Legend text of one axis of Figure 5a: its OLS exponent and bootstrap interval, or "pinned"."""
    if row is None or row.get("slope") is None:
        return axis
    if row.get("pinned"):
        return f"{axis}: {row['slope']:.2f} (pinned)"
    text = f"{axis}: {row['slope']:.2f}"
    if row.get("identified") is False:
        return text + " (not identified: no effect in the law)"
    lo, hi = _num(row.get("slope_lo")), _num(row.get("slope_hi"))
    if not (math.isnan(lo) or math.isnan(hi)):
        text += f" [{lo:.2f}, {hi:.2f}]"
    return text


def figure5(
    path: pl.DataFrame,
    exponents: pl.DataFrame,
    curves: pl.DataFrame,
    measured: pl.DataFrame,
    png: Path | str,
    pdf: Path | str,
) -> None:
    """The recipe (paper Figure 5). (a) The optimal allocation of each axis against the budget
    (log-log) along the recipe path, with the OLS exponent and its bootstrap interval in the legend,
    and the rounded recipe designs that were trained as points. (b) Held-out success against the
    budget (log x) per strategy: predicted curves, measured success (95% CI, slightly jittered in x
    so strategies do not overlap) and the validation point (black star) with its pre-registered
    prediction interval. ``measured`` may lack the measurement columns (predictions only)."""
    _require(path, ("compute", "currency", *RECIPE_AXIS_ORDER), "path")
    _require(exponents, ("axis", "slope"), "exponents")
    _require(curves, ("strategy", "compute", "predicted_success"), "curves")
    _require(measured, ("role", "strategy", "compute", *RECIPE_AXIS_ORDER), "measured")
    if path.is_empty():
        raise ValueError("path is empty")
    path = path.sort("compute")
    currency = path["currency"][0]
    fits = {row["axis"]: row for row in exponents.iter_rows(named=True)}
    strategy_rows = measured.filter(pl.col("role") == "strategy")
    order = _strategies_in(pl.concat([curves.select("strategy"), strategy_rows.select("strategy")]))
    measured_p = _has_measurements(measured)

    with style.figure_style():
        fig, (left, right) = plt.subplots(1, 2, figsize=(11.0, 4.4))
        # (a) allocation along the optimal path
        compute = path["compute"].to_numpy()
        trained = strategy_rows.filter(pl.col("strategy") == "recipe").sort("compute")
        for axis in RECIPE_AXIS_ORDER:
            color = RECIPE_AXIS_COLORS[axis]
            left.plot(
                compute, path[axis].to_numpy().astype(np.float64), color=color, label=_slope_label(axis, fits.get(axis))
            )
            if trained.height:
                left.plot(
                    trained["compute"].to_numpy(),
                    trained[axis].to_numpy().astype(np.float64),
                    "o",
                    color=color,
                    markerfacecolor="white",
                    markeredgewidth=1.4,
                )
        left.set_xscale("log")
        left.set_yscale("log")
        left.set_xlabel(f"compute budget $C$ ({currency})")
        left.set_ylabel("compute-optimal allocation $x^*$")
        left.set_title("(a) optimal allocation; legend: exponent $d\\ln x^*/d\\ln C$", fontsize=10)
        handles, labels = left.get_legend_handles_labels()
        if trained.height:
            handles.append(
                Line2D([], [], linestyle="none", marker="o", color="grey", markerfacecolor="white", markeredgewidth=1.4)
            )
            labels.append("trained recipe designs (rounded)")
        left.legend(handles, labels, loc="best")

        # (b) held-out success per strategy
        n = len(order)
        for k, strategy in enumerate(order):
            color = _strategy_color(strategy, order)
            line = (
                curves.filter(pl.col("strategy") == strategy)
                .with_columns(pl.col("predicted_success").fill_nan(None))
                .drop_nulls("predicted_success")
                .sort("compute")
            )
            if line.height:
                right.plot(line["compute"].to_numpy(), line["predicted_success"].to_numpy(), color=color)
            if not measured_p:
                continue
            points = (
                strategy_rows.filter(pl.col("strategy") == strategy)
                .with_columns(pl.col("p").fill_nan(None))
                .drop_nulls("p")
                .sort("compute")
            )
            if points.is_empty():
                continue
            jitter = float(np.exp(0.035 * (k - (n - 1) / 2)))
            p = points["p"].to_numpy().astype(np.float64)
            error = (
                1.96 * points["p_se"].fill_null(np.nan).to_numpy().astype(np.float64)
                if "p_se" in points.columns
                else None
            )
            right.errorbar(_spent(points) * jitter, p, yerr=error, fmt="o", color=color)
        validation = measured.filter(pl.col("role") == "validation")
        for row in validation.iter_rows(named=True):
            if row.get("success_lo") is not None and row.get("success_hi") is not None:
                right.vlines(row["compute"], row["success_lo"], row["success_hi"], color="black", linewidth=2.2)
                right.plot([row["compute"]], [row["predicted_success"]], marker="_", markersize=14, color="black")
            if measured_p and row.get("p") is not None and not math.isnan(row["p"]):
                right.plot(
                    [row.get("total_cost") or row["compute"]],
                    [row["p"]],
                    marker="*",
                    markersize=14,
                    color="black",
                    linestyle="none",
                )
        right.set_xscale("log")
        right.set_xlabel(f"compute $C$ ({currency}), measured points at what the runs spent")
        right.set_ylabel(style.SUCCESS_LABEL)
        right.set_title("(b) predicted (lines) and measured (points) success", fontsize=10)
        handles = [Line2D([], [], color=_strategy_color(s, order), label=STRATEGY_LABELS.get(s, s)) for s in order]
        if measured_p:
            handles.append(Line2D([], [], linestyle="none", marker="o", color="grey", label="measured, 95% CI"))
        if validation.height:
            handles.append(
                Line2D(
                    [],
                    [],
                    color="black",
                    marker="*",
                    markersize=10,
                    linewidth=2.2,
                    label="validation: measured, prediction interval"
                    if measured_p
                    else "validation: prediction interval",
                )
            )
        right.legend(handles=handles, loc="best")
    style.save(fig, png, pdf)


def _spent(points: pl.DataFrame) -> np.ndarray:
    """Where measured points sit on the compute axis: what the runs spent (``total_cost``, executed
    plus declared prices), or their budget where the frame predates that column."""
    column = "total_cost" if "total_cost" in points.columns else "compute"
    return points[column].to_numpy().astype(np.float64)


def figure1(measured: pl.DataFrame, png: Path | str, pdf: Path | str) -> None:
    """Same compute, different outcomes (paper Figure 1): at the largest compute level of the
    strategy runs, one bar per strategy of its measured held-out success (95% CI) with the law's
    prediction and pre-registered interval beside it, and below, one pie per strategy of its cost
    shares ``eps_i / C`` (zero shares left out). Without any measured success: a placeholder."""
    _require(measured, ("role", "strategy", "compute"), "measured")
    rows = measured.filter(pl.col("role") == "strategy")
    if rows.is_empty() or not _has_measurements(rows):
        placeholder("Figure 1: no strategy run has a measured held-out success yet", png, pdf)
        return
    top = rows["compute"].max()
    rows = rows.filter(pl.col("compute") >= top * (1 - 1e-9))
    order = _strategies_in(rows)
    currency = rows["currency"][0] if "currency" in rows.columns else ""
    n = len(order)

    with style.figure_style():
        fig = plt.figure(figsize=(max(6.0, 2.6 * n), 6.6))
        grid = fig.add_gridspec(2, n, height_ratios=[3.0, 2.0])
        bars = fig.add_subplot(grid[0, :])
        ceiling, ticks = 0.0, []
        for k, strategy in enumerate(order):
            row = rows.filter(pl.col("strategy") == strategy).row(0, named=True)
            color = _strategy_color(strategy, order)
            p = _num(row.get("p"))
            if math.isnan(p):
                bars.text(k, 0.02, "not measured", ha="center", va="bottom", rotation=90, fontsize=9)
            else:
                error = 1.96 * _num(row.get("p_se"), 0.0)
                bars.bar(k, p, width=0.6, color=color, alpha=0.85)
                bars.errorbar(k, p, yerr=error, fmt="none", color="black")
                bars.text(k - 0.04, p + error + 0.01, f"{p:.2f}", ha="right", va="bottom", fontsize=9)
                ceiling = max(ceiling, p + error)
            predicted = _num(row.get("predicted_success"))
            if not math.isnan(predicted):
                lo, hi = _num(row.get("success_lo"), predicted), _num(row.get("success_hi"), predicted)
                bars.errorbar(
                    k + 0.2,
                    predicted,
                    yerr=[[predicted - lo], [hi - predicted]],
                    fmt="D",
                    color="black",
                    markerfacecolor="white",
                    markersize=6,
                )
                ceiling = max(ceiling, hi)
            design = "  ".join(f"{_SHORT_AXIS[a]}={row[a]:g}" for a in RECIPE_AXIS_ORDER if row.get(a) is not None)
            ticks.append(f"{STRATEGY_LABELS.get(strategy, strategy)}\n{design}")
        bars.set_xticks(range(n), ticks, fontsize=8)
        bars.set_xlim(-0.6, n - 0.4)
        bars.set_ylim(0.0, min(1.05, max(ceiling, 0.05) * 1.2))
        bars.set_ylabel(style.SUCCESS_LABEL)
        factor = rows["compute_factor"][0] if "compute_factor" in rows.columns else None
        title = f"same compute $C$ = {top:.3g} {currency}"
        if factor is not None:
            title += f" ({factor:g}x the centre design's cost)"
        bars.set_title(title)
        bars.legend(
            handles=[
                plt.Rectangle((0, 0), 1, 1, color="grey", alpha=0.85, label="measured (95% CI)"),
                Line2D(
                    [],
                    [],
                    linestyle="none",
                    marker="D",
                    color="black",
                    markerfacecolor="white",
                    label="predicted (95% prediction interval)",
                ),
            ],
            loc="upper right",
        )

        for k, strategy in enumerate(order):
            pie = fig.add_subplot(grid[1, k])
            row = rows.filter(pl.col("strategy") == strategy).row(0, named=True)
            shares = [(a, _num(row.get(f"share_{a}"), 0.0)) for a in RECIPE_AXIS_ORDER]
            shares = [(a, s) for a, s in shares if s > 0]
            if not shares:
                pie.axis("off")
                pie.text(0.5, 0.5, "no cost shares", ha="center", va="center")
                continue
            total = sum(s for _, s in shares)
            pie.pie(
                [s for _, s in shares],
                colors=[RECIPE_AXIS_COLORS[a] for a, _ in shares],
                labels=[f"{_SHORT_AXIS[a]} {s:.2f}" if s / total >= 0.04 else "" for a, s in shares],
                labeldistance=1.12,
                startangle=90,
                counterclock=False,
                wedgeprops={"linewidth": 0.8, "edgecolor": "white"},
                textprops={"fontsize": 8},
            )
            pie.set_title(STRATEGY_LABELS.get(strategy, strategy), fontsize=10, color=_strategy_color(strategy, order))
            pie.set_aspect("equal")
        sums = [sum(_num(row.get(f"share_{a}"), 0.0) for a in RECIPE_AXIS_ORDER) for row in rows.iter_rows(named=True)]
        legend_title = "cost share $\\epsilon_i/C = \\partial \\ln C / \\partial \\ln x_i$ by axis"
        if any(abs(total - 1) > 0.01 for total in sums):
            legend_title += " (shares overlap where one cost term grows with several axes; pies normalise them)"
        fig.legend(
            handles=[
                plt.Rectangle((0, 0), 1, 1, color=RECIPE_AXIS_COLORS[a], label=style.AXIS_LABELS.get(a, a))
                for a in RECIPE_AXIS_ORDER
            ],
            loc="outside lower center",
            ncols=4,
            title=legend_title,
            fontsize=8,
            title_fontsize=9,
        )
    style.save(fig, png, pdf)
