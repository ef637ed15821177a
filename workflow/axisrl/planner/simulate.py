"""The planner's predictions of a fixed design: the stated truth, the headline intervals one simulated study
gives (as the laws stage computes them), their expected half-widths over many studies (``predict``) and
kappa at ``r = 1`` of each axis's representative synthesis method (``predict_kappa``). Apart from the
model (what is simulated) and from the two-stage design (which reuses these on both waves)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import polars as pl

from axisrl.laws.axis import axis_ordering, slope_intervals, success_trends
from axisrl.laws.simulate import NoiseModel, SweepNoise, run_success
from axisrl.planner.model import STATED_ALPHA, STATED_CENTRE_SUCCESS, TIER, SweepDesign, Truth, _simulate


def stated_truth(design: SweepDesign) -> Truth:
    """Without a finished study: a power law of slope 0.1 per axis through the default study's
    centre success, on the design's grids."""
    centre_loss = -np.log(STATED_CENTRE_SUCCESS)
    curves = {
        axis: (np.array(values, float), centre_loss * (np.array(values, float) / design.centre[axis]) ** -STATED_ALPHA)
        for axis, values in design.grids.items()
    }
    return Truth(curves, dict(design.centre))


def headline_intervals(runs: pl.DataFrame, tier: str = TIER) -> list[tuple[str, str, float, float]]:
    """(quantity, name, lo, hi) of every headline interval a study's runs give, as the laws stage computes them."""
    rows = []
    for row in slope_intervals(runs, tier=tier).iter_rows(named=True):
        rows.append(("alpha", row["axis"], row["alpha_lo"], row["alpha_hi"]))
    for row in success_trends(runs, tier=tier).iter_rows(named=True):
        rows.append(("trend", row["axis"], row["slope_lo"], row["slope_hi"]))
    for row in axis_ordering(runs, tier=tier).iter_rows(named=True):
        rows.append(("alpha_diff", f"{row['axis_a']} - {row['axis_b']}", row["alpha_diff_lo"], row["alpha_diff_hi"]))
    return rows


def _widths(rows: Sequence[tuple[str, str, float, float]], n_sims: int) -> pl.DataFrame:
    """Per quantity, over simulated studies' intervals: the expected half-width, its Monte Carlo SE,
    the 10 % and 90 % quantiles of one study's, and the share of studies whose interval excludes 0."""
    frame = pl.DataFrame(rows, schema=["quantity", "name", "lo", "hi"], orient="row")
    half = (pl.col("hi") - pl.col("lo")) / 2
    return frame.group_by("quantity", "name", maintain_order=True).agg(
        half_width=half.mean(),
        half_width_se=half.std() / np.sqrt(n_sims),
        half_width_q10=half.quantile(0.1, "linear"),
        half_width_q90=half.quantile(0.9, "linear"),
        p_decides=((pl.col("lo") > 0) | (pl.col("hi") < 0)).mean(),
    )


def predict(
    design: SweepDesign, truth: Truth, noise: NoiseModel | SweepNoise, n_sims: int = 200, seed: int = 0
) -> pl.DataFrame:
    """Per headline quantity (``quantity``, ``name``): the expected 95 % half-width over ``n_sims``
    simulated studies of ``design``, its Monte Carlo SE, the 10 % and 90 % quantiles of a single
    study's half-width (one study's interval varies with its seeds' own spread), and ``p_decides``,
    the share of studies whose interval excludes 0 (for an ordering difference: the test decides)."""
    rows = []
    for study in range(n_sims):
        rows += headline_intervals(_simulate(design, truth, noise, seed + study))
    return _widths(rows, n_sims)


KAPPA_SCHEMA = {
    "source": pl.String,
    "axis": pl.String,
    "real_amount": pl.Float64,
    "kappa_true": pl.Float64,
    "half_width": pl.Float64,
    "half_width_q10": pl.Float64,
    "half_width_q90": pl.Float64,
    "p_bounded": pl.Float64,
}
"""Per method: its interval's median half-width over the simulated studies whose interval is
bounded, the 10 % and 90 % quantiles, and ``p_bounded``, the share of studies whose interval has two
finite bounds within the tables' ``KAPPA_SHOWN_MAX``."""


