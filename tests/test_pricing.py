"""Known-truth recovery for synthetic-data pricing (kappa, r_star) on simulated runs."""

import numpy as np
import polars as pl
import pytest

from axisrl.pricing import fit_collapse, fit_real_law, kappa_at, simulate_mixture

AXIS = "d_env"
REAL_GRID = [256, 512, 1024, 2048, 4096]
D_R = 1024
RATIOS = [0, 0.25, 0.5, 1, 2, 4, 8, 16]
LAW = {"A": 32.0, "alpha": 0.5}
"""L(D_r) = 1 (p ~ 0.37), where the loss is most sensitive to the data amount."""


def true_r_star(lower: float, upper: float, slope: float, r_mid: float, level: float) -> float:
    return r_mid * ((upper - level) / (level - lower)) ** (1.0 / slope)


def test_real_law_recovers_power_law():
    real, _ = simulate_mixture(AXIS, REAL_GRID, D_R, RATIOS, **LAW, seed=3)
    law = fit_real_law(real, AXIS)
    assert law.status == "ok"
    assert law.alpha == pytest.approx(LAW["alpha"], abs=0.05)


def test_collapse_ratio_recovered():
    collapse = (0.5, 1.05, 3.0, 5.0)
    _, mixed = simulate_mixture(AXIS, REAL_GRID, D_R, RATIOS, **LAW, kappa=0.0, collapse=collapse, seed=2)
    out = fit_collapse(mixed, n_boot=200, seed=0)
    assert out["criterion"].to_list() == ["threshold", "baseline", "peak"]
    row = out.row(0, named=True)
    truth = true_r_star(*collapse, 0.95)  # 3.03
    assert row["censored"] is None
    assert row["r_star"] == pytest.approx(truth, rel=0.3)
    assert row["r_star_lo"] <= truth <= row["r_star_hi"]
    baseline = out.row(1, named=True)
    assert baseline["r_star"] == pytest.approx(true_r_star(*collapse, 1.0), rel=0.4)  # 2.32
    assert out.row(2, named=True)["censored"] == "<r_min"  # a monotone logistic peaks at the edge


def test_crossing_beyond_range_is_censored():
    _, mixed = simulate_mixture(AXIS, REAL_GRID, D_R, RATIOS, **LAW, kappa=0.0, collapse=(0.5, 1.05, 3.0, 200.0),
                                seed=4)
    row = fit_collapse(mixed, n_boot=100, seed=0).row(0, named=True)
    assert row["censored"] == ">r_max"
    assert row["r_star"] is None


def test_known_kappa_recovered_with_covering_ci():
    real, mixed = simulate_mixture(AXIS, REAL_GRID, D_R, RATIOS, **LAW, kappa=0.6, seed=1)
    row = kappa_at(real, mixed, AXIS, D_R, ratio=1.0, n_boot=300, seed=0).row(0, named=True)
    assert row["status"] == "ok" and row["interpolated"]
    assert row["kappa"] == pytest.approx(0.6, abs=0.2)
    assert row["kappa_lo"] <= 0.6 <= row["kappa_hi"]
    assert row["kappa_lo"] < row["kappa"] < row["kappa_hi"]


def test_synthetic_identical_to_real():
    real, mixed = simulate_mixture(AXIS, REAL_GRID, D_R, RATIOS, **LAW, kappa=1.0, seed=5)
    row = kappa_at(real, mixed, AXIS, D_R, n_boot=300, seed=0).row(0, named=True)
    assert row["kappa_lo"] <= 1.0 <= row["kappa_hi"]
    r_star = fit_collapse(mixed, n_boot=100, seed=0).row(0, named=True)
    assert r_star["censored"] == ">r_max" and r_star["r_star"] is None


def test_not_interpolated_without_2x_real_coverage():
    real, mixed = simulate_mixture(AXIS, [128, 256, 512, 1024], D_R, RATIOS, **LAW, kappa=0.6, seed=1)
    assert not kappa_at(real, mixed, AXIS, D_R, n_boot=20).row(0, named=True)["interpolated"]


@pytest.mark.parametrize(("real", "status"), [
    ("missing", "no real-only baseline"),
    ("failed", "real-only baseline failed"),
])
def test_bad_baseline_yields_status_row(real, status):
    runs, mixed = simulate_mixture(AXIS, REAL_GRID, D_R, RATIOS, **LAW, seed=6)
    runs = runs.clear() if real == "missing" else runs.with_columns(status=pl.lit("failed"))
    out = kappa_at(runs, mixed, AXIS, D_R, n_boot=20)
    assert out.height == 1
    row = out.row(0, named=True)
    assert row["status"] == status and row["kappa"] is None


def test_collapse_without_r0_yields_status_row():
    _, mixed = simulate_mixture(AXIS, REAL_GRID, D_R, RATIOS, **LAW, seed=6)
    out = fit_collapse(mixed.filter(pl.col("ratio") > 0), n_boot=10)
    assert out.row(0, named=True)["status"] == "no real-only baseline"


def test_deterministic_given_seed():
    real, mixed = simulate_mixture(AXIS, REAL_GRID, D_R, RATIOS, **LAW, kappa=0.6, seed=1)
    a = kappa_at(real, mixed, AXIS, D_R, n_boot=50, seed=7)
    b = kappa_at(real, mixed, AXIS, D_R, n_boot=50, seed=7)
    assert a.equals(b)
    assert np.isfinite(a["kappa_lo"][0])
