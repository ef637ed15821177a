"""Training budgets: each convention executes what it is charged, and a design that cannot is refused."""

from __future__ import annotations

import copy

import polars as pl
import pytest

from axisrl.backends import tiny
from axisrl.backends.tiny.caps import dearest_visit_flops
from axisrl.budget import CONVENTIONS, PLANNED_CONVENTIONS, TRAIN_KEYS, budget_problems, training_budget, visits_per_run
from axisrl.config import validate_config
from axisrl.domains import toolworld as tw
from axisrl.plan import Design, backend_settings, plan_designs
from axisrl.recipe.designs import charged_design
from axisrl.recipe.study import cost_model, drivers_table
from axisrl.stages.train import cost_drivers

POOL = {
    "n_worlds": 4,
    "variants_per_world": 2,
    "contents_per_variant": 1,
    "reskins_per_world": 0,
    "tasks_per_env": 6,
    "heldout": {
        "tasks_per_env": 3,
        "t0_envs": 2,
        "t1_envs": 2,
        "t2_worlds": 2,
        "t2_variants_per_world": 1,
        "validation_worlds": 0,
    },
}

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def pool(schema) -> tw.Pool:
    return tw.generate_pool(validate_config({"synthesize": POOL}, schema)["synthesize"])


@pytest.fixture(scope="module")
def config(smoke_config) -> dict:
    """The smoke study with every convention swept on d_traj, and runs long enough (400 visits) that
    a FLOP cap, met to the nearest visit, can be met to 2 %."""
    config = copy.deepcopy(smoke_config)
    config["train"] |= {"updates": 100, "token_cap": 4000}
    config["study"]["families"]["budget_conventions"] = {
        "enabled": True,
        "conventions": ["token_cap", "iso_flop"],
        "axes": ["d_traj"],
    }
    return config


def _train(pool: tw.Pool, design: Design, train: dict) -> dict:
    tasks = pool.tasks[: design.d_task]
    envs = [env for env in pool.envs if env["env_id"] in {task["env_id"] for task in tasks}]
    result = tiny.train(envs, tasks, tiny.TrainSettings.from_dict(backend_settings(train, design.as_dict())), seed=0)
    assert result.status == "ok", result.error
    return {
        **result.compute,
        "executed": result.compute["rollout_flops"] + result.compute["train_flops"],
        "timings": result.timings,
        "metrics": result.metrics,
        "horizon": 10.0,
    }  # the pool's step limit (Table 18 only reports it)


@pytest.mark.slow
def test_every_convention_executes_the_budget_it_is_charged(pool, config):
    centre = config["study"]["centre"]
    planned = {
        p.design.budget: p.design
        for p in plan_designs(config["study"]).values()
        if all(getattr(p.design, axis) == value for axis, value in centre.items())
        and p.design.algo == "grpo"
        and p.design.env_level == "s1"
    }
    assert set(planned) == {"fixed_visits", "token_cap", "iso_flop"}
    train = config["train"]

    fixed = planned["fixed_visits"]
    budget = training_budget(fixed.as_dict(), train)
    run = _train(pool, fixed, train)
    assert (run["visits"], run["episodes"], run["updates"]) == (budget.visits, budget.rollouts, budget.updates)

    token = _train(pool, planned["token_cap"], train)
    assert token["env_steps"] == train["token_cap"]

    capped = train | {"flop_cap": float(run["executed"])}
    iso = _train(pool, planned["iso_flop"], capped)
    assert iso["executed"] == pytest.approx(capped["flop_cap"], rel=0.02)

    # the recipe's cost model from the fixed-visits run, and a strategy at twice the centre's cost
    drivers = {"horizon": run["horizon"], **cost_drivers(run, run["timings"], run["horizon"])}
    runs = pl.DataFrame(
        [
            {
                "domain": "toolworld",
                "status": "ok",
                "families": ["axis_sweeps"],
                "width": fixed.width,
                **{k: run[k] for k in ("rollout_flops", "train_flops", "env_steps")},
                **drivers,
            }
        ]
    )
    cost = cost_model(
        config["recipe"]["cost"]["toolworld"] | {"c_env": 1e6, "c_task": 1e5},
        drivers_table(runs).row(0, named=True),
        visits_per_run(train),
    )
    assert float(
        cost.executed({a: float(getattr(fixed, a)) for a in ("width", "d_env", "d_task", "d_traj")})
    ) == pytest.approx(run["executed"], rel=1e-9)  # calibrated on this run: it charges what the run executed
    level = 2 * float(cost.cost({a: float(getattr(fixed, a)) for a in ("width", "d_env", "d_task", "d_traj")}))
    strategy = charged_design(fixed, cost, level, "a test strategy")
    assert strategy.budget == "charged_flops" and strategy.d_traj > fixed.d_traj  # the extra budget buys rollouts
    spent = _train(pool, strategy, train)
    # met to the nearest visit: within half of the dearest a visit can cost (a trained group costs
    # several times an untrained one), and that is a few per cent of the budget at most here
    miss = abs(spent["executed"] - strategy.flop_budget)
    assert miss <= 0.5 * dearest_visit_flops(spent["metrics"]) and miss <= 0.04 * strategy.flop_budget
    assert training_budget(strategy.as_dict(), train).flop_cap == strategy.flop_budget


