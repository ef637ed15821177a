"""Known-truth mixture runs, so that the pricing fits can be checked against the truth."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from axisrl.pricing.estimate import logistic


def simulate_mixture(
    axis: str,
    real_grid: Sequence[float],
    real_amount: float,
    ratios: Sequence[float],
    *,
    A: float,
    alpha: float,
    kappa: float = 1.0,
    collapse: tuple[float, float, float, float] | None = None,
    trials: int = 1000,
    n_seeds: int = 3,
    seed: int = 0,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Known-truth runs for tests: ``(real, mixed)``.

    Real-only runs at ``real_grid`` succeed with ``p = exp(-A x^-alpha)``. A mixture at ``ratio``
    succeeds with ``p = exp(-A (D_r + kappa ratio D_r)^-alpha) * s(ratio)``, where ``s`` is the
    logistic ``collapse = (lower, upper, slope, r_mid)`` (1 when None); ``ratio = 0`` rows are the
    real-only runs at ``D_r``. Noise is binomial over ``trials`` tasks per seed.
    """
    rng = np.random.default_rng(seed)
    seeds = np.arange(n_seeds)
    real_x = np.repeat(np.asarray(real_grid, float), n_seeds)
    real_p = np.exp(-A * real_x**-alpha)
    real = pl.DataFrame(
        {
            axis: real_x,
            "successes": rng.binomial(trials, real_p),
            "trials": trials,
            "seed": np.tile(seeds, len(real_grid)),
        }
    )
    r = np.repeat(np.asarray(ratios, float), n_seeds)
    shape = np.ones_like(r)
    if collapse is not None:
        positive = r > 0
        shape[positive] = logistic(r[positive], *collapse)
    mix_p = np.clip(np.exp(-A * (real_amount * (1.0 + kappa * r)) ** -alpha) * shape, 0.0, 1.0)
    mixed = pl.DataFrame(
        {
            axis: real_amount,
            "ratio": r,
            "successes": rng.binomial(trials, mix_p),
            "trials": trials,
            "seed": np.tile(seeds, len(ratios)),
        }
    )
    return real, mixed
