"""The compute-optimal recipe: cost model, Lagrangian solve, exponents and baseline strategies.

Closed forms are the ground truth where they exist: a product constraint gives
``a_i = (1/alpha_i) / sum_j 1/alpha_j``; every cost gives ``sum_i (eps_i/C) a_i = 1``.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import replace

import numpy as np
import polars as pl
import pytest

from axisrl.laws.joint import Law, predict_loss
from axisrl.recipe import (
    RECIPE_AXES,
    TERMS,
    CostModel,
    InfeasibleBudget,
    SyntheticOption,
    bootstrap_exponents,
    chinchilla_transfer,
    compute_efficiency,
    exponents,
    log_budgets,
    paper_convention,
    recipe,
    recipe_path,
    solve,
    trajectories_only,
)
from axisrl.recipe.problem import _loss_and_log_gradient, _Problem
from axisrl.recipe.solve import _solve, draw_path

DATA_ALPHA = {"d_env": 0.5, "d_task": 0.3, "d_traj": 0.15}
LAW = Law(
    E=0.2,
    A={"width": 2.0, "d_env": 3.0, "d_task": 4.0, "d_traj": 1.5},
    alpha={"width": 0.3, "d_env": 0.5, "d_task": 0.3, "d_traj": 0.15},
)
NESTED = Law(E=0.2, A=LAW.A, alpha=LAW.alpha, m_star=20.0, k_star=30.0)
LINEAR = CostModel("usd", visits=256.0, c_width=50.0, c_env=20.0, c_task=1.0, c_traj=0.05, terms=("linear",))
FULL = CostModel(
    "gpu_seconds",
    visits=256.0,
    c_width=50.0,
    c_env=20.0,
    c_task=1.0,
    c_traj=0.05,
    c_token=1e-6,
    tokens_per_rollout=1000.0,
    model_size_exponent=2.0,
    steps_per_rollout=4.0,
    env_seconds_per_call=0.5,
    verifier_seconds_per_rollout=1.0,
    c_second=1e-3,
    failed_fraction=0.2,
    utilization=0.5,
)
WIDTH = {"width": (1.0, 1e6)}
DESIGN = {"width": 64.0, "d_env": 30.0, "d_task": 500.0, "d_traj": 8.0}


class ProductCost:
    """``C = D_E * D_T * D_tau``: the unit monomial cost, whose optimum has a closed form."""

    currency = "unit"

    def cost(self, x: Mapping[str, np.ndarray]) -> np.ndarray:
        return np.asarray(x["d_env"], float) * np.asarray(x["d_task"], float) * np.asarray(x["d_traj"], float)

    def log_gradient(self, x: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        c = self.cost(x)
        return {"width": np.zeros_like(c), "d_env": c, "d_task": c, "d_traj": c}


def _inverse_alpha_rule(alpha: Mapping[str, float]) -> dict[str, float]:
    total = sum(1 / a for a in alpha.values())
    return {axis: (1 / a) / total for axis, a in alpha.items()}


# --- cost model ------------------------------------------------------------------------------------


def test_full_cost_matches_the_stated_formula():
    n, d_env, d_task, d_traj = DESIGN.values()
    rollouts = FULL.visits * d_traj  # the training budget's visits, d_traj rollouts each
    expected = (
        50.0 * n / 0.5
        + 20.0 * d_env
        + 1.0 * d_task
        + rollouts / 0.8 * (0.05 + 1e-6 * n**2 * 1000.0 / 0.5 + (4.0 * 0.5 + 1.0) * 1e-3)
    )
    assert float(FULL.cost(DESIGN)) == pytest.approx(expected, rel=1e-12)
    linear = 50.0 * n + 20.0 * d_env + d_task + 0.05 * rollouts
    assert float(LINEAR.cost(DESIGN)) == pytest.approx(linear, rel=1e-12)


def test_each_term_in_table19_order_raises_the_cost():
    models = FULL.progression()
    assert [label for label, _ in models] == ["linear", "+bilinear", "+latency", "+failure", "+utilization"]
    assert models[-1][1].terms == TERMS
    costs = [float(model.cost(DESIGN)) for _, model in models]
    assert all(later > earlier for earlier, later in itertools.pairwise(costs))
    # each coefficient moves the cost the expected way
    for name in ("c_width", "c_env", "c_task", "c_traj", "c_token", "env_seconds_per_call", "failed_fraction"):
        assert float(FULL.perturbed(name, 1.5).cost(DESIGN)) > float(FULL.cost(DESIGN)), name
    assert float(FULL.perturbed("utilization", 1.5).cost(DESIGN)) < float(FULL.cost(DESIGN))
    # N is a width: with model_size_exponent 2 the bilinear term grows as width^2
    bilinear = CostModel(
        "flop",
        visits=256.0,
        c_token=1e-6,
        tokens_per_rollout=1000.0,
        model_size_exponent=2.0,
        terms=("linear", "bilinear"),
    )
    assert float(bilinear.cost(DESIGN | {"width": 128.0})) == pytest.approx(4 * float(bilinear.cost(DESIGN)))


@pytest.mark.parametrize("label", ["linear", "+bilinear", "+latency", "+failure", "+utilization"])
def test_log_gradient_matches_finite_differences(label):
    model = dict(FULL.progression())[label]
    grid = {a: np.array([v, 3.0 * v]) for a, v in DESIGN.items()}
    analytic = model.log_gradient(grid)
    step = 1e-4
    for axis in RECIPE_AXES:
        up = model.cost(grid | {axis: grid[axis] * np.exp(step)})
        down = model.cost(grid | {axis: grid[axis] * np.exp(-step)})
        np.testing.assert_allclose(analytic[axis], (up - down) / (2 * step), rtol=1e-6)


@pytest.mark.parametrize(
    "config, match",
    [
        ({"currency": "usd", "c_env": -1.0, "visits": 1.0}, "c_env"),
        ({"currency": "usd", "failed_fraction": 1.0, "visits": 1.0}, "failed_fraction"),
        ({"currency": "usd", "utilization": 0.0, "visits": 1.0}, "utilization"),
        ({"currency": "usd", "utilization": 1.2, "visits": 1.0}, "utilization"),
        ({"currency": "usd", "terms": ["linear", "turbo"], "visits": 1.0}, "terms"),
        ({"currency": "", "visits": 1.0}, "currency"),
        ({"currency": "usd", "c_gpu": 1.0, "visits": 1.0}, "unknown"),
        ({"currency": "usd", "visits": 0.0}, "visits"),
    ],
)
def test_cost_model_refuses_bad_coefficients(config, match):
    with pytest.raises(ValueError, match=match):
        CostModel.from_mapping(config)


def test_from_mapping_orders_terms_and_perturbed_scales_one_coefficient():
    model = CostModel.from_mapping({"currency": "flop", "visits": 8.0, "c_env": 2.0, "terms": ["failure", "linear"]})
    assert model.terms == ("linear", "failure")
    assert model.perturbed("c_env", 0.5).c_env == 1.0
    with pytest.raises(ValueError, match="failed_fraction"):
        FULL.perturbed("failed_fraction", 5.0)
    with pytest.raises(ValueError, match="cannot perturb"):
        FULL.perturbed("currency", 1.5)
    with pytest.raises(ValueError, match="collapse"):
        SyntheticOption(kappa=0.5, r_cap=2.0, unit_cost=1.0, r_star=1.4)


# --- solve -----------------------------------------------------------------------------------------


def test_loss_gradient_of_nested_law_matches_predict_loss_and_finite_differences():
    frame = pl.DataFrame({a: [v] for a, v in DESIGN.items()})
    loss, gradient = _loss_and_log_gradient(NESTED, DESIGN)
    assert loss == pytest.approx(float(predict_loss(NESTED, frame)[0]), rel=1e-12)
    step = 1e-6
    for axis in RECIPE_AXES:
        up = _loss_and_log_gradient(NESTED, DESIGN | {axis: DESIGN[axis] * np.exp(step)})[0]
        down = _loss_and_log_gradient(NESTED, DESIGN | {axis: DESIGN[axis] * np.exp(-step)})[0]
        assert gradient[axis] == pytest.approx((up - down) / (2 * step), rel=1e-6)


def test_product_constraint_gives_the_inverse_alpha_exponents():
    law = Law(E=0.1, A=dict.fromkeys(DATA_ALPHA, 1.0), alpha=DATA_ALPHA)
    path = recipe_path(law, ProductCost(), log_budgets(1e25, 1e40), bounds={}, fixed={"width": 1.0}, starts=3)
    assert path.height == 15 and (path["status"] == "ok").all()
    table = exponents(path)
    slopes = dict(zip(table["axis"], table["slope"], strict=True))
    expected = _inverse_alpha_rule(DATA_ALPHA)
    assert [round(expected[a], 3) for a in DATA_ALPHA] == [0.167, 0.278, 0.556]
    for axis, value in expected.items():
        assert slopes[axis] == pytest.approx(value, abs=1e-3)
        assert table.filter(pl.col("axis") == axis)["local_mid"][0] == pytest.approx(value, abs=1e-3)
    assert slopes["width"] == 0.0 and table.filter(pl.col("axis") == "width")["pinned"][0]
    assert slopes["sum"] == pytest.approx(1.0, abs=1e-3)
    # the paper's normalisation is a different (reversed) ordering, labelled as such
    paper = paper_convention(law)
    assert paper["paper_exponent"].to_list() == pytest.approx([0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95])
    assert paper["convention"].str.contains("not a Lagrangian solution").all()


def test_linear_cost_satisfies_kkt_and_the_share_identity():
    path = recipe_path(LAW, LINEAR, log_budgets(1e4, 1e8), bounds=WIDTH, starts=3)
    assert (path["status"] == "ok").all()
    assert (path["kkt_spread"] < 1e-4).all()
    weighted = sum(path[f"share_{a}"] * path[f"local_{a}"] for a in RECIPE_AXES)
    np.testing.assert_allclose(weighted.to_numpy(), 1.0, atol=1e-3)
    table = exponents(path)
    identity = table.filter(pl.col("axis") == "share_weighted_sum")
    for end in ("low", "mid", "high"):
        assert identity[f"local_{end}"][0] == pytest.approx(1.0, abs=1e-3)
    assert table.filter(pl.col("axis") == "sum")["slope"][0] > 1.2  # linear costs: exponents do not sum to 1
    # independent KKT check at one interior solution: alpha_i T_i / eps_i equal across axes
    allocation = solve(LAW, LINEAR, 1e5, bounds=WIDTH, starts=3)
    assert allocation.binding == ()
    eps = LINEAR.log_gradient(allocation.values)
    ratios = [LAW.alpha[a] * LAW.A[a] * allocation.values[a] ** -LAW.alpha[a] / float(eps[a]) for a in RECIPE_AXES]
    assert np.ptp(ratios) / np.mean(ratios) < 1e-4
    assert allocation.cost == pytest.approx(1e5, rel=1e-8)


def test_full_cost_and_nested_law_keep_kkt_and_identity():
    path = recipe_path(NESTED, FULL, log_budgets(1e5, 1e8, 4), bounds={"width": (16.0, 4096.0)}, starts=3)
    assert (path["status"] == "ok").all()
    assert (path["kkt_spread"].fill_nan(0.0) < 1e-4).all()
    weighted = sum(path[f"share_{a}"] * path[f"local_{a}"] for a in RECIPE_AXES)
    np.testing.assert_allclose(weighted.to_numpy(), 1.0, atol=1e-3)
    predicted = predict_loss(NESTED, path.select(RECIPE_AXES))
    np.testing.assert_allclose(path["predicted_loss"].to_numpy(), predicted, rtol=1e-12)
    np.testing.assert_allclose(path["predicted_success"].to_numpy(), np.exp(-predicted), rtol=1e-12)


def test_draw_path_matches_the_multistart_path():
    budgets = log_budgets(1e5, 1e8, 6)
    for law, model, bounds in ((LAW, LINEAR, WIDTH), (NESTED, FULL, {"width": (16.0, 4096.0)})):
        full = recipe_path(law, model, budgets, bounds=bounds, starts=3, local=False)
        for near in (None, full.row(0, named=True)):
            warm = draw_path(law, model, budgets, bounds=bounds, starts=3, near=near)
            assert (warm["status"] == "ok").all() and warm["binding"].to_list() == full["binding"].to_list()
            for column in (*RECIPE_AXES, "predicted_loss"):
                np.testing.assert_allclose(warm[column].to_numpy(), full[column].to_numpy(), rtol=1e-6)


def test_kkt_check_accepts_the_optimum_and_refuses_another_design_on_the_budget():
    problem = _Problem(NESTED, FULL, 1e6, {"width": (16.0, 4096.0)}, None, None)
    z, status = _solve(problem, 3, 0)
    assert status == "ok" and problem.satisfies_kkt(z)
    assert not problem.satisfies_kkt(problem.start(np.random.default_rng(1)))


def test_binding_bounds_are_reported():
    useless_traj = Law(E=0.2, A={**LAW.A, "d_traj": 1e-4}, alpha=LAW.alpha)
    dear_rollouts = replace(LINEAR, visits=1e5)  # a trajectory per visit costs more than it buys
    allocation = solve(useless_traj, dear_rollouts, 1e6, bounds={"width": (1.0, 300.0)}, starts=4)
    assert allocation.status == "ok"
    assert {"d_traj>=lower", "width<=upper"} <= set(allocation.binding)
    assert allocation.values["d_traj"] == pytest.approx(1.0)
    assert allocation.values["width"] == pytest.approx(300.0)
    path = recipe_path(
        useless_traj, dear_rollouts, log_budgets(1e6, 3e6, 3), bounds={"width": (1.0, 300.0)}, starts=2, local=False
    )
    table = exponents(path).filter(pl.col("axis").is_in(["width", "d_traj"]))
    assert table["pinned"].all() and (table["slope"] == 0.0).all()


def test_budget_outside_the_feasible_costs_raises():
    lowest = {"width": 1.0, "d_env": 1.0, "d_task": 1.0, "d_traj": 1.0}
    minimum = float(LINEAR.cost(lowest))
    with pytest.raises(InfeasibleBudget, match=f"minimum feasible cost {minimum:.6g} usd") as error:
        solve(LAW, LINEAR, 0.5 * minimum, bounds=WIDTH)
    assert error.value.limit == pytest.approx(minimum) and error.value.currency == "usd"
    upper = {"width": (1.0, 10.0), "d_env": (1.0, 100.0), "d_task": (1.0, 1000.0), "d_traj": (1.0, 100.0)}
    maximum = float(LINEAR.cost({a: hi for a, (_, hi) in upper.items()}))
    with pytest.raises(InfeasibleBudget, match=f"maximum feasible cost {maximum:.6g} usd"):
        solve(LAW, LINEAR, 2 * maximum, bounds=upper)
    with pytest.raises(ValueError, match="width"):
        solve(LAW, LINEAR, 1e5, bounds={})


@pytest.mark.parametrize("unit_cost, ratio", [(2.0, 3.0), (30.0, 0.0)])
def test_synthetic_ratio_goes_to_its_cap_when_cheaper_and_to_zero_when_dearer(unit_cost, ratio):
    # real environments cost 20 each; synthetic ones give kappa = 0.5 effective units for unit_cost:
    # 2 / 0.5 = 4 < 20 (cheaper), 30 / 0.5 = 60 > 20 (dearer)
    option = SyntheticOption(kappa=0.5, r_cap=3.0, unit_cost=unit_cost, r_star=9.4)
    allocation = solve(LAW, LINEAR, 1e6, bounds=WIDTH, synthetic={"d_env": option}, starts=4)
    assert allocation.status == "ok"
    assert allocation.ratios["d_env"] == pytest.approx(ratio, abs=1e-9)
    assert ("ratio_d_env<=r_cap" if ratio else "ratio_d_env>=0") in allocation.binding
    real_only = solve(LAW, LINEAR, 1e6, bounds=WIDTH, starts=4)
    assert (allocation.predicted_loss < real_only.predicted_loss) == (ratio > 0)


# --- strategies and efficiency ------------------------------------------------------------------------

REFERENCE = {"width": 100.0, "d_env": 100.0, "d_task": 1000.0, "d_traj": 8.0}


def test_baseline_strategies_spend_the_budget_by_their_rules():
    budget = 1e6
    naive = trajectories_only(LAW, LINEAR, budget, REFERENCE)
    assert naive.cost == pytest.approx(budget, rel=1e-10)
    assert {a: naive.values[a] for a in ("width", "d_env", "d_task")} == {
        a: REFERENCE[a] for a in ("width", "d_env", "d_task")
    }
    assert naive.values["d_traj"] > REFERENCE["d_traj"]
    with pytest.raises(InfeasibleBudget, match="reference design alone"):
        trajectories_only(LAW, LINEAR, 0.5 * float(LINEAR.cost(REFERENCE)), REFERENCE)
    transfer = chinchilla_transfer(LAW, LINEAR, budget, REFERENCE)
    assert transfer.cost == pytest.approx(budget, rel=1e-10)
    factors = [transfer.values[a] / REFERENCE[a] for a in RECIPE_AXES]
    assert np.ptp(factors) < 1e-9 * factors[0] and factors[0] > 1
    held = chinchilla_transfer(LAW, LINEAR, budget, REFERENCE, hold=("width",))
    assert held.values["width"] == REFERENCE["width"] and held.cost == pytest.approx(budget, rel=1e-10)


def test_compute_efficiency_is_one_against_itself_and_at_least_one_against_baselines():
    budget = 1e6
    best = recipe(LAW, LINEAR, budget, bounds=WIDTH, starts=3)
    assert compute_efficiency(LAW, LINEAR, best.predicted_loss, budget, bounds=WIDTH, starts=2) == pytest.approx(
        1.0, abs=1e-6
    )
    for strategy in (trajectories_only, chinchilla_transfer):
        baseline = strategy(LAW, LINEAR, budget, REFERENCE)
        assert baseline.predicted_loss > best.predicted_loss
        assert compute_efficiency(LAW, LINEAR, baseline.predicted_loss, budget, bounds=WIDTH, starts=2) >= 1.0


def test_bootstrap_exponents_resolve_every_draw():
    alphas = [
        DATA_ALPHA,
        {"d_env": 0.45, "d_task": 0.32, "d_traj": 0.15},
        {"d_env": 0.55, "d_task": 0.28, "d_traj": 0.17},
    ]
    draws = [Law(E=0.1, A=dict.fromkeys(DATA_ALPHA, 1.0), alpha=alpha) for alpha in alphas]
    per_draw, intervals = bootstrap_exponents(
        draws, ProductCost(), log_budgets(1e25, 1e35, 4), bounds={}, fixed={"width": 1.0}, starts=2
    )
    assert (per_draw["status"] == "ok").all()
    for k, law in enumerate(draws):
        expected = _inverse_alpha_rule(law.alpha)
        got = per_draw.filter(pl.col("draw") == k)
        for axis, value in expected.items():
            assert got.filter(pl.col("axis") == axis)["slope"][0] == pytest.approx(value, abs=1e-3)
    row = intervals.filter(pl.col("axis") == "d_traj").row(0, named=True)
    assert row["n_draws"] == 3 and row["n_failed"] == 0
    assert row["slope_lo"] <= row["slope_median"] <= row["slope_hi"]


def test_a_draw_without_an_effect_on_an_axis_is_left_out_of_that_axis_interval():
    """Such a draw's slope is the budget the other axes leave, not data (the default study's d_traj
    slope lay outside its own interval when 55 of 100 draws were mixed in)."""
    bounds = {"d_env": (2.0, 64.0), "d_task": (8.0, 1024.0), "d_traj": (1.0, 32.0)}
    law = Law(E=0.3, A={"d_env": 2.0, "d_task": 3.0, "d_traj": 1.0}, alpha={"d_env": 0.5, "d_task": 0.3, "d_traj": 0.2})
    draws = [Law(law.E, law.A, {**law.alpha, "d_traj": a}) for a in (0.15, 0.2, 0.25)]
    draws += [Law(law.E, {**law.A, "d_traj": 0.0}, law.alpha) for _ in range(2)]
    model = CostModel("usd", visits=1024.0, c_width=50.0, c_env=20.0, c_task=1.0, c_traj=0.05, terms=("linear",))
    centre = float(model.cost({"width": 64.0, "d_env": 8.0, "d_task": 64.0, "d_traj": 4.0}))
    per_draw, intervals = bootstrap_exponents(
        draws, model, log_budgets(centre, 1.8 * centre, 4), bounds=bounds, fixed={"width": 64.0}, starts=2
    )
    assert (per_draw["status"] == "ok").all()
    assert per_draw.filter(~pl.col("identified")).select("draw", "axis").rows() == [(3, "d_traj"), (4, "d_traj")]
    row = {r["axis"]: r for r in intervals.iter_rows(named=True)}
    assert row["d_traj"]["n_draws"] == 3 and row["d_env"]["n_draws"] == row["sum"]["n_draws"] == 5
    with_effect = per_draw.filter((pl.col("axis") == "d_traj") & (pl.col("draw") < 3))["slope"]
    assert row["d_traj"]["slope_lo"] == pytest.approx(with_effect.quantile(0.025, "linear"))
    assert row["d_traj"]["slope_hi"] == pytest.approx(with_effect.quantile(0.975, "linear"))


def test_an_axis_the_law_gives_no_effect_is_reported_as_not_identified():
    from axisrl.recipe.study import identification

    law = Law(E=0.1, A={"width": 0.0, "d_env": 1.0, "d_task": 0.5}, alpha={"width": 0.3, "d_env": 0.2, "d_task": 0.4})
    draws = [law, Law(E=0.1, A={"width": 0.2, "d_env": 0.9, "d_task": 0.0}, alpha=law.alpha)]
    table = identification(law, draws)
    assert table.to_dicts() == [
        {"axis": "width", "identified": False, "n_draws_identified": 1},
        {"axis": "d_env", "identified": True, "n_draws_identified": 2},
        {"axis": "d_task", "identified": True, "n_draws_identified": 1},
    ]


def test_tables_19_and_21_mark_an_axis_the_law_gives_no_effect_as_not_identified():
    from dataclasses import asdict

    from axisrl.plan import Design
    from axisrl.recipe.fitted import FittedLaw, RecipeSettings
    from axisrl.recipe.study import perturbation_table, progression_table

    law = Law(E=0.2, A={"width": 0.0, "d_env": 3.0, "d_task": 4.0}, alpha={"width": 0.3, "d_env": 0.5, "d_task": 0.3})
    fitted = FittedLaw(
        pl.DataFrame(),
        law,
        [law],
        {"width": (16.0, 4096.0), "d_env": (1.0, 1e3), "d_task": (1.0, 1e5)},
        Design(d_env=30, d_task=500, d_traj=8, width=64, algo="grpo", reward_density="dense"),
        0.0,
        1.0,
    )
    settings = RecipeSettings(
        tier="T2",
        cost=asdict(FULL),
        budgets={"low": 0.5, "high": 4.0, "n": 4},
        strategies=(),
        validation={},
        n_boot=0,
        seed=0,
        perturbation=0.5,
        train={"updates": 32, "visits_per_update": 8, "capped_update_factor": 4},
    )
    drivers = dict.fromkeys(
        (
            "rollout_steps_per_trajectory",
            "env_seconds_per_call",
            "verifier_seconds_per_trajectory",
            "failed_rollout_fraction",
            "utilization",
            "flops_per_width2_step",
        )
    )  # FULL sets them all
    flags = [f"identified_{axis}" for axis in RECIPE_AXES]
    for table in (progression_table(fitted, settings, drivers), perturbation_table(fitted, FULL, settings)):
        assert table.columns[1:] == [*RECIPE_AXES, "sum", "share_weighted_sum", *flags, "c_low", "c_high"]
        assert table.select(flags).schema == dict.fromkeys(flags, pl.Boolean)
        assert not table["identified_width"].any() and table["identified_width"].null_count() == 0
        assert table["identified_d_env"].all() and table["identified_d_task"].all()
        assert table["identified_d_traj"].is_null().all()  # held at the centre: not a law axis, as in Table 20


def test_default_cost_model_does_not_move_with_measured_wall_times(schema):
    """Two studies with identical runs measure different seconds and utilization (wall clock); with
    the default coefficients the recipe's cost model, and so the designs it plans, are the same.
    A null coefficient still takes the study's measurement."""
    from axisrl.config import validate_config
    from axisrl.recipe.study import cost_model

    settings = validate_config({}, schema)["recipe"]["cost"]["toolworld"]
    counts = {"rollout_steps_per_trajectory": 6.76, "failed_rollout_fraction": 0.548, "flops_per_width2_step": 412.0}
    fast = {**counts, "env_seconds_per_call": 1.80e-5, "verifier_seconds_per_trajectory": 1.12e-5, "utilization": 0.353}
    slow = {**counts, "env_seconds_per_call": 2.5e-5, "verifier_seconds_per_trajectory": 2.0e-5, "utilization": 0.30}
    assert cost_model(settings, fast, 320) == cost_model(settings, slow, 320)
    assert cost_model(settings, fast, 320).steps_per_rollout == 6.76  # count drivers stay measured

    measured = cost_model({**settings, "env_seconds_per_call": None, "utilization": None}, slow, 320)
    assert (measured.env_seconds_per_call, measured.utilization) == (2.5e-5, 0.30)


