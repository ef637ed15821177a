"""The study's figures, drawn from polars frames the caller prepares (PNG + PDF out); the recipe's
Figures 1 and 5 are in ``recipe_figures``.

* ``figure2`` -- per-axis scaling laws (paper Figure 2): one log-log panel per swept data axis
  (``d_env``, ``d_task``, ``d_traj``), held-out loss ``L = -ln p`` against the axis value, mean +- SE
  per model size, with the log-log line ``L = A x^-alpha`` and its slope and interval in the legend; where
  the floor law ``E + A x^-alpha`` is identified and quasi-AICc prefers it, its curve dashed beside.
* ``figure3`` -- cross-axis interaction (paper Figure 3): held-out success over the
  (``d_env``, ``d_task``) grid as an annotated heatmap, with dashed iso-cost contours of the caller's
  cost model. Cells the study did not run stay blank.
* ``figure4`` -- synthesis collapse (paper Figure 4): success relative to real-only against the
  synthetic-to-real ratio, per axis, with the fitted logistic and r* lines.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import polars as pl
from matplotlib.contour import ContourSet
from matplotlib.lines import Line2D
from matplotlib.ticker import LogFormatter, NullLocator

from axisrl.laws.data import pool_points
from axisrl.report import style
from axisrl.report.compact import SUCCESS_SCALE, bounds_scale, fixed, fixed_interval, number
from axisrl.report.panels import as_float, placeholder, require_columns

__all__ = [
    "AXIS_ORDER",
    "FIT_COLUMNS",
    "POINT_COLUMNS",
    "TREND_COLUMNS",
    "figure2",
    "figure3",
    "figure4",
    "interaction_figure",
    "interaction_grid",
]

AXIS_ORDER = ("d_env", "d_task", "d_traj")
POINT_COLUMNS = ("axis", "x", "series", "loss", "loss_se")
TREND_COLUMNS = ("axis", "n_runs", "slope", "slope_lo", "slope_hi")
FIT_COLUMNS = (
    "axis",
    "series",
    "status",
    "alpha",
    "alpha_lo",
    "alpha_hi",
    "A",
    "floor_alpha",
    "floor_E",
    "floor_A",
    "floor_identified",
    "aicc_prefers",
    "x_min",
    "x_max",
)


class _PlainLog(LogFormatter):
    """Log-axis tick labels as plain numbers (0.6, 10), on the ticks matplotlib would label."""

    def __call__(self, x: float, pos: int | None = None) -> str:
        return f"{x:g}" if super().__call__(x, pos) else ""


def _natural(label: str) -> list:
    """Sort key that orders 'N=64' before 'N=128'."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", label)]


def _fit_label(fit: dict) -> str:
    """Legend text of one sweep's fit: the log-log slope and its interval where known."""
    return f"$\\alpha$ = {fixed_interval(fit['alpha'], as_float(fit['alpha_lo']), as_float(fit['alpha_hi']), 2)}"


def _shows_floor(fit: dict) -> bool:
    """Whether the floor law is drawn: identified, and preferred by quasi-AICc (information only)."""
    return bool(fit["floor_identified"]) and fit["aicc_prefers"] == "floor"


def _floor_label(fit: dict) -> str:
    """Legend text of a drawn floor law: its own exponent (not alpha) and floor."""
    return f"floor law: exponent {fixed(fit['floor_alpha'], 2)}, $E$ = {fixed(fit['floor_E'], 2)}"


def _trend_label(trend: Mapping[str, Any]) -> str:
    """Panel title: held-out success gained per doubling of the axis, its CI and the runs behind it
    (``0`` where a number is zero up to rounding of a success rate), and where the trend's p-value is
    null, that the runs' success has no variance to test."""
    slope, lo, hi = (fixed(trend[c], 3, SUCCESS_SCALE, sign=True) for c in ("slope", "slope_lo", "slope_hi"))
    runs = f"axis sweeps, {trend['n_runs']} runs"
    if "p_value" in trend and trend["p_value"] is None:
        runs += "; no variance: p-value not defined"
    return f"success {slope} per doubling [{lo}, {hi}]\n({runs})"


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
    """Per-axis scaling laws: one log-log panel per axis, points mean +- SE, log-log lines (and floor
    curves where identified and preferred, dashed), and where the points carry ``p_base`` the loss
    of the base the sweep's runs start from (dotted: what RL moved them from).
    ``trends`` (the laws stage's frame), where given, titles each panel with its fitted trend of
    held-out success, the check that success rises at all, which the law's interval may not show."""
    figure2_rows({"": (points, fits, trends)}, png, pdf)


def figure2_rows(
    rows: Mapping[str, tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame | None]], png: Path, pdf: Path
) -> None:
    """``figure2`` with a row of panels per entry of ``rows`` (label -> its points, fits and trends;
    a study across domains has a row per domain, labelled on its y axis), the axes in the same columns."""
    if not rows:
        raise ValueError("no rows to draw")
    present: set[str] = set()
    for points, fits, trends in rows.values():
        require_columns(points, POINT_COLUMNS, "points")
        require_columns(fits, FIT_COLUMNS, "fits")
        if trends is not None:
            require_columns(trends, TREND_COLUMNS, "trends")
        present.update(points["axis"].unique().to_list())
    axes_names = [a for a in AXIS_ORDER if a in present] + sorted(present - set(AXIS_ORDER))
    if not axes_names:
        raise ValueError("points is empty")
    with style.figure_style():
        fig, panels = plt.subplots(
            len(rows),
            len(axes_names),
            figsize=(4.2 * len(axes_names), 3.8 * len(rows)),
            sharey="row",
            squeeze=False,
        )
        for row_panels, (label, (points, fits, trends)) in zip(panels, rows.items()):
            trend_of = {} if trends is None else {row["axis"]: row for row in trends.iter_rows(named=True)}
            for ax, axis in zip(row_panels, axes_names):
                _law_panel(ax, axis, points, fits, trend_of.get(axis))
            row_panels[0].set_ylabel(f"{label}\n{style.LOSS_LABEL}" if label else style.LOSS_LABEL)
    style.save(fig, png, pdf)


