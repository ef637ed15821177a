"""Per-axis fits: hand-computed values on noise-free data, one estimand per column, failed runs,
too few points, leave-one-out and ordering. Interval coverage: ``test_laws_calibration.py``."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import polars as pl
import pytest
from scipy import optimize

from axisrl.laws import (
    Law,
    axis_ordering,
    fit_axes,
    fit_axes_by,
    fit_floor,
    floor_profile,
    leave_one_out,
    local_slopes,
    predict_loss,
    simulate_study,
    success_trends,
)

TRUE_ALPHA = {"d_env": 0.45, "d_task": 0.30, "d_traj": 0.15}
CENTRE = {"d_env": 8, "d_task": 32, "d_traj": 8}
FLOOR_LAW = Law(
    E=0.1, A={"d_env": 2.0, "d_task": 0.1, "d_traj": 0.1}, alpha={"d_env": 0.5, "d_task": 0.3, "d_traj": 0.2}
)
"""Additive law whose d_env sweep has a small floor (0.2), so the floor exponent is identifiable."""


def product_law(designs: pl.DataFrame) -> np.ndarray:
    """``L = 1.2 prod (x / centre)^-alpha``: every one-axis sweep is an exact power law."""
    return 1.2 * np.prod([(designs[a].to_numpy() / c) ** -TRUE_ALPHA[a] for a, c in CENTRE.items()], axis=0)


def exact_runs(
    loss: Callable[[pl.DataFrame], np.ndarray], grids: dict[str, list[int]], trials: int = 10**9
) -> pl.DataFrame:
    """Noise-free runs in the user schema (successes/trials, no seed or status): one per design."""
    designs = pl.DataFrame([CENTRE | {axis: x} for axis, values in grids.items() for x in values]).unique(
        maintain_order=True
    )
    successes = np.round(np.exp(-loss(designs)) * trials).astype(np.int64)
    return designs.with_columns(successes=successes, trials=pl.lit(trials, dtype=pl.Int64))


GRIDS = {"d_env": [1, 2, 4, 8, 16, 32], "d_task": [8, 16, 32, 64, 128, 256], "d_traj": [2, 4, 8, 16, 32, 64]}


def test_floor_profile_matches_nnls() -> None:
    rng = np.random.default_rng(0)
    x = np.array([1.0, 2, 4, 8, 16, 32])
    for _ in range(50):
        loss, weight = rng.uniform(0.05, 3, 6), rng.uniform(0.5, 20, 6)
        alphas = rng.uniform(0.01, 1.5, 4)
        rss, E, A = floor_profile(alphas, x, loss, weight)
        for i, alpha in enumerate(alphas):
            design = np.column_stack([np.ones(6), x**-alpha]) * np.sqrt(weight)[:, None]
            (E_ref, A_ref), norm = optimize.nnls(design, loss * np.sqrt(weight))
            assert rss[i] == pytest.approx(norm**2, rel=1e-9, abs=1e-12)
            assert (E[i], A[i]) == pytest.approx((E_ref, A_ref), rel=1e-7, abs=1e-10)


def test_variable_projection_recovers_noise_free_floor_law() -> None:
    x = np.array([1.0, 2, 4, 8, 16, 32])
    fit = fit_floor(x, 0.3 + 1.5 * x**-0.4, np.ones_like(x))
    assert (fit.alpha, fit.E, fit.A) == pytest.approx((0.4, 0.3, 1.5), abs=1e-5)
    assert fit.alpha_lo < 0.4 < fit.alpha_hi


def test_fit_axes_on_noise_free_runs() -> None:
    law = Law(
        E=0.1, A={"d_env": 1.5, "d_task": 0.5, "d_traj": 0.4}, alpha={"d_env": 0.4, "d_task": 0.25, "d_traj": 0.6}
    )
    fit = fit_axes(exact_runs(lambda d: predict_loss(law, d), GRIDS))
    assert fit["floor_alpha"].to_list() == pytest.approx([0.4, 0.25, 0.6], abs=1e-4)
    held_terms = {a: law.A[a] * CENTRE[a] ** -law.alpha[a] for a in CENTRE}
    per_axis_floor = [law.E + sum(t for b, t in held_terms.items() if b != a) for a in CENTRE]
    assert fit["floor_E"].to_list() == pytest.approx(per_axis_floor, abs=1e-4)
    assert fit["aicc_prefers"].to_list() == ["floor"] * 3
    assert fit["floor_identified"].to_list() == [True] * 3
    # alpha stays the log-log slope although AICc prefers the floor law: flatter than the floor exponent
    x = np.array(GRIDS["d_env"], dtype=float)
    curve = per_axis_floor[0] + law.A["d_env"] * x ** -law.alpha["d_env"]
    assert fit["alpha"][0] == pytest.approx(-np.polyfit(np.log(x), np.log(curve), 1)[0], abs=0.02)
    assert fit["alpha"][0] < 0.4 - 0.1
    power = fit_axes(exact_runs(product_law, GRIDS))
    assert power["alpha"].to_list() == pytest.approx(list(TRUE_ALPHA.values()), abs=1e-6)
    assert fit["n_failed_excluded"].to_list() == [0] * 3


def test_a_flat_sweep_leaves_the_floor_exponent_unidentified() -> None:
    fit = fit_axes(exact_runs(lambda d: np.full(d.height, 1.2), {"d_env": GRIDS["d_env"]}), ["d_env"]).row(
        0, named=True
    )
    assert fit["alpha"] == pytest.approx(0, abs=1e-6)
    assert not fit["floor_identified"] and fit["floor_note"]


def test_local_slopes_hand_computed() -> None:
    law = Law(E=0.5, A={"d_env": 2.0}, alpha={"d_env": 0.5})
    slopes = local_slopes(exact_runs(lambda d: predict_loss(law, d), {"d_env": [1, 4, 16]}), ["d_env"])
    # L = 2.5, 1.5, 1.0: slope_1 = -ln(1.5/2.5)/ln 4, slope_2 = -ln(1.0/1.5)/ln 4
    assert slopes["slope"].to_list() == pytest.approx(
        [np.log(2.5 / 1.5) / np.log(4), np.log(1.5) / np.log(4)], abs=1e-6
    )
    assert slopes[["x_lo", "x_hi"]].rows() == [(1.0, 4.0), (4.0, 16.0)]
    assert (slopes["slope_se"] > 0).all()


def test_success_trend_hand_computed() -> None:
    """p = 0.1 + 0.05 log2 x exactly: the slope per doubling is 0.05, with a zero-width interval."""
    grid = {"d_env": [1, 2, 8, 32]}
    trend = success_trends(
        exact_runs(lambda d: -np.log(0.1 + 0.05 * np.log2(d["d_env"].to_numpy())), grid), ["d_env"]
    ).row(0, named=True)
    assert trend["slope"] == pytest.approx(0.05, abs=1e-6)
    assert trend["slope_hi"] - trend["slope_lo"] == pytest.approx(0, abs=1e-6)
    assert (trend["n_runs"], trend["n_points"]) == (4, 4)


def bimodal_law(
    learn_rate: Callable[[np.ndarray], np.ndarray], seed: int, p_learned: float = 0.35, p_stuck: float = 0.03
) -> Callable[[pl.DataFrame], np.ndarray]:
    """Each run learns (success ``p_learned``) with probability ``learn_rate(d_env)``, else stays
    near zero: the bimodal seeds of the tiny backend, whose mean success is
    ``p_stuck + learn_rate (p_learned - p_stuck)``."""
    rng = np.random.default_rng(seed)

    def loss(runs: pl.DataFrame) -> np.ndarray:
        learned = rng.random(runs.height) < learn_rate(runs["d_env"].to_numpy())
        return -np.log(np.where(learned, p_learned, p_stuck))

    return loss


@pytest.mark.parametrize(("base", "per_doubling"), [(0.3, 0.08), (0.05, 0.17), (0.5, 0.0)])
def test_success_trend_interval_covers_on_bimodal_studies(base: float, per_doubling: float) -> None:
    """Learning rates rising linearly in log2 d_env (the true trend is linear, so OLS targets it),
    mild and strong heteroscedasticity, and no trend: the interval covers the truth and, with no
    trend, rarely claims a rise."""
    truth = per_doubling * (0.35 - 0.03)
    covered, rises = [], []
    for study in range(200):
        law = bimodal_law(lambda d: base + per_doubling * np.log2(d), seed=study)
        runs = simulate_study(
            law, grids={"d_env": (1, 2, 4, 8, 16, 32)}, seeds=(0, 1, 2, 3), n_tasks=354, seed=study
        ).runs
        trend = success_trends(runs, ["d_env"], tier="T2").row(0, named=True)
        covered.append(trend["slope_lo"] <= truth <= trend["slope_hi"])
        rises.append(trend["slope_lo"] > 0)
    assert np.mean(covered) >= 0.92, np.mean(covered)
    if per_doubling == 0:
        assert np.mean(rises) <= 0.06, np.mean(rises)


def test_failed_runs_excluded_and_counted() -> None:
    runs = simulate_study(product_law, seed=1).runs
    failed = runs.filter(pl.col("d_env").is_in([1, 32]), pl.col("seed") == 0)["run_key"]
    runs = runs.with_columns(
        status=pl.when(pl.col("run_key").is_in(failed.implode())).then(pl.lit("failed")).otherwise(pl.col("status"))
    )
    with pytest.warns(UserWarning, match="2 failed runs excluded"):
        fit = fit_axes(runs)
    d_env = fit.filter(pl.col("axis") == "d_env").row(0, named=True)
    assert (d_env["n_failed_excluded"], d_env["n_runs"], d_env["n_points"]) == (2, 16, 6)
    assert fit.filter(pl.col("axis") == "d_task")["n_failed_excluded"].to_list() == [0]


def test_too_few_points_say_so() -> None:
    runs = simulate_study(
        product_law, grids={"d_env": (1, 2, 4, 8), "d_task": (16, 32), "d_traj": (4, 8, 16)}, seed=2
    ).runs
    fit = fit_axes(runs, centre=CENTRE)
    status = {r["axis"]: (r["status"], r["floor_alpha"] is not None) for r in fit.iter_rows(named=True)}
    assert status == {"d_env": ("ok", True), "d_task": ("too_few_points", False), "d_traj": ("ok", False)}
    d_task = fit.filter(pl.col("axis") == "d_task").row(0, named=True)
    assert d_task["alpha"] is None and "2 usable grid points" in d_task["reason"]
    d_traj = fit.filter(pl.col("axis") == "d_traj").row(0, named=True)
    assert not d_traj["floor_identified"] and "the floor law needs 4" in d_traj["floor_note"]


def test_mixed_settings_refused_and_grouped() -> None:
    small = simulate_study(product_law, width=32, seed=3).runs
    large = simulate_study(lambda d: 0.8 * product_law(d), width=128, seed=4).runs
    with pytest.raises(ValueError, match="width"):
        fit_axes(pl.concat([small, large]))
    grouped = fit_axes_by(pl.concat([small, large]), ["width"])
    assert grouped.group_by("width").len().sort("width").rows() == [(32, 3), (128, 3)]


def test_leave_one_out_rows() -> None:
    loo = leave_one_out(simulate_study(product_law, seed=5).runs, ["d_task"])
    counts = loo.group_by("left_out").len().sort("left_out").rows()
    assert counts == [("point", 6), ("seed", 3)]
    assert loo["delta_alpha"].abs().max() < 0.2


def test_ordering_differences_are_the_slopes_differences() -> None:
    runs = simulate_study(product_law, n_tasks=512, seed=6).runs
    alpha = dict(fit_axes(runs).select("axis", "alpha").iter_rows())
    ordering = {(r["axis_a"], r["axis_b"]): r for r in axis_ordering(runs).iter_rows(named=True)}
    assert set(ordering) == {("d_env", "d_task"), ("d_env", "d_traj"), ("d_task", "d_traj")}
    for (a, b), row in ordering.items():
        assert row["alpha_diff"] == pytest.approx(alpha[a] - alpha[b], abs=1e-9)
        assert row["alpha_diff_lo"] < TRUE_ALPHA[a] - TRUE_ALPHA[b] < row["alpha_diff_hi"]
    assert ordering[("d_env", "d_traj")]["alpha_diff_lo"] > 0 and ordering[("d_env", "d_traj")]["p_value"] < 0.05
