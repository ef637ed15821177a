"""The plan-time time-limit check: which of a cluster study's runs cannot finish within one
allocation (``resources.train.runtime``) by the cost model, and what the warning says."""

from __future__ import annotations

import copy
import math

import pytest

from axisrl.cluster_cost import allocation_shortfall, run_gpu_hours
from axisrl.config import load_config
from axisrl.plan import plan_designs, seed_batches
from conftest import DEFAULT_CONFIG, ROOT, SCHEMA_PATH


@pytest.fixture(scope="module")
def qwen3_8b() -> dict:
    return load_config(DEFAULT_CONFIG, ROOT / "config" / "studies" / "qwen3-8b.yaml", schema_path=SCHEMA_PATH)


def _with_runtime(config: dict, minutes: int) -> dict:
    changed = copy.deepcopy(config)
    changed["resources"]["train"]["runtime"] = minutes
    return changed


def _wall_minutes_by_design(config: dict) -> list[tuple[float, int]]:
    """(estimated wall minutes, seeds) of every planned design."""
    study, gpus = config["study"], config["resources"]["train"]["gpus"]
    return [
        (run_gpu_hours(config, p.design.d_traj) / gpus * 60, sum(len(b) for b in seed_batches(study, p)))
        for p in plan_designs(study).values()
    ]


def test_the_8b_study_warns_of_the_runs_longer_than_its_runtime(qwen3_8b):
    shortfall = allocation_shortfall(qwen3_8b)
    designs = _wall_minutes_by_design(qwen3_8b)
    runtime = qwen3_8b["resources"]["train"]["runtime"]
    assert shortfall is not None
    assert shortfall.planned_runs == sum(seeds for _, seeds in designs) == 180
    assert shortfall.runs == sum(seeds for minutes, seeds in designs if minutes > runtime)
    assert 0 < shortfall.runs < shortfall.planned_runs  # the centre (d_traj 8) fits, d_traj 64 does not
    assert shortfall.longest_d_traj == 64
    assert shortfall.longest_hours * 60 == pytest.approx(max(minutes for minutes, _ in designs))
    assert shortfall.allocations == math.ceil(shortfall.longest_hours * 60 / runtime) > 1
    message = shortfall.message()
    for part in (f"{shortfall.runs} of 180 training runs", f"{runtime} min", "d_traj=64", "requeue", "retries"):
        assert part in message


def test_a_runtime_every_run_fits_in_warns_of_nothing(qwen3_8b):
    longest = max(minutes for minutes, _ in _wall_minutes_by_design(qwen3_8b))
    assert allocation_shortfall(_with_runtime(qwen3_8b, int(longest) + 1)) is None
    just_short = allocation_shortfall(_with_runtime(qwen3_8b, int(longest) - 1))
    assert just_short is not None and just_short.allocations == 2
    assert just_short.runs == len(qwen3_8b["study"]["seeds"]) * sum(
        p.design.d_traj == 64 for p in plan_designs(qwen3_8b["study"]).values()
    )


def test_no_warning_without_allocations_or_an_estimate(qwen3_8b):
    assert allocation_shortfall(load_config(DEFAULT_CONFIG, schema_path=SCHEMA_PATH)) is None  # the tiny backend
    unknown = copy.deepcopy(qwen3_8b)
    unknown["train"]["llm"]["model"] = "/models/SomeOtherModel"
    assert allocation_shortfall(unknown) is None
