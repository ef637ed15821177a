"""The one matplotlib style of every figure of the project (Agg backend, Okabe-Ito colours)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)
from cycler import cycler  # noqa: E402

COLORS = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
"""Okabe-Ito colour cycle (colour-blind safe): blue, orange, green, vermillion, purple, sky, yellow, black."""

AXIS_LABELS = {
    "d_env": "environments $D_E$",
    "d_task": "tasks $D_T$",
    "d_traj": "trajectories per task $D_\\tau$",
    "width": "policy width $N$",
}
LOSS_LABEL = "held-out loss $L=-\\ln p$"
SUCCESS_LABEL = "held-out success"
DPI = 200

RC = {
    "axes.prop_cycle": cycler(color=COLORS),
    "font.size": 11,
    "axes.labelsize": 12,
    "axes.titlesize": 12,
    "xtick.labelsize": 10,
    "ytick.labelsize": 10,
    "legend.fontsize": 9,
    "legend.frameon": False,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.6,
    "lines.linewidth": 1.8,
    "lines.markersize": 5,
    "errorbar.capsize": 2,
    "figure.constrained_layout.use": True,
    "pdf.fonttype": 42,  # embed TrueType so PDF text stays text
}


def apply() -> None:
    """Make the project style the process-wide default."""
    plt.rcParams.update(RC)


@contextmanager
def figure_style() -> Iterator[None]:
    """Use the project style inside the block only (create the figure inside it)."""
    with plt.rc_context(RC):
        yield


def save(fig: plt.Figure, png_path: Path | str, pdf_path: Path | str) -> None:
    """Write ``fig`` as PNG (``DPI``) and PDF, creating parent folders, then close it."""
    with figure_style():
        for path in (Path(png_path), Path(pdf_path)):
            path.parent.mkdir(parents=True, exist_ok=True)
            fig.savefig(path, dpi=DPI, bbox_inches="tight")
    plt.close(fig)
