"""Figure ``fig_curves``: the learning curves of each axis sweep's points on V, with their saturating fits.

One panel per swept axis (compute on a log scale, so the start at ``C = 0`` is left out and each point's
``R0`` drawn as a dotted level): every point's mean V success over its seeds at each evaluation, and its
seed-pooled fit ``R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)`` (``axisrl.laws.curves``) as a line, with
``A`` and its interval in the legend; a point whose fit is not identified shows its dots and its status.
Without sweeps (a user's curves without axis amounts), one panel of every design.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import polars as pl

from axisrl.laws.curve_laws import axes_from_runs
from axisrl.laws.curves import saturating
from axisrl.report import style
from axisrl.report.compact import SUCCESS_SCALE, fixed
from axisrl.report.panels import placeholder, require_columns

__all__ = ["curve_figure"]

CURVE_COLUMNS = ("point_key", "update", "compute", "p_V")
FIT_COLUMNS = ("point_key", "status", "r0", "A", "A_lo", "A_hi", "B", "C_mid")
AXIS_ORDER = ("d_env", "d_task", "d_traj")


def _legend(label: str, fit: dict) -> str:
    if fit.get("A") is None:
        return f"{label}: {fit.get('status', 'no fit')}"
    text = f"{label}: A = {fixed(fit['A'], 2, SUCCESS_SCALE)}"  # a success rate: a residue prints 0, never -0.00
    if fit.get("A_lo") is not None and fit.get("A_hi") is not None:
        text += f" [{fixed(fit['A_lo'], 2, SUCCESS_SCALE)}, {fixed(fit['A_hi'], 2, SUCCESS_SCALE)}]"
    return text


def _panel(ax: plt.Axes, curves: pl.DataFrame, fits: dict[str, dict], members: list[tuple[str, str]]) -> None:
    """Draw the points ``members`` ((point_key, label) in order) on one panel."""
    for colour, (point, label) in zip(style.COLORS * 4, members):
        mean = (
            curves.filter((pl.col("point_key") == point) & (pl.col("compute") > 0))
            .group_by("update")
            .agg(pl.col("compute").mean(), pl.col("p_V").mean())
            .sort("compute")
        )
        fit = fits.get(point, {})
        ax.plot(mean["compute"], mean["p_V"], "o", color=colour, alpha=0.8, label=_legend(label, fit))
        if mean.is_empty():
            continue
        grid = np.geomspace(float(mean["compute"].min()), float(mean["compute"].max()), 100)
        if fit.get("r0") is not None:
            ax.axhline(fit["r0"], color=colour, linestyle=":", linewidth=0.9)
        if fit.get("A") is not None and fit.get("C_mid") is not None:
            ax.plot(grid, saturating(grid, fit["r0"], fit["A"], fit["B"], fit["C_mid"]), "-", color=colour)
        elif fit.get("A") is not None:  # the rise is unresolved: only the plateau is known
            ax.axhline(fit["A"], color=colour, linestyle="--", linewidth=1.0)
    ax.set_xscale("log")
    ax.set_xlabel("compute (FLOPs)")
    ax.legend(loc="lower right")


def curve_figure(
    curves: pl.DataFrame,
    fits: pl.DataFrame,
    png: Path | str,
    pdf: Path | str,
    axes: pl.DataFrame | None = None,
    runs: pl.DataFrame | None = None,
) -> None:
    """Per axis sweep, the points' mean curves (``curves``: the curve frame) and their fits (``fits``:
    ``fit_points``). The sweeps are ``axes`` (``point_key, axis, amount``), else those of ``runs`` (the
    collected runs: ``curve_laws.axes_from_runs``); neither: one panel of every point."""
    require_columns(curves, CURVE_COLUMNS, "curves")
    require_columns(fits, FIT_COLUMNS, "fits")
    if curves.is_empty():
        placeholder("no learning curves to draw", Path(png), Path(pdf))
        return
    if axes is None and runs is not None:
        axes = axes_from_runs(runs)
    by_point = {row["point_key"]: row for row in fits.iter_rows(named=True)}
    if axes is None or axes.is_empty():
        panels = {"every design": [(p, p) for p in sorted(curves["point_key"].unique().to_list())]}
    else:
        order = {a: i for i, a in enumerate(AXIS_ORDER)}
        panels = {
            axis: [(row["point_key"], f"{row['amount']:g}") for row in rows.sort("amount").iter_rows(named=True)]
            for (axis,), rows in sorted(axes.group_by("axis"), key=lambda g: (order.get(g[0][0], 9), g[0][0]))
        }
    with style.figure_style():
        columns = len(panels)
        fig, axs = plt.subplots(1, columns, figsize=(4.6 * columns, 3.8), sharey=True, squeeze=False)
        for ax, (axis, members) in zip(axs[0], panels.items()):
            _panel(ax, curves, by_point, members)
            ax.set_title(style.AXIS_LABELS.get(axis, axis))
        axs[0][0].set_ylabel("V success (mean over seeds)")
    style.save(fig, png, pdf)