def _law_panel(ax: Any, axis: str, points: pl.DataFrame, fits: pl.DataFrame, trend: Mapping[str, Any] | None) -> None:
    """One axis of Figure 2: every series' points, its fitted line or floor curve and its base."""
    series_names = sorted(points["series"].unique().to_list(), key=_natural)
    color = {s: style.COLORS[i % len(style.COLORS)] for i, s in enumerate(series_names)}
    for series in series_names:
        pts = points.filter((pl.col("axis") == axis) & (pl.col("series") == series)).sort("x")
        if pts.is_empty():
            continue
        rows = fits.filter((pl.col("axis") == axis) & (pl.col("series") == series))
        if rows.height > 1:
            raise ValueError(f"fits has {rows.height} rows for ({axis}, {series}); one per sweep expected")
        label = series
        fit = rows.row(0, named=True) if rows.height else None
        if fit is not None and fit["status"] == "ok":
            x = np.geomspace(fit["x_min"], fit["x_max"], 100)
            ax.plot(x, fit["A"] * x ** -fit["alpha"], color=color[series])
            label += f": {_fit_label(fit)}"
            if _shows_floor(fit):
                floor = fit["floor_E"] + fit["floor_A"] * x ** -fit["floor_alpha"]
                ax.plot(x, floor, color=color[series], linestyle="--", label=_floor_label(fit))
        elif fit is not None and fit["status"] == "too_few_points":
            label += ": too few points"
        ax.errorbar(
            pts["x"].to_numpy(),
            pts["loss"].to_numpy(),
            yerr=pts["loss_se"].to_numpy(),
            fmt="o",
            color=color[series],
            label=label,
        )
        base = pts["p_base"].drop_nulls() if "p_base" in pts.columns else pl.Series([], dtype=pl.Float64)
        if base.len() and base[0] > 0:
            ax.axhline(-np.log(base[0]), color=color[series], linestyle=":", label=f"{series}: its base")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(_PlainLog())
    ax.yaxis.set_minor_formatter(_PlainLog(labelOnlyBase=False))
    grid = sorted(points.filter(pl.col("axis") == axis)["x"].unique().to_list())
    ax.set_xticks(grid, [f"{v:g}" for v in grid])  # the sweep's own points, not a log axis's decades
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel(style.AXIS_LABELS.get(axis, axis))
    ax.legend(loc="best")
    if trend is not None:
        ax.set_title(_trend_label(trend), fontsize="small")


def figure3(grid: pl.DataFrame, png: Path, pdf: Path, *, value: str = "p", cost: str = "cost") -> None:
    """Heatmap of ``value`` over the (d_env, d_task) grid, annotated, with dashed iso-``cost`` contours."""
    require_columns(grid, ("d_env", "d_task", value, cost), "grid")
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
        z[i, j], c[i, j] = as_float(row[value]), as_float(row[cost])

    with style.figure_style():
        fig, ax = plt.subplots(figsize=(1.0 * len(envs) + 2.6, 0.8 * len(tasks) + 1.8))
        image = ax.imshow(z, origin="lower", cmap="viridis", aspect="auto")
        ax.grid(False)
        for (i, j), v in np.ndenumerate(z):
            if not math.isnan(v):
                r, g, b, _ = image.cmap(image.norm(v))
                ink = "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"
                ax.text(j, i, fixed(v, 2, SUCCESS_SCALE), ha="center", va="center", fontsize=9, color=ink)
        levels = _cost_levels(c)
        if len(envs) > 1 and len(tasks) > 1 and levels.size:
            lines = ax.contour(
                np.ma.masked_invalid(c), levels=levels, colors="black", linestyles="dashed", linewidths=1.0
            )
            scale = bounds_scale(*levels)
            ax.clabel(lines, fmt=lambda v: number(float(v), scale), fontsize=8, manual=_label_spots(lines))
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


def figure4(curves: pl.DataFrame, collapse: pl.DataFrame, threshold: float, png: Path | str, pdf: Path | str) -> None:
    """Synthesis collapse per axis (paper Figure 4): normalised held-out success ``s(r)`` against
    the synthetic-to-real ratio (log x), one panel per axis and one series per source and real
    amount, with the fitted logistic and a dashed line at each uncensored ``r*``. A study without
    mixture runs gets a panel that says so."""
    if "ratio" not in curves.columns:
        placeholder("Figure 4: this study has no mixture runs (study.families.mixtures)", png, pdf)
        return
    from axisrl.pricing import logistic

    require_columns(curves, ("source", "axis", "real_amount", "ratio", "s", "s_lo", "s_hi"), "curves")
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
