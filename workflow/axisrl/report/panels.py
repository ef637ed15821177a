"""What every figure module shares: the check that an input frame has the columns a figure reads,
nullable numbers read as floats, the Wilson interval of a success rate, and the placeholder panel of
a figure whose study has nothing to draw. Kept apart so the study figures (``figures``) and the
recipe figures (``recipe_figures``) use one copy without importing each other.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
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


Z95 = 1.959963984540054
"""The two-sided 95 % normal quantile."""


def wilson(p: np.ndarray, n: np.ndarray, z: float = Z95) -> tuple[np.ndarray, np.ndarray]:
    """The Wilson score interval of a success rate ``p`` measured on ``n`` binomial trials (``n`` may
    be an effective number, not whole; ``inf``: the interval is ``p`` itself; none: NaN). Inside
    [0, 1] at every ``p``, 0 and 1 included, with no clipping: what a success rate's interval is in
    the figures."""
    p, n = np.asarray(p, dtype=np.float64), np.asarray(n, dtype=np.float64)
    n = np.where(n > 0, n, np.nan)
    shrink = 1 + z**2 / n
    centre = (p + z**2 / (2 * n)) / shrink
    half = z * np.sqrt(p * (1 - p) / n + z**2 / (4 * n**2)) / shrink
    return np.where(p == 0, 0.0, centre - half), np.where(p == 1, 1.0, centre + half)  # exact there, not rounded


def wilson_interval(successes: np.ndarray, trials: np.ndarray, z: float = Z95) -> tuple[np.ndarray, np.ndarray]:
    """The Wilson score interval of a binomial proportion, ``successes`` of ``trials``."""
    successes, trials = np.asarray(successes, dtype=np.float64), np.asarray(trials, dtype=np.float64)
    p = np.divide(successes, trials, out=np.full_like(trials, np.nan), where=trials > 0)
    return wilson(p, trials, z)


def placeholder(message: str, png: Path, pdf: Path) -> None:
    """A figure target whose study has no runs to draw: an empty panel that says why."""
    with style.figure_style():
        fig, ax = plt.subplots(figsize=(6, 2))
        ax.axis("off")
        ax.text(0.5, 0.5, message, ha="center", va="center", wrap=True)
    style.save(fig, png, pdf)
