"""The recipe's figures, drawn from the recipe and validate stages' frames (PNG + PDF out), with
one colour per strategy and one per axis shared between them.

* ``figure1`` -- same compute, different outcomes (paper Figure 1): at the largest pre-registered
  compute level, measured held-out success per strategy (bars, Wilson 95% interval) against its prediction, and
  one pie per strategy of its cost shares.
* ``figure5`` -- the recipe (paper Figure 5): (a) the optimal allocation of each axis against the
  budget with its fitted exponent, (b) held-out success against the budget per strategy, predicted
  and measured, with the out-of-range validation point and its pre-registered interval.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import polars as pl
from matplotlib.lines import Line2D

from axisrl.report import style
from axisrl.report.compact import bounds_scale, fixed, fixed_interval
from axisrl.report.panels import as_float, placeholder, require_columns, wilson_interval

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


MEASURED_INTERVAL = "Wilson 95%"
"""The interval of a measured success in Figures 1 and 5 (``measured_interval``), as their legends name it."""


def measured_interval(measured: pl.DataFrame) -> pl.DataFrame:
    """``measured`` (the validate stage's frame) with ``p_wilson_lo``/``p_wilson_hi``: the Wilson 95 %
    interval of each measured success on its seeds' pooled held-out episodes, the binomial interval
    the figures draw (inside [0, 1]; ``p +- 1.96 p_se`` leaves it near 0 and 1). The count is the
    frame's ``successes`` where it has them, else read back from ``p`` and ``trials``: ``p`` is the
    pooled ``k / n``, clipped as the laws clip it to ``[1/(2n), 1 - 1/(2n)]``, so a clipped ``p`` is 0 or
    ``n`` successes. Null where the frame has no measurement."""
    if not {"p", "trials"} <= set(measured.columns):
        return measured.with_columns(p_wilson_lo=pl.lit(None, pl.Float64), p_wilson_hi=pl.lit(None, pl.Float64))
    trials = measured["trials"].cast(pl.Float64).fill_null(np.nan).to_numpy()
    if "successes" in measured.columns:
        successes = measured["successes"].cast(pl.Float64).fill_null(np.nan).to_numpy()
    else:
        successes = measured["p"].cast(pl.Float64).fill_null(np.nan).to_numpy() * trials
        successes = np.where(
            np.isclose(successes, 0.5), 0.0, np.where(np.isclose(successes, trials - 0.5), trials, successes)
        )
    lo, hi = wilson_interval(successes, trials)
    return measured.with_columns(p_wilson_lo=pl.Series(lo).fill_nan(None), p_wilson_hi=pl.Series(hi).fill_nan(None))


def _error(points: pl.DataFrame) -> np.ndarray:
    """``errorbar``'s ``yerr`` of measured points: from ``p`` down and up to its Wilson interval."""
    p = points["p"].cast(pl.Float64).to_numpy()
    lo, hi = (points[c].fill_null(np.nan).to_numpy() for c in ("p_wilson_lo", "p_wilson_hi"))
    return np.vstack([np.maximum(p - lo, 0), np.maximum(hi - p, 0)])


def _slope_label(axis: str, row: dict | None) -> str:
    """Legend text of one axis of Figure 5a: its OLS exponent and bootstrap interval, or "pinned"."""
    if row is None or row.get("slope") is None:
        return axis
    if row.get("pinned"):
        return f"{axis}: {fixed(row['slope'], 2)} (pinned)"
    lo, hi = as_float(row.get("slope_lo")), as_float(row.get("slope_hi"))
    if row.get("identified") is False:  # the value alone, at its interval's scale
        return f"{axis}: {fixed(row['slope'], 2, bounds_scale(lo, hi))} (not identified: no effect in the law)"
    return f"{axis}: {fixed_interval(row['slope'], lo, hi, 2)}"


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
    budget (log x) per strategy: predicted curves, measured success (Wilson 95% interval on the
    seeds' pooled episodes, ``measured_interval``; slightly jittered in x
    so strategies do not overlap) and the validation point (black star) with its pre-registered
    prediction interval. ``measured`` may lack the measurement columns (predictions only)."""
    require_columns(path, ("compute", "currency", *RECIPE_AXIS_ORDER), "path")
    require_columns(exponents, ("axis", "slope"), "exponents")
    require_columns(curves, ("strategy", "compute", "predicted_success"), "curves")
    require_columns(measured, ("role", "strategy", "compute", *RECIPE_AXIS_ORDER), "measured")
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
            right.errorbar(_spent(points) * jitter, p, yerr=_error(measured_interval(points)), fmt="o", color=color)
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
            handles.append(
                Line2D([], [], linestyle="none", marker="o", color="grey", label=f"measured, {MEASURED_INTERVAL}")
            )
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
    strategy runs, one bar per strategy of its measured held-out success (Wilson 95% interval) with the law's
    prediction and pre-registered interval beside it, and below, one pie per strategy of its cost
    shares ``eps_i / C`` (zero shares left out). Without any measured success: a placeholder."""
    require_columns(measured, ("role", "strategy", "compute"), "measured")
    rows = measured.filter(pl.col("role") == "strategy")
    if rows.is_empty() or not _has_measurements(rows):
        placeholder("Figure 1: no strategy run has a measured held-out success yet", png, pdf)
        return
    top = rows["compute"].max()
    rows = measured_interval(rows.filter(pl.col("compute") >= top * (1 - 1e-9)))
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
            p = as_float(row.get("p"))
            if math.isnan(p):
                bars.text(k, 0.02, "not measured", ha="center", va="bottom", rotation=90, fontsize=9)
            else:
                lo, hi = as_float(row["p_wilson_lo"], p), as_float(row["p_wilson_hi"], p)
                bars.bar(k, p, width=0.6, color=color, alpha=0.85)
                bars.errorbar(k, p, yerr=[[max(p - lo, 0.0)], [max(hi - p, 0.0)]], fmt="none", color="black")
                top_of_bar = max(hi, p)
                bars.text(k - 0.04, top_of_bar + 0.01, fixed(p, 2), ha="right", va="bottom", fontsize=9)
                ceiling = max(ceiling, top_of_bar)
            predicted = as_float(row.get("predicted_success"))
            if not math.isnan(predicted):
                lo, hi = as_float(row.get("success_lo"), predicted), as_float(row.get("success_hi"), predicted)
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
                plt.Rectangle((0, 0), 1, 1, color="grey", alpha=0.85, label=f"measured ({MEASURED_INTERVAL})"),
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
            shares = [(a, as_float(row.get(f"share_{a}"), 0.0)) for a in RECIPE_AXIS_ORDER]
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
        sums = [
            sum(as_float(row.get(f"share_{a}"), 0.0) for a in RECIPE_AXIS_ORDER) for row in rows.iter_rows(named=True)
        ]
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
