"""Figure ``fig_noise``: the seed spread of the axis sweeps against binomial noise.

One panel per swept axis (x on a log2 scale): every seed's held-out success at every sweep point as
a dot (coloured by seed, so a seed that takes off everywhere shows), beside the seed-pooled success
with its binomial 95% interval (Wilson, on the pooled successes and trials) and, lighter, the 95%
interval the seeds' own scatter gives their mean: Wilson again, on the effective number of trials
whose binomial variance is the mean's variance from the seeds, ``p (1 - p) n_seeds /
between_seed_var`` (``seed_spread_interval``; inside [0, 1] near 0 and 1, where ``p +- 1.96 SE``
is not). The two intervals' lengths differ by about the square root of the point's design effect;
each panel's title gives the design effects' median and range over the sweep (``axisrl.laws.noise``).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import polars as pl
from matplotlib.ticker import FuncFormatter

from axisrl.laws.noise import NOISE_SCHEMA, sweep_seeds
from axisrl.laws.tables import in_families
from axisrl.report import style
from axisrl.report.panels import placeholder, require_columns, wilson, wilson_interval

__all__ = ["noise_figure", "seed_spread_interval"]

AXIS_ORDER = ("d_env", "d_task", "d_traj")
SEED_SHIFT, POOLED_SHIFT, JITTER = -0.14, 0.14, 0.06
"""Horizontal offsets in doublings: the seeds' dots left of each point, the pooled estimate right."""


def seed_spread_interval(rows: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The 95 % interval the seeds' scatter gives each point's success (``noise`` rows): Wilson on
    the effective trials ``p (1 - p) n_seeds / between_seed_var`` (Kish's, the binomial trials with
    the seeds' mean's variance); the point itself where the seeds do not differ, NaN with one seed."""
    p = rows["p"].to_numpy()
    variance = rows["between_seed_var"].fill_null(np.nan).to_numpy()
    effective = np.full_like(p, np.inf)
    np.divide(p * (1 - p) * rows["n_seeds"].to_numpy(), variance, out=effective, where=variance > 0)
    return wilson(p, np.where(np.isnan(variance), np.nan, effective))


def _design_effect_title(rows: pl.DataFrame) -> str:
    effects = rows["design_effect"].drop_nulls().drop_nans()
    if not effects.len():
        return "design effect: n/a"
    return f"design effect median {effects.median():.1f} (range {effects.min():.1f}-{effects.max():.1f})"


def noise_figure(
    runs: pl.DataFrame, noise: pl.DataFrame, tier: str, png: Path | str, pdf: Path | str, take_off: float | None = None
) -> None:
    """Seeds against the pooled estimate per axis sweep point on held-out ``tier``.

    ``runs``: the collect stage's runs (the axis-sweep family is read, its runs selected as the
    ``noise`` frame selects them); ``noise``: the laws stage's ``noise`` frame; ``take_off``, where
    given, is drawn as a dotted line. A study without axis-sweep runs gets a panel saying so.
    """
    require_columns(noise, tuple(NOISE_SCHEMA), "noise")
    pooled = noise.filter(pl.col("tier") == tier)
    seeds = sweep_seeds(in_families(runs, "axis_sweeps"), [tier])
    if not pooled.height or not seeds.height:
        placeholder(f"fig_noise: this study has no axis-sweep runs with {tier} success", png, pdf)
        return
    present = set(pooled["axis"])
    axes_names = [a for a in AXIS_ORDER if a in present] + sorted(present - set(AXIS_ORDER))
    seed_ids = sorted(seeds["seed"].unique().to_list())
    palette = style.COLORS[:-1]  # black is the pooled estimate's
    color = {s: palette[i % len(palette)] for i, s in enumerate(seed_ids)}
    jitter = {s: JITTER * (i / max(len(seed_ids) - 1, 1) - 0.5) * 2 for i, s in enumerate(seed_ids)}

    with style.figure_style():
        fig, panels = plt.subplots(1, len(axes_names), figsize=(4.2 * len(axes_names), 3.8), sharey=True, squeeze=False)
        for ax, axis in zip(panels[0], axes_names):
            mine = seeds.filter(pl.col("axis") == axis)
            for seed in seed_ids:
                dots = mine.filter(pl.col("seed") == seed)
                if dots.height:
                    ax.scatter(
                        dots["x"].to_numpy() * 2.0 ** (SEED_SHIFT + jitter[seed]),
                        dots["p"].to_numpy(),
                        s=16,
                        color=color[seed],
                        alpha=0.8,
                        linewidths=0,
                        label=f"seed {seed}",
                        zorder=3,
                    )
            rows = pooled.filter(pl.col("axis") == axis).sort("x")
            x = rows["x"].to_numpy() * 2.0**POOLED_SHIFT
            p = rows["p"].to_numpy()
            lo, hi = seed_spread_interval(rows)
            ax.errorbar(
                x,
                p,
                yerr=np.vstack([np.maximum(p - lo, 0), np.maximum(hi - p, 0)]),
                fmt="none",
                ecolor="grey",
                alpha=0.5,
                elinewidth=5,
                capsize=0,
                label="seed spread, Wilson 95% (effective n)",
                zorder=1,
            )
            lo, hi = wilson_interval(rows["successes"].to_numpy(), rows["trials"].to_numpy())
            ax.errorbar(
                x,
                p,
                yerr=np.vstack([np.maximum(p - lo, 0), np.maximum(hi - p, 0)]),
                fmt="o",
                color="black",
                label="pooled, Wilson 95%",
                zorder=4,
            )
            if take_off is not None:
                ax.axhline(take_off, color="grey", linestyle=":", linewidth=1.0, label=f"take-off ({take_off:g})")
            ax.set_xscale("log", base=2)
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.set_xticks(rows["x"].to_list())
            ax.set_xlabel(style.AXIS_LABELS.get(axis, axis))
            ax.set_title(_design_effect_title(rows), fontsize="small")
        panels[0][0].set_ylabel(f"{style.SUCCESS_LABEL} ({tier})")
        panels[0][0].set_ylim(bottom=-0.02)
        handles, labels = panels[0][0].get_legend_handles_labels()
        panels[0][-1].legend(handles, labels, loc="best", fontsize=8)
    style.save(fig, png, pdf)
