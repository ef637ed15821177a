import copy
import json
from dataclasses import replace

import polars as pl
import pytest

from axisrl.backends.tiny import TrainSettings
from axisrl.config import ConfigError, load_yaml, validate_config
from axisrl.datasets import PoolTooSmall, select_training_data, task_capacity
from axisrl.plan import AXES, Design, backend_settings, plan_designs, plan_rows, pricing_points, spread
from axisrl.stages import study
from conftest import DEFAULT_CONFIG, ROOT


@pytest.fixture()
def config(schema) -> dict:
    return validate_config(load_yaml(DEFAULT_CONFIG), schema)


def jobs(config, schema):
    """(plan spec, plan rows, grid points' jobs, collect spec) of a config."""
    keyed = study(config, schema)
    rows = plan_rows(plan_designs(config["study"]), config["study"], config["domain"])
    return keyed.specs["plan"], rows, keyed.points, keyed.specs["collect"]


def test_axis_sweeps_share_the_centre_and_the_plan_is_deterministic(config, schema):
    designs = plan_designs(config["study"])
    centre = config["study"]["centre"]
    centres = [
        p
        for p in designs.values()
        if all(getattr(p.design, axis) == centre[axis] for axis in AXES)
        and p.design.budget == "fixed_visits"
        and p.design.width == config["study"]["width"]
        and p.design.algo == "grpo"
        and p.design.env_level == "s1"
        and p.design.reward_density == "sparse"
        and p.design.worlds is None
        and p.design.source == "real"
        and p.design.base is None
    ]
    assert len(centres) == 1 and "axis_sweeps" in centres[0].families
    assert {f"axis_sweeps:{axis}" for axis in AXES} <= set(centres[0].sweeps)
    sweep = [p for p in designs.values() if "axis_sweeps" in p.families]
    assert len(sweep) == sum(len(config["study"]["grids"][a]) for a in AXES) - 2
    for axis in AXES:  # each sweep lists its points: the grid of its axis, the others at the centre
        on_sweep = [p.design for p in designs.values() if f"axis_sweeps:{axis}" in p.sweeps]
        assert sorted(getattr(d, axis) for d in on_sweep) == sorted(config["study"]["grids"][axis])
        assert all(getattr(d, other) == centre[other] for d in on_sweep for other in AXES if other != axis)
    assert jobs(config, schema)[1] == jobs(copy.deepcopy(config), schema)[1]


def test_axis_sweep_points_train_their_extra_seeds_in_a_second_job_and_share_the_first(config, schema):
    study = config["study"]
    _, rows, points, _ = jobs(config, schema)
    designs = plan_designs(study)
    extra = study["families"]["axis_sweeps"]["extra_seeds"]
    seeds = pl.DataFrame(rows, infer_schema_length=None).group_by("point_key").agg(pl.col("seed").sort())
    for point_key, seed_list in seeds.iter_rows():
        on_sweep = "axis_sweeps" in designs[point_key].families
        assert seed_list == study["seeds"] + (extra if on_sweep else [])
        assert points[point_key].seeds == tuple(study["seeds"])
        assert (f"{point_key}+1" in points) == on_sweep
        if on_sweep:
            second = points[f"{point_key}+1"]
            assert second.seeds == tuple(extra) and second.design == designs[point_key].design
    study["families"]["axis_sweeps"]["extra_seeds"] = []
    _, fewer_rows, alone, _ = jobs(config, schema)
    assert alone.keys() == {k for k in points if "+" not in k}
    assert len(fewer_rows) == len(rows) - len(extra) * (len(points) - len(alone))
    assert all(alone[k].train.key == points[k].train.key for k in alone)  # the first job is the same job


def test_every_family_can_be_switched_off(config, schema):
    for family in config["study"]["families"].values():
        family["enabled"] = False
    _, rows, points, _ = jobs(validate_config(config, schema), schema)
    assert rows == [] and points == {}


