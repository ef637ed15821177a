"""Known-truth recovery for synthetic-data pricing (kappa, r_star) on simulated runs."""

import numpy as np
import polars as pl
import pytest

from axisrl.pricing import fit_collapse, fit_peak, fit_real_law, kappa_at, price, pricing_tables, simulate_mixture

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
    assert out["criterion"].to_list() == ["threshold", "baseline"]
    row = out.row(0, named=True)
    truth = true_r_star(*collapse, 0.95)  # 3.03
    assert row["censored"] is None
    assert row["r_star"] == pytest.approx(truth, rel=0.3)
    assert row["r_star_lo"] <= truth <= row["r_star_hi"]
    baseline = out.row(1, named=True)
    assert baseline["r_star"] == pytest.approx(true_r_star(*collapse, 1.0), rel=0.4)  # 2.32


def test_crossing_beyond_range_is_censored():
    _, mixed = simulate_mixture(
        AXIS, REAL_GRID, D_R, RATIOS, **LAW, kappa=0.0, collapse=(0.5, 1.05, 3.0, 200.0), seed=4
    )
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


@pytest.mark.parametrize(
    ("real", "status"),
    [
        ("missing", "no real-only baseline"),
        ("failed", "real-only baseline failed"),
    ],
)
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


def test_peak_of_a_rise_then_collapse_is_recovered():
    collapse = (0.5, 1.0, 3.0, 5.0)
    real, mixed = simulate_mixture(AXIS, REAL_GRID, D_R, RATIOS, **LAW, kappa=0.8, collapse=collapse, seed=2)
    dense = np.exp(np.linspace(np.log(0.25), np.log(16), 2001))
    from axisrl.pricing import logistic

    truth = dense[
        np.argmax(np.exp(-LAW["A"] * (D_R * (1 + 0.8 * dense)) ** -LAW["alpha"]) * logistic(dense, *collapse))
    ]
    row = fit_peak(real, mixed, AXIS, D_R, n_boot=100, seed=0).row(0, named=True)
    assert row["status"] == "ok" and row["censored"] is None
    assert row["r_star"] == pytest.approx(truth, rel=0.4)
    assert row["r_star_lo"] <= truth <= row["r_star_hi"]
    _, flat = simulate_mixture(AXIS, REAL_GRID, D_R, RATIOS, **LAW, kappa=1.0, seed=2)
    assert fit_peak(real, flat, AXIS, D_R, n_boot=20, seed=0)["censored"][0] == ">r_max"


def _study(kappa: float, collapse, seed: int, source: str = "awm") -> tuple[pl.DataFrame, pl.DataFrame]:
    """Simulated collected runs and pricing points of one method, as the pricing stage reads them."""
    real, mixed = simulate_mixture(AXIS, REAL_GRID[2:], D_R, RATIOS, **LAW, kappa=kappa, collapse=collapse, seed=seed)
    real = real.with_columns(role=pl.lit("real"), ratio=pl.lit(0.0), multiple=(pl.col(AXIS) / D_R).cast(pl.Int64))
    mixed = mixed.filter(pl.col("ratio") > 0).with_columns(role=pl.lit("mixture"), multiple=pl.lit(1, dtype=pl.Int64))
    both = pl.concat(
        [
            real.select("role", "ratio", "multiple", "successes", "trials", "seed"),
            mixed.select("role", "ratio", "multiple", "successes", "trials", "seed"),
        ]
    )
    both = both.with_columns(point_key=pl.format("{}-{}-{}-{}", pl.lit(source), "role", "ratio", "multiple"))
    runs = both.select(
        "point_key", "seed", status=pl.lit("ok"), p_T2=pl.col("successes") / pl.col("trials"), n_T2=pl.col("trials")
    )
    points = both.select(
        "point_key",
        source=pl.lit(source),
        axis=pl.lit(AXIS),
        real_amount=pl.lit(D_R),
        role="role",
        ratio="ratio",
        multiple="multiple",
    ).unique(maintain_order=True)
    return runs, points


def test_price_reports_kappa_r_star_and_tables_for_each_source():
    runs, points = _study(0.0, (0.5, 1.05, 3.0, 5.0), seed=2)
    frames = price(runs, points, {"awm": 4.1}, n_boot=100)
    row = frames["pricing"].row(0, named=True)
    from axisrl.pricing import logistic

    loss = LAW["A"] * D_R ** -LAW["alpha"] - np.log(logistic(np.array(1.0), 0.5, 1.05, 3.0, 5.0))
    implied = (loss / LAW["A"]) ** (-1 / LAW["alpha"]) / D_R - 1  # no added value, seen through s(1) = 1.05
    assert row["kappa_status"] == "ok" and row["kappa_lo"] <= implied <= row["kappa_hi"]
    assert row["r_star_threshold"] == pytest.approx(true_r_star(0.5, 1.05, 3.0, 5.0, 0.95), rel=0.3)
    assert row["cost_per_real_unit"] == pytest.approx(4.1 / row["kappa"])
    assert set(frames["curves"]["ratio"]) == set(map(float, RATIOS[1:]))
    tables = pricing_tables(frames["pricing"])
    assert tables["table3"]["method"].to_list() == ["AWM"]
    assert tables["table16"]["kappa_common_core"].to_list() == ["not_run"]
    assert tables["table17"].height == 3


def test_a_source_without_real_baseline_gets_a_row_that_says_so():
    runs, points = _study(0.6, None, seed=1)
    runs = runs.filter(~pl.col("point_key").str.contains("real"))
    row = price(runs, points, {}, n_boot=20)["pricing"].row(0, named=True)
    assert row["kappa_status"] == "no real-only baseline" and row["kappa"] is None
    assert "no real-only baseline" in row["collapse_status"]


@pytest.mark.parametrize(
    "s",
    [
        [1.0, 1.0, 1.0, 1.0, 0.2, 0.2, 0.2],  # a step: the slope's bound binds
        [1.0, 0.97, 0.9, 0.75, 0.55, 0.45, 0.42],
    ],
)
def test_the_bootstraps_fast_fit_agrees_with_the_polished_point_fit(s):
    """Replicates are fitted by Levenberg-Marquardt through a logistic substitution, point estimates
    are then polished by the bounded trust region: both stay in the box and fit equally well."""
    from axisrl.pricing.estimate import _SLOPE_BOUNDS, _fit_logistic, logistic

    ratio, s = np.array([0.25, 0.5, 1, 2, 4, 8, 16]), np.array(s)
    start = [np.array([0.5, 0.5, 2.0, 0.0])]
    fits = [_fit_logistic(ratio, s, np.full_like(s, 0.02), start, polish=p) for p in (False, True)]
    costs = []
    for lower, drop, slope, log_mid in fits:
        assert lower >= 0.0 and drop >= 0.0 and _SLOPE_BOUNDS[0] <= slope <= _SLOPE_BOUNDS[1]
        costs.append(float(np.sum((logistic(ratio, lower, lower + drop, slope, np.exp(log_mid)) - s) ** 2)))
    assert costs[1] <= costs[0] + 1e-9
    assert costs[0] == pytest.approx(costs[1], abs=1e-6)
