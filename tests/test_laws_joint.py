"""Joint law: exact recovery on noise-free data (additive with N, nested interaction), the nested
model chosen on noisy data, the GLM pre-test, and the Chinchilla reproduction on Epoch's data."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from axisrl.laws import (
    Law,
    bootstrap_joint,
    fit_chinchilla,
    fit_joint,
    fitted_law,
    interaction_pretest,
    predict_loss,
    simulate_study,
)

CHINCHILLA_CSV = Path(__file__).parent / "data" / "chinchilla_epoch_svg_extracted.csv"
"""Epoch AI's points digitised from the Chinchilla paper's figure (the data of their 2024 replication)."""
EPOCH = {"E": 1.82, "A": 482.0, "B": 2085.0, "alpha": 0.348, "beta": 0.366}
CENTRE = {"d_env": 8, "d_task": 32, "d_traj": 8, "width": 64}
GRIDS = {"d_env": [1, 2, 4, 8, 16, 32], "d_task": [8, 16, 32, 64, 128, 256], "d_traj": [2, 4, 8, 16, 32, 64]}
FACTORIAL = {"d_env": [1, 2, 4, 8, 16, 32], "d_task": [8, 32, 128]}
AXES = ("d_env", "d_task", "d_traj")
NESTED = Law(
    E=0.1,
    A={"d_env": 1.0, "d_task": 2.0, "d_traj": 0.8},
    alpha={"d_env": 0.5, "d_task": 0.4, "d_traj": 0.3},
    m_star=4.0,
    k_star=16.0,
)


def exact_runs(
    law: Law, grids: dict[str, list[int]], factorial: dict[str, list[int]] | None = None, trials: int = 10**9
) -> pl.DataFrame:
    """Noise-free runs (successes/trials schema): one-axis sweeps plus an optional factorial."""
    rows = [CENTRE | {axis: x} for axis, values in grids.items() for x in values]
    if factorial:
        rows += [CENTRE | dict(zip(factorial, combo, strict=True)) for combo in itertools.product(*factorial.values())]
    designs = pl.DataFrame(rows).unique(maintain_order=True)
    successes = np.round(np.exp(-predict_loss(law, designs)) * trials).astype(np.int64)
    return designs.with_columns(successes=successes, trials=pl.lit(trials, dtype=pl.Int64))


def parameters(fit: pl.DataFrame, model: str) -> dict[str, float]:
    row = fit.filter(pl.col("model") == model).row(0, named=True)
    return {k: v for k, v in row.items() if k == "E" or k.startswith(("A_", "alpha_")) or k in ("m_star", "k_star")}


def test_additive_law_with_model_size_recovered_exactly() -> None:
    axes = [*AXES, "width"]
    law = Law(
        E=0.1,
        A={"d_env": 1.0, "d_task": 2.0, "d_traj": 0.8, "width": 3.0},
        alpha={"d_env": 0.5, "d_task": 0.4, "d_traj": 0.3, "width": 0.35},
    )
    fit = fit_joint(exact_runs(law, GRIDS | {"width": [16, 32, 64, 128, 256]}), axes, models=("additive",))
    got = parameters(fit, "additive")
    assert got["E"] == pytest.approx(0.1, abs=1e-4)
    for axis in axes:
        assert got[f"alpha_{axis}"] == pytest.approx(law.alpha[axis], abs=1e-4)
        assert got[f"A_{axis}"] == pytest.approx(law.A[axis], rel=1e-4)
    assert fit["selected"].to_list() == [True]


def test_nested_law_recovered_exactly_and_selected() -> None:
    fit = fit_joint(exact_runs(NESTED, GRIDS, FACTORIAL))
    got = parameters(fit, "nested")
    assert (got["m_star"], got["k_star"]) == pytest.approx((4.0, 16.0), rel=1e-3)
    assert [got[f"alpha_{a}"] for a in AXES] == pytest.approx([0.5, 0.4, 0.3], abs=1e-4)
    assert got["E"] == pytest.approx(0.1, abs=1e-4)
    assert fit.filter(pl.col("selected"))["model"].item() == "nested"
    law = fitted_law(fit)
    designs = pl.DataFrame([{"d_env": 2, "d_task": 64, "d_traj": 4}, {"d_env": 16, "d_task": 8, "d_traj": 32}])
    assert predict_loss(law, designs) == pytest.approx(predict_loss(NESTED, designs), rel=1e-4)


@pytest.mark.parametrize("seed", [0, 1])
def test_nested_interaction_found_in_noisy_study(seed: int) -> None:
    study = simulate_study(NESTED, interaction=FACTORIAL, n_tasks=1024, seed=seed)
    at_centre_traj = study.runs.filter(pl.col("d_traj") == 8)
    fit = fit_joint(at_centre_traj, ["d_env", "d_task"])
    assert fit.filter(pl.col("selected"))["model"].item() == "nested"
    assert 2.5 < parameters(fit, "nested")["m_star"] < 6.0
    pretest = interaction_pretest(study.runs)
    assert pretest["p_value"][0] < 0.01 and pretest["beta_interaction"][0] > 0
    assert pretest["inner_slope"].is_sorted()


def test_additive_truth_keeps_additive_model() -> None:
    law = Law(E=0.1, A=NESTED.A, alpha=NESTED.alpha)
    fit = fit_joint(simulate_study(law, interaction=FACTORIAL, n_tasks=1024, seed=1).runs)
    assert fit.filter(pl.col("selected"))["model"].item() == "additive"
    assert fit["cv_rmse"].min() < 0.05


def test_pretest_needs_a_factorial() -> None:
    runs = simulate_study(NESTED, seed=0).runs.filter(pl.col("d_traj") == 8, pl.col("d_env") == 8)
    with pytest.raises(ValueError, match="factorial"):
        interaction_pretest(runs)


def test_chinchilla_objective_on_noise_free_law() -> None:
    law = Law(E=0.2, A={"d_env": 1.0, "d_task": 2.0}, alpha={"d_env": 0.5, "d_task": 0.4})
    fit = fit_joint(
        exact_runs(law, {a: GRIDS[a] for a in ("d_env", "d_task")}, FACTORIAL),
        ["d_env", "d_task"],
        objective="chinchilla",
    )
    got = parameters(fit, "additive")
    assert fit["objective"].item() == "chinchilla" and fit["status"].item() == "ok"
    assert (got["E"], got["alpha_d_env"], got["alpha_d_task"]) == pytest.approx((0.2, 0.5, 0.4), abs=1e-3)


def test_chinchilla_reproduces_epoch_estimates() -> None:
    data = pl.read_csv(CHINCHILLA_CSV).select(
        N=pl.col("Model Size"), D=pl.col("Training FLOP") / (6 * pl.col("Model Size")), loss=pl.col("loss")
    )
    data = data.sort("loss").head(data.height - 5)  # Epoch drops the 5 highest-loss points
    fit = fit_chinchilla(data, ["N", "D"]).row(0, named=True)
    got = {"E": fit["E"], "A": fit["A_N"], "B": fit["A_D"], "alpha": fit["alpha_N"], "beta": fit["alpha_D"]}
    print(f"Chinchilla refit: {got}")
    assert fit["status"] == "ok"
    for name in ("E", "alpha", "beta"):
        assert got[name] == pytest.approx(EPOCH[name], rel=0.02), name
    for name in ("A", "B"):
        assert got[name] == pytest.approx(EPOCH[name], rel=0.15), name


def test_joint_bootstrap_draws_scatter_around_the_truth():
    truth = Law(
        E=0.2, A={"d_env": 1.0, "d_task": 0.8, "d_traj": 0.6}, alpha={"d_env": 0.5, "d_task": 0.3, "d_traj": 0.2}
    )
    study = simulate_study(truth, interaction=FACTORIAL, seeds=(0, 1), n_tasks=512, seed=3)
    fit = fit_joint(study.runs, models=("additive",))
    draws = bootstrap_joint(study.runs, fit, n_boot=60, seed=0, episodes=study.episodes)
    alphas = np.array([[law.alpha[a] for a in AXES] for law in draws])
    low, high = np.percentile(alphas, [2.5, 97.5], axis=0)
    assert len(draws) == 60 and (high - low > 0.01).all()
    assert ((low <= [0.5, 0.3, 0.2]) & ([0.5, 0.3, 0.2] <= high)).all(), (low, high)