def test_train_keys_move_with_train_and_evaluation_config_but_not_with_analysis(config, schema):
    """The train job also evaluates, so its key covers the evaluate settings."""
    _, _, points, collect = jobs(config, schema)
    changed = copy.deepcopy(config)
    changed["laws"]["n_boot"] = 10
    _, _, same, same_collect = jobs(changed, schema)
    assert all(points[k].train.key == same[k].train.key for k in points) and collect.key == same_collect.key
    changed["evaluate"]["seed"] = 9
    _, _, moved, moved_collect = jobs(changed, schema)
    assert all(points[k].train.key != moved[k].train.key for k in points)
    assert collect.key != moved_collect.key
    changed = copy.deepcopy(config)
    changed["train"]["lr"] = 0.01
    _, _, moved, _ = jobs(changed, schema)
    assert all(points[k].train.key != moved[k].train.key for k in points)


def test_dynamic_sampling_and_the_kl_bound_key_their_runs_only_when_switched_on(config, schema):
    """Off (the default), the blocks are absent from every design's settings and key (the keys of
    the study before they existed); on, they reach the tiny learner as its flat settings."""
    _, _, points, _ = jobs(config, schema)
    assert not any({"dynamic_sampling", "kl_bound"} & set(point.train.config["settings"]) for point in points.values())
    changed = copy.deepcopy(config)
    changed["train"]["dynamic_sampling"]["max_draws"] = 5  # a setting of a block that is off moves nothing
    _, _, same, _ = jobs(changed, schema)
    assert all(points[k].train.key == same[k].train.key for k in points)
    changed["train"]["dynamic_sampling"]["enabled"] = True
    changed["train"]["kl_bound"]["enabled"] = True
    _, _, moved, _ = jobs(changed, schema)
    assert all(points[k].train.key != moved[k].train.key for k in points)
    settings = next(iter(moved.values())).train.config["settings"]
    assert {k: settings[k] for k in ("dynamic_sampling", "max_draws", "kl_bound", "target_kl")} == {
        "dynamic_sampling": True,
        "max_draws": 5,
        "kl_bound": "adaptive_lr",
        "target_kl": 0.01,
    }
    TrainSettings.from_dict(settings)  # the tiny learner takes them as they are


def test_settings_built_in_code_are_the_default_studys_centre_run(config):
    """The schema is the one source of defaults: ``TrainSettings()`` is what the default study trains
    its centre with, so a test or a bench script that leaves a setting out trains as a study would."""
    centre = Design(**config["study"]["centre"], width=config["study"]["width"], algo="grpo", reward_density="sparse")
    assert TrainSettings.from_dict(backend_settings(config["train"], centre.keyed())) == TrainSettings()
    ppo = replace(centre, algo="ppo")
    assert TrainSettings.from_dict(backend_settings(config["train"], ppo.keyed())) == TrainSettings(algo="ppo")


def test_designs_with_fewer_tasks_than_environments_are_refused(config, schema):
    config["study"]["grids"]["d_env"] = [1, 2, 64]
    with pytest.raises(ConfigError, match="d_env=64 d_task=32"):
        jobs(config, schema)


def test_designs_that_cannot_execute_their_budget_are_refused_with_the_design_named(config, schema):
    visits = copy.deepcopy(config)
    visits["train"]["visits_per_update"] = 16  # more visits per update than the d_task = 8 point has tasks
    with pytest.raises(
        ConfigError,
        match=r"fixed_visits design d_env=\d+ d_task=8 d_traj=8: "
        r"train.visits_per_update=16 exceeds d_task=8 \(an update would visit a task twice\) "
        r"\(axis_sweeps\)",
    ):
        jobs(visits, schema)
    capped = copy.deepcopy(config)
    capped["train"]["episodes_per_update"] = 16  # the token_cap sweep's d_traj = 64 cannot fill one update
    with pytest.raises(
        ConfigError, match="token_cap design .* d_traj=64: d_traj=64 exceeds train.episodes_per_update=16"
    ):
        jobs(capped, schema)


ENVS = pl.DataFrame(
    {
        "env_id": [f"e{i}" for i in range(6)],
        "world_id": ["w0", "w0", "w0", "w1", "w1", "w2"],
        "env_s1": ["a", "a", "b", "c", "d", "e"],
    }
)
TASKS = pl.DataFrame(
    {
        "task_id": [f"t{i:02d}" for i in range(30)],
        "env_id": [f"e{i % 6}" for i in range(30)],
        "keep": [i != 7 for i in range(30)],
    }
)
DESIGN = {
    "d_env": 2,
    "d_task": 6,
    "d_traj": 2,
    "width": 8,
    "algo": "grpo",
    "reward_density": "sparse",
    "env_level": "s1",
    "worlds": None,
}