def test_measured_efficiency_reads_the_recipes_measured_curve_at_what_was_spent():
    from axisrl.recipe.efficiency import _needed_measured, efficiency_table

    costs, success = np.array([1.0, 2.0, 4.0, 8.0]), np.array([0.1, 0.2, 0.15, 0.4])
    assert _needed_measured(costs, success, 0.2) == (pytest.approx(2.0), "measured")
    # success as the running best (the dip at 4 is noise), linear in log compute between levels
    assert _needed_measured(costs, success, 0.3)[0] == pytest.approx(np.exp(np.log(4) + 0.5 * np.log(2)))
    assert _needed_measured(costs, success, 0.05) == (1.0, "below")
    assert _needed_measured(costs, success, 0.5) == (8.0, "above")

    seeds = 2
    rows, seed_runs = [], []
    for strategy, p in (("recipe", (0.2, 0.4)), ("trajectories_only", (0.2, 0.2))):
        for level, success_p in zip((1.0, 2.0), p, strict=True):
            point = f"{strategy}{level:g}"
            rows.append(
                {
                    "role": "strategy",
                    "strategy": strategy,
                    "compute_factor": level,
                    "compute": 100.0 * level,
                    "total_cost": 100.0 * level,
                    "point_key": point,
                    "p": success_p,
                    "trials": 400 * seeds,
                    "p_se": np.sqrt(success_p * (1 - success_p) / (400 * seeds)),
                    "loss": -np.log(success_p),
                    "loss_se": 0.05,
                }
            )
            seed_runs += [{"point_key": point, "successes": int(400 * success_p), "trials": 400}] * seeds
    bounds = {"width": (16.0, 256.0), "d_env": (1.0, 64.0), "d_task": (8.0, 1024.0), "d_traj": (1.0, 64.0)}
    table = efficiency_table(
        pl.DataFrame(rows), pl.DataFrame(seed_runs), LAW, [LAW] * 10, LINEAR, bounds, {}, n_draws=10, n_boot=200, seed=0
    )
    at_two = table.filter(pl.col("compute_factor") == 2.0).row(0, named=True)
    # the recipe reached the baseline's 0.2 at its 1x level: half the compute
    assert at_two["measured_efficiency"] == pytest.approx(2.0) and at_two["measured_status"] == "below"
    at_one = table.filter(pl.col("compute_factor") == 1.0).row(0, named=True)
    assert at_one["measured_efficiency"] == pytest.approx(1.0)
    assert at_one["measured_efficiency_lo"] <= 1.0 <= at_one["measured_efficiency_hi"] and at_one["n_boot"] == 200