def _kappa_interval(
    axis: str,
    amount: float,
    multiples: np.ndarray,
    losses: np.ndarray,
    seeds: int,
    episodes: int,
    noise: NoiseModel,
    n_boot: int,
    seed: int,
) -> tuple[float, float] | None:
    """One simulated pricing study's kappa interval at ``r = 1`` (None: not bounded): the real-only
    runs at ``multiples`` of ``amount`` and the mixture, at true losses ``losses`` (the mixture's
    last), ``seeds`` each, priced by ``pricing.estimate.kappa_at``."""
    from axisrl.pricing.estimate import kappa_at
    from axisrl.pricing.tables import KAPPA_SHOWN_MAX

    rng = np.random.default_rng(seed)
    law_loss = np.repeat(losses, seeds)
    point_factor = np.exp(noise.seed_sd_spread * rng.standard_normal(len(losses)))
    shocks = rng.standard_normal(len(law_loss))
    run_sd = np.repeat(noise.seed_sd * point_factor, seeds)
    p_run = run_success(law_loss, run_sd, shocks, noise.no_take_off, noise.untrained_success, rng)
    runs = pl.DataFrame(
        {
            axis: np.repeat(np.append(amount * multiples, amount), seeds),
            "successes": rng.binomial(episodes, p_run),
            "trials": episodes,
            "seed": np.tile(range(seeds), len(losses)),
        }
    )
    n_real = len(multiples) * seeds
    mixed = runs[n_real:].with_columns(ratio=pl.lit(1.0))
    row = kappa_at(runs[:n_real], mixed, axis, amount, 1.0, n_boot, seed).row(0, named=True)
    bounds = (row["kappa_lo"], row["kappa_hi"])
    if row["status"] != "ok" or not all(v is not None and np.isfinite(v) and abs(v) <= KAPPA_SHOWN_MAX for v in bounds):
        return None
    return bounds


def predict_kappa(
    study: Mapping[str, Any],
    truth: Truth,
    noise: NoiseModel | SweepNoise,
    episodes: int,
    *,
    kappa: float = 1.0,
    n_sims: int = 50,
    n_boot: int = 200,
    seed: int = 0,
) -> pl.DataFrame:
    """Kappa at ``r = 1`` of each axis's representative method (``pricing.tables.REPRESENTATIVES``)
    at the mixtures family's first real amount, by simulating its real-only runs (1x and the
    ``real_multiples``) and its ``r = 1`` mixture under ``noise`` and pricing each simulated study as
    the pricing stage does (``n_boot`` resamples), with the centre's noise (its designs are off the
    sweeps). The truth: the sweeps' product law at the real designs, and a mixture worth ``kappa``
    real units per synthetic one."""
    from axisrl.plan import pricing_points
    from axisrl.pricing.tables import REPRESENTATIVES

    wanted = set(REPRESENTATIVES.values())
    points = [p for p in pricing_points(study) if p.source in wanted and p.role == "real"]
    rows = []
    for (source, axis), group in itertools.groupby(points, key=lambda p: (p.source, p.axis)):
        of_source = list(group)
        amount = min(p.real_amount for p in of_source)
        real = [p for p in of_source if p.real_amount == amount]
        multiples = np.array([p.multiple for p in real], dtype=float)
        losses = np.array([truth.product_loss(p.design.as_dict()) for p in real])
        exponent = float(-np.polyfit(np.log(multiples), np.log(losses), 1)[0])
        with_mixture = np.append(losses, losses[multiples == 1][0] * (1 + kappa) ** -exponent)
        intervals = [
            _kappa_interval(
                axis, amount, multiples, with_mixture, len(study["seeds"]), episodes, noise.of(None), n_boot, s
            )
            for s in range(seed, seed + n_sims)
        ]
        widths = np.array([(hi - lo) / 2 for lo, hi in filter(None, intervals)] or [np.nan])
        rows.append(
            {
                "source": source,
                "axis": axis,
                "real_amount": float(amount),
                "kappa_true": kappa,
                "half_width": float(np.median(widths)),
                "half_width_q10": float(np.quantile(widths, 0.1)),
                "half_width_q90": float(np.quantile(widths, 0.9)),
                "p_bounded": float(np.mean([i is not None for i in intervals])),
            }
        )
    return pl.DataFrame(rows, schema=KAPPA_SCHEMA)