def test_selection_is_nested_and_spread_over_environments():
    envs, tasks = select_training_data(ENVS, TASKS, DESIGN)
    assert set(envs["env_s1"]) == {"a", "b"}
    assert tasks.join(envs, on="env_id")["env_s1"].value_counts()["count"].to_list() == [3, 3]
    _, more_tasks = select_training_data(ENVS, TASKS, {**DESIGN, "d_task": 10})
    assert more_tasks["task_id"].head(6).to_list() == tasks["task_id"].to_list()
    more_envs, _ = select_training_data(ENVS, TASKS, {**DESIGN, "d_env": 4, "d_task": 8})
    assert set(envs["env_id"]) <= set(more_envs["env_id"])
    assert "t07" not in select_training_data(ENVS, TASKS, {**DESIGN, "d_task": 14})[1]["task_id"].to_list()


def test_task_capacity_is_what_selection_can_deal():
    capacity = task_capacity(ENVS, TASKS)
    assert capacity == [9, 14, 19, 24, 29]  # identity a holds e0 and e1 (t07 on e1 dropped)
    for d_env, most in enumerate(capacity, start=1):
        assert select_training_data(ENVS, TASKS, {**DESIGN, "d_env": d_env, "d_task": most})[1].height == most
        with pytest.raises(PoolTooSmall):
            select_training_data(ENVS, TASKS, {**DESIGN, "d_env": d_env, "d_task": most + 1})


def test_worlds_fix_where_environments_come_from():
    envs, _ = select_training_data(ENVS, TASKS, {**DESIGN, "d_env": 2, "worlds": 2})
    assert sorted(envs["env_s1"].unique()) == ["a", "c"]
    envs, _ = select_training_data(ENVS, TASKS, {**DESIGN, "d_env": 1, "worlds": 1})
    assert envs["env_s1"].unique().to_list() == ["a"]
    with pytest.raises(PoolTooSmall, match="from 3 worlds with 2 each"):
        select_training_data(ENVS, TASKS, {**DESIGN, "d_env": 6, "worlds": 3})


def test_too_small_pool_is_a_clear_error():
    with pytest.raises(PoolTooSmall, match="needs d_env=9"):
        select_training_data(ENVS, TASKS, {**DESIGN, "d_env": 9, "d_task": 9})
    with pytest.raises(PoolTooSmall, match="needs d_task=50"):
        select_training_data(ENVS, TASKS, {**DESIGN, "d_task": 50})


def test_placebo_counts_every_environment_though_they_share_a_signature():
    placebo = ENVS.with_columns(env_s1=pl.lit("a"), world_id=pl.lit("w0"))
    envs, tasks = select_training_data(placebo, TASKS, {**DESIGN, "d_env": 3, "env_level": "placebo"})
    assert envs["env_id"].to_list() == ["e0", "e1", "e2"] and envs["env_s1"].n_unique() == 1
    assert tasks["env_id"].value_counts()["count"].to_list() == [2, 2, 2]
    with pytest.raises(PoolTooSmall, match="raise synthesize.placebo_contents"):
        select_training_data(placebo, TASKS, {**DESIGN, "d_env": 7, "d_task": 7, "env_level": "placebo"})
    with pytest.raises(PoolTooSmall, match="raise synthesize.placebo_tasks_per_env"):
        select_training_data(placebo, TASKS, {**DESIGN, "d_env": 1, "d_task": 6, "env_level": "placebo"})


def test_placebo_sweep_needs_enough_contents(config, schema):
    config["synthesize"]["placebo_contents"] = 8
    with pytest.raises(ConfigError, match="placebo_contents: 8 is below the largest d_env"):
        validate_config(config, schema)


def test_an_option_a_design_does_not_read_never_retrains_it(config, schema):
    _, _, points, _ = jobs(config, schema)
    changed = copy.deepcopy(config)
    changed["train"]["token_cap"] = 12345
    changed["train"]["ppo_epochs"] = 7
    _, _, moved, _ = jobs(changed, schema)
    for key, point in points.items():
        reads = point.design.budget == "token_cap" or point.design.algo == "ppo"
        assert (point.train.key != moved[key].train.key) == reads, point.design


