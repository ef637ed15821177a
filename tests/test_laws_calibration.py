"""Calibration of the headline intervals on simulated studies that look like the default study.

Each study: an additive law with an irreducible floor (the other axes' terms at the centre), the
default study's grids, centre, seeds per point and held-out T2 episodes per run (read off
``config/config.yaml``), seed spread on ``ln L`` whose size differs by grid point, and a share of
runs that do not take off (``planner.STATED_NOISE``, from the default study's ``noise`` frame,
every run from its pretrained base: seed SD of ``ln L`` 0.095, 2.8 % of seeds at or below the
take-off threshold, log seed SDs spread 0.33 across points). Each nominal 95 % interval is checked
against its pseudo-true value, the quantity the noise-free study would give over the same grid:

* ``alpha``: the weighted log-log slope of ``-ln E[p]`` (seed-pooled success at infinite seeds),
  with the weights the estimator converges to;
* the trend: the least-squares slope of ``E[p]`` on ``log2 x`` (balanced seeds);
* the ordering differences: differences of the pseudo-true slopes.

Coverage must lie in [0.93, 0.97] for every quantity: too wide fails like too narrow.
"""

from __future__ import annotations

import itertools

import numpy as np
import polars as pl
import pytest

from axisrl.config import load_config
from axisrl.laws import Law, axis_ordering, fit_axes, simulate_study, success_trends
from axisrl.laws.data import AXES, axis_sweep
from axisrl.laws.intervals import slope_coefficients
from axisrl.laws.simulate import DEFAULT_CENTRE, GAUSS_HERMITE
from axisrl.planner import STATED_NOISE as NOISE
from axisrl.planner import design_of
from conftest import DEFAULT_CONFIG, SCHEMA_PATH

LAW = Law(E=0.6, A={"d_env": 0.7, "d_task": 1.0, "d_traj": 0.5}, alpha={"d_env": 0.4, "d_task": 0.15, "d_traj": 0.25})
"""Success 0.12 to 0.3 over the sweeps, as in the default study; each sweep bends towards its floor."""
DESIGN = design_of(load_config(DEFAULT_CONFIG, schema_path=SCHEMA_PATH))
SEEDS = tuple(range(DESIGN.seeds))
T2_EPISODES = DESIGN.episodes
PAIRS = list(itertools.combinations(AXES, 2))


def _seed_variance_of_loss(points: pl.DataFrame) -> np.ndarray:
    """Per point, the variance of a run's ``L`` over seeds (no episode noise): the ``tau^2`` that
    ``point_statistics`` estimates, pooled over a sweep."""
    nodes, weights = GAUSS_HERMITE
    weights = weights / weights.sum()
    trained = points["loss"].to_numpy()[:, None] * np.exp(points["seed_sd"].to_numpy()[:, None] * nodes[None])
    stuck, share = -np.log(NOISE.untrained_success), NOISE.no_take_off
    mean = (1 - share) * (trained @ weights) + share * stuck
    second = (1 - share) * (trained**2 @ weights) + share * stuck**2
    return second - mean**2


def pseudo_truth(points: pl.DataFrame) -> dict[str, float]:
    """``alpha:<axis>``, ``trend:<axis>`` and ``diff:<a>-<b>`` of the noise-free study."""
    truth = {}
    for axis in AXES:
        sweep = axis_sweep(points, axis, DEFAULT_CENTRE).sort(axis)
        x, p = sweep[axis].to_numpy().astype(float), sweep["expected_success"].to_numpy()
        loss = -np.log(p)
        tau2 = _seed_variance_of_loss(sweep).mean()
        weight = loss**2 / ((1 - p) / (p * T2_EPISODES) + tau2)
        truth[f"alpha:{axis}"] = float(-slope_coefficients(np.log(x), weight) @ np.log(loss))
        truth[f"trend:{axis}"] = float(slope_coefficients(np.log2(x), np.ones_like(x)) @ p)
    for a, b in PAIRS:
        truth[f"diff:{a}-{b}"] = truth[f"alpha:{a}"] - truth[f"alpha:{b}"]
    return truth


