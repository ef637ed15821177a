"""What every figure module shares: the check that an input frame has the columns a figure reads,
nullable numbers read as floats, and the placeholder panel of a figure whose study has nothing to
draw. Kept apart so the study figures (``figures``) and the recipe figures (``recipe_figures``)
use one copy without importing each other.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import polars as pl

from axisrl.report import style


def require_columns(frame: pl.DataFrame, columns: tuple[str, ...], name: str) -> None:
    """Raise ``ValueError`` naming the columns of ``columns`` that ``frame`` lacks."""
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{name} is missing required column(s): {', '.join(missing)}")


def as_float(value: float | None, default: float = math.nan) -> float:
    """``value`` as a float, ``default`` where it is null or NaN."""
    return default if value is None or math.isnan(value) else float(value)


def placeholder(message: str, png: Path, pdf: Path) -> None:
    """A figure target whose study has no runs to draw: an empty panel that says why."""
    with style.figure_style():
        fig, ax = plt.subplots(figsize=(6, 2))
        ax.axis("off")
        ax.text(0.5, 0.5, message, ha="center", va="center", wrap=True)
    style.save(fig, png, pdf)