def test_mixtures_price_every_method_with_interpolating_real_baselines(config, schema):
    from axisrl.synthesis import METHODS

    mixtures = config["study"]["families"]["mixtures"]
    points = list(pricing_points(config["study"]))
    for method in mixtures["methods"]:
        axis = METHODS[method].axis
        mine = [p for p in points if p.source == method]
        amounts = sorted({p.real_amount for p in mine})
        assert len(amounts) == (2 if method in mixtures["second_amount"]["methods"] else 1)
        for amount in amounts:
            at = [p for p in mine if p.real_amount == amount]
            ratios = (
                mixtures["ratios"]
                if amount == amounts[0]
                else spread(mixtures["ratios"], mixtures["second_amount"]["ratio_points"])
            )
            assert sorted(p.ratio for p in at if p.role == "mixture") == sorted(map(float, ratios))
            real = sorted(getattr(p.design, axis) for p in at if p.role == "real")
            assert real == [amount * m for m in (1, *mixtures["real_multiples"])]
            assert all(p.design.source == "real" for p in at if p.role == "real")
            if axis == "d_env":  # environments carry their tasks: tasks per environment held
                assert len({p.design.d_task / p.design.d_env for p in at}) == 1
    designs = plan_designs(config["study"])
    swirl = [p.design for p in designs.values() if p.design.source == "swirl" and p.design.ratio == 16.0]
    assert {d.synthetic_amounts()["d_traj_synthetic"] for d in swirl} == {16 * d.d_traj for d in swirl}
    rows = jobs(config, schema)[1]
    assert {"source", "ratio", "d_env_synthetic", "d_task_synthetic", "d_traj_synthetic"} <= set(rows[0])


def test_repeated_sweeps_spread_family_points_over_the_grid_and_the_axis_sweeps_use_all_of_it(config, schema):
    study = config["study"]
    assert spread([1, 2, 4, 8, 16, 32], 4) == [1, 4, 8, 32]
    assert spread([0.25, 0.5, 1, 2, 4, 8, 16], 4) == [0.25, 1, 4, 16]
    assert spread([4, 1, 2], 4) == spread([4, 1, 2], None) == [1, 2, 4]
    assert spread(range(10), 2) == [0, 9]
    study["family_points"] = 3
    designs = plan_designs(study)

    def swept(family: str, axis: str = "d_env") -> list[int]:
        return sorted({getattr(p.design, axis) for p in designs.values() if f"{family}:{axis}" in p.sweeps})

    assert swept("axis_sweeps") == sorted(study["grids"]["d_env"])
    for family in ("pool_s3", "pool_placebo", "model_sizes", "algorithms", "reward_density", "base_strength"):
        assert swept(family) == [1, 4, 32], family
    assert swept("held_axis_half") == [1, 4]  # a d_env sweep stops at the held d_task (16)
    assert swept("held_axis_double") == [1, 4, 32]
    study["family_points"] = None
    assert swept("axis_sweeps") == sorted(study["grids"]["d_env"])
    assert {p.design.d_env for p in plan_designs(study).values() if "pool_s3:d_env" in p.sweeps} == set(
        study["grids"]["d_env"]
    )
    mixtures = study["families"]["mixtures"]
    mixtures["second_amount"]["methods"] = ["awm"]
    second = [p.ratio for p in pricing_points(study) if p.source == "awm" and p.role == "mixture"]
    assert sorted(second) == sorted([*mixtures["ratios"], *spread(mixtures["ratios"], 4)])
    mixtures["second_amount"]["ratio_points"] = None
    second = [p for p in pricing_points(study) if p.source == "awm" and p.role == "mixture"]
    assert len(second) == 2 * len(mixtures["ratios"])


def test_fractional_synthetic_amounts_are_refused(config, schema):
    config["study"]["families"]["mixtures"]["ratios"] = [0.3, 1]
    with pytest.raises(ConfigError, match="at ratio 0.3 adds"):
        jobs(config, schema)


def test_a_source_option_moves_the_synthetic_pool_only(config, schema):
    pools = ("synthesize", "embed", "dedup", "sources", "dedup_sources")
    before = study(config, schema).specs
    config["sources"]["methods"]["sca"]["unsolvable"] = 0.5
    after = study(config, schema).specs
    assert [s for s in pools if before[s].key != after[s].key] == ["sources", "dedup_sources"]