def intervals(runs: pl.DataFrame) -> dict[str, tuple[float, float, float]]:
    """(estimate, lo, hi) of every checked quantity, from the analyses the laws stage runs."""
    out = {}
    for row in fit_axes(runs, tier="T2").iter_rows(named=True):
        out[f"alpha:{row['axis']}"] = (row["alpha"], row["alpha_lo"], row["alpha_hi"])
    for row in success_trends(runs, tier="T2").iter_rows(named=True):
        out[f"trend:{row['axis']}"] = (row["slope"], row["slope_lo"], row["slope_hi"])
    for row in axis_ordering(runs, tier="T2").iter_rows(named=True):
        out[f"diff:{row['axis_a']}-{row['axis_b']}"] = (row["alpha_diff"], row["alpha_diff_lo"], row["alpha_diff_hi"])
    return out


def coverage(n_studies: int, first_seed: int) -> pl.DataFrame:
    """Per quantity: coverage, its Monte Carlo SE, mean half-width and the estimates' SD."""
    rows = []
    for study in range(first_seed, first_seed + n_studies):
        simulated = simulate_study(
            LAW, seeds=SEEDS, n_tasks=3 * T2_EPISODES, noise=NOISE, seed=study, with_episodes=False
        )
        truth = pseudo_truth(simulated.points)
        for name, (estimate, lo, hi) in intervals(simulated.runs).items():
            rows.append({"quantity": name, "covered": lo <= truth[name] <= hi, "half": (hi - lo) / 2, "est": estimate})
    return (
        pl.DataFrame(rows)
        .group_by("quantity", maintain_order=True)
        .agg(
            coverage=pl.col("covered").mean(),
            half_width=pl.col("half").mean(),
            estimate_sd=pl.col("est").std(),
            n=pl.len(),
        )
        .with_columns(mc_se=(pl.col("coverage") * (1 - pl.col("coverage")) / pl.col("n")).sqrt())
    )


def test_every_quantity_is_checked() -> None:
    simulated = simulate_study(LAW, seeds=SEEDS, n_tasks=3 * T2_EPISODES, noise=NOISE, seed=0, with_episodes=False)
    assert (
        set(intervals(simulated.runs)) == set(pseudo_truth(simulated.points))
        and len(pseudo_truth(simulated.points)) == 9
    )


def test_coverage_150_studies_pooled_is_that_of_a_95_percent_interval() -> None:
    """The mechanism of the science checks below, on 150 studies: over the nine quantities together the intervals
    cover 90-99 % of the time, none under 85 %, and each half-width is 1.5 to 3 times its estimate's spread over
    studies (1.92-2.55 measured from seed 0; 1.96 is a normal interval's). Catches an interval 3.5 times too wide
    (the former dispersion-inflated one: 99.7-100 %, about 7 times the spread) or half as wide (about 70 %, once
    the spread). One quantity may cover 149 of 150 by chance; the pooled share cannot reach 0.99 so."""
    table = coverage(150, first_seed=0).with_columns(ratio=pl.col("half_width") / pl.col("estimate_sd"))
    with pl.Config(tbl_rows=-1):
        print(table)
    assert 0.90 <= table["coverage"].mean() <= 0.99 and table["coverage"].min() >= 0.85, table
    assert table["ratio"].is_between(1.5, 3.0).all(), table


@pytest.mark.science
def test_coverage_300_studies_is_neither_too_narrow_nor_too_wide() -> None:
    """300 studies cannot pin 95 %, but an interval 3.5 times too wide (the former dispersion-inflated one,
    99.7-100 %) or half as wide fails. (At 150 studies a correct interval of one of the nine quantities covered
    149 of 150 (0.993) once the default study's noise became its base's: with nine quantities that is a few per
    cent likely, so this check takes 300.)"""
    table = coverage(300, first_seed=0)
    with pl.Config(tbl_rows=-1):
        print(table)
    assert table["coverage"].is_between(0.85, 0.99).all(), table


@pytest.mark.science
def test_coverage_2000_studies_within_93_to_97_percent() -> None:
    table = coverage(2000, first_seed=10_000)
    with pl.Config(tbl_rows=-1, tbl_width_chars=200):
        print(table)
    assert table["coverage"].is_between(0.93, 0.97).all(), table