def test_a_budget_names_what_it_holds_fixed_and_refuses_what_it_cannot_execute(smoke_config, schema):
    train = smoke_config["train"]
    families = schema["properties"]["study"]["properties"]["families"]["properties"]
    assert families["budget_conventions"]["properties"]["conventions"]["items"]["enum"] == list(PLANNED_CONVENTIONS)
    design = Design(d_env=2, d_task=8, d_traj=4, width=16, algo="grpo", reward_density="sparse")
    assert set(CONVENTIONS) == {"fixed_visits", "token_cap", "iso_flop", "charged_flops"}
    fixed = training_budget(design.as_dict(), train)
    assert (fixed.updates, fixed.visits_per_update, fixed.rollouts) == (
        train["updates"],
        train["visits_per_update"],
        train["updates"] * train["visits_per_update"] * 4,
    )
    doubled = training_budget((design.as_dict() | {"d_traj": 8}), train)
    assert doubled.rollouts == 2 * fixed.rollouts  # fixed visits: more trajectories are more rollouts
    capped = training_budget(design.as_dict() | {"budget": "token_cap"}, train)
    assert capped.visits_per_update == train["episodes_per_update"] // 4 and capped.token_cap
    assert budget_problems(design.as_dict() | {"d_task": 2}, train) == [
        f"train.visits_per_update={train['visits_per_update']} exceeds d_task=2 (an update would visit a task twice)"
    ]
    with pytest.raises(ValueError, match="flop_budget exactly when its budget is charged_flops"):
        training_budget(design.as_dict() | {"budget": "charged_flops"}, train)
    # each convention's budget needs no train key but the ones a run's key covers
    for convention, keys in TRAIN_KEYS.items():
        only = {key: train[key] for key in keys}
        charged = {"flop_budget": 1.0} if convention == "charged_flops" else {}
        assert training_budget(design.as_dict() | {"budget": convention} | charged, only).convention == convention


def test_a_strategy_spends_what_rounding_leaves_on_rollouts_or_is_refused(smoke_config):
    from axisrl.recipe import CostModel

    train = smoke_config["train"]
    design = Design(d_env=2, d_task=8, d_traj=4, width=16, algo="grpo", reward_density="sparse")
    model = CostModel(
        "flop",
        visits=float(visits_per_run(train)),
        c_env=10.0,
        c_token=1.0,
        tokens_per_rollout=3.0,
        model_size_exponent=2.0,
        terms=("linear", "bilinear"),
    )
    per_traj = 16.0**2 * 3.0 * visits_per_run(train)
    with pytest.raises(ValueError, match="with one rollout per visit, more than the budget"):
        charged_design(design, model, 20.0 + 0.4 * per_traj, "recipe.strategies: recipe at 1x")
    spend = charged_design(design, model, 20.0 + 6.2 * per_traj, "recipe.strategies: recipe at 1x")
    assert spend.d_traj == 6 and spend.flop_budget == pytest.approx(6.2 * per_traj)