def test_only_mixture_runs_depend_on_the_synthetic_sources(config, schema):
    _, _, points, _ = jobs(config, schema)
    config["sources"]["methods"]["sca"]["unsolvable"] = 0.5
    moved = study(config, schema).points
    for key, point in points.items():
        assert (point.train.key != moved[key].train.key) == (point.design.source != "real"), point.design


SYNTHETIC_ENVS = pl.DataFrame(
    {
        "env_id": [f"s{i}" for i in range(4)],
        "world_id": ["v0", "v1", "v2", "v3"],
        "env_s1": ["p", "q", "r", "s"],
        "source": ["awm"] * 4,
    }
)
SYNTHETIC_TASKS = pl.DataFrame(
    {
        "task_id": [f"u{i:02d}" for i in range(16)],
        "env_id": [f"s{i % 4}" for i in range(8)] + [f"e{i % 2}" for i in range(8)],
        "keep": [True] * 16,
        "source": ["awm"] * 8 + ["sca"] * 8,
    }
)


def test_mixtures_add_their_sources_units_to_the_real_selection():
    real_envs, real_tasks = select_training_data(ENVS, TASKS, {**DESIGN, "d_env": 2, "d_task": 4})
    pool = (SYNTHETIC_ENVS, SYNTHETIC_TASKS)
    envs, tasks = select_training_data(
        ENVS, TASKS, {**DESIGN, "d_env": 2, "d_task": 4, "source": "awm", "ratio": 1.0, "d_traj": 2}, pool
    )
    assert envs.height == real_envs.height + 2 and tasks.height == 8
    assert tasks.head(4)["task_id"].to_list() == real_tasks["task_id"].to_list()
    assert set(tasks.tail(4)["env_id"]) == {"s0", "s1"}
    _, tasks = select_training_data(
        ENVS, TASKS, {**DESIGN, "d_env": 2, "d_task": 4, "source": "sca", "ratio": 0.5, "d_traj": 2}, pool
    )
    assert tasks.height == 6 and set(tasks.tail(2)["task_id"]) <= set(SYNTHETIC_TASKS["task_id"])
    assert set(tasks.tail(2)["env_id"]) == {"e0", "e1"}
    with pytest.raises(PoolTooSmall, match="needs d_task_synthetic=16"):
        select_training_data(
            ENVS, TASKS, {**DESIGN, "d_env": 2, "d_task": 4, "source": "sca", "ratio": 4.0, "d_traj": 2}, pool
        )


def test_base_strength_sweeps_start_from_their_own_base_and_the_study_before_bases_keeps_its_keys(config, schema):
    """The base_strength family sweeps every axis from random init and from the strong base; with
    ``train.init: random`` and the family off, every train key is the key the default study had
    before bases existed (tests/data/train_keys_before_bases.json, written at commit 5d6329a), so
    its results stand."""
    family = config["study"]["families"]["base_strength"]
    family["bases"] = ["random", "strong"]  # the default runs random init only; full.yaml both
    keyed = study(config, schema)
    starts = {point.design.base for point in keyed.points.values() if point.design.base is not None}
    assert starts == set(family["bases"]) == {"random", "strong"}
    for point in keyed.points.values():
        if point.design.base == "random":
            assert "pretrain" not in point.train.inputs and "init" not in point.train.config
        elif point.design.base == "strong":
            assert point.train.config["init"] == "strong" and "pretrain" in point.train.inputs
    strong = {p.train.inputs["pretrain"] for p in keyed.points.values() if p.design.base == "strong"}
    default = {p.train.inputs["pretrain"] for p in keyed.points.values() if p.design.base is None}
    assert len(strong) == 1 and not strong & default
    designs = plan_designs(config["study"]).values()
    swept = {axis for p in designs if p.design.base == "random" for axis in AXES if f"base_strength:{axis}" in p.sweeps}
    assert swept == set(AXES)

    data = ROOT / "tests" / "data"
    then = load_yaml(data / "config_before_bases.yaml")  # the default study's config at 5d6329a
    then["train"] = {**then.get("train", {}), "init": "random"}
    then["study"]["families"]["base_strength"] = {"enabled": False}
    keys = sorted((job, point.train.key) for job, point in study(validate_config(then, schema), schema).points.items())
    assert keys == [tuple(pair) for pair in json.loads((data / "train_keys_before_bases.json").read_text())]
