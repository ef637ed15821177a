"""GPU-seconds of a cluster study's training runs by the recipe's cost model (``axisrl.recipe.CostModel``).

Every term on: rollout tokens cost ``k * N / (peak * mfu)`` GPU-seconds each (k = 6 for the actor's
forward and backward, + 2 for the old-policy log-probabilities, + 2 for the reference model when
the KL loss is on), divided by the utilization eta and by 1 - f for failed rollouts; environment and
verifier seconds cost ``gpus / concurrent trajectories`` GPU-seconds each. Drivers are the seed
paper's Table 18 math+code values. An estimate from stated assumptions, not a measurement: measure
``timing_s/step`` from the first job's verl log and scale. Used by the power planner,
``bench/cluster_gpu_hours.py`` and the plan-time time-limit warning (``allocation_shortfall``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from axisrl.budget import visits_per_run
from axisrl.plan import plan_designs, seed_batches
from axisrl.recipe import CostModel

MODEL_PARAMETERS = {"Qwen3-4B": 4.0e9, "Qwen3-8B": 8.2e9, "Qwen3-14B": 14.8e9}
"""Parameters N of the models the cluster studies name (``train.llm.model``'s last path part)."""
TABLE18 = {
    "tokens_per_rollout": 2600,
    "failed_fraction": 0.07,
    "utilization": 0.61,
    "env_seconds_per_call": 0.9,
    "verifier_seconds_per_rollout": 0.4,
}
STEPS_PER_ROLLOUT = 4
"""Tool calls per math+code trajectory (half of train.llm.max_turns)."""
CONCURRENT_TRAJECTORIES = 256
"""Trajectories in flight at once on a node: environment time is paid by ``gpus / 256`` GPUs each."""
H100_DENSE_BF16_TFLOPS = 989.0
MFU = 0.35


def model_name(config: Mapping[str, Any]) -> str:
    """The directory name of the study's ``train.llm.model`` (the key of ``MODEL_PARAMETERS``)."""
    return PurePath(config["train"]["llm"]["model"] or "").name


def model_parameters(config: Mapping[str, Any]) -> float:
    """N of the study's ``train.llm.model``, by its directory name."""
    name = model_name(config)
    if name not in MODEL_PARAMETERS:
        raise ValueError(
            f"train.llm.model {name!r} is none of {sorted(MODEL_PARAMETERS)}: its parameter count is unknown"
        )
    return MODEL_PARAMETERS[name]


def gpu_cost_model(
    config: Mapping[str, Any], peak_tflops: float = H100_DENSE_BF16_TFLOPS, mfu: float = MFU
) -> CostModel:
    """The cost model, in GPU-seconds, of one training run of the study ``config``."""
    train, gpus = config["train"], config["resources"]["train"]["gpus"]
    passes = 6 + 2 + (2 if train["kl_coef"] > 0 else 0)
    return CostModel(
        currency="gpu_seconds",
        visits=float(visits_per_run(train)),
        c_token=passes / (peak_tflops * 1e12 * mfu),
        steps_per_rollout=STEPS_PER_ROLLOUT,
        c_second=gpus / CONCURRENT_TRAJECTORIES,
        **TABLE18,
    )


def run_gpu_hours(config: Mapping[str, Any], d_traj: int, model: CostModel | None = None) -> float:
    """GPU-hours of one training run at ``d_traj`` (synthesis is not GPU time)."""
    model = model or gpu_cost_model(config)
    return float(model.cost({"width": model_parameters(config), "d_env": 0, "d_task": 0, "d_traj": d_traj})) / 3600


@dataclass(frozen=True)
class AllocationShortfall:
    """The planned training runs whose estimated wall time exceeds one Slurm allocation
    (``resources.train.runtime``): they finish only by resuming from their checkpoints in later ones."""

    runs: int
    """Runs (design x seed) estimated to take longer than one allocation."""
    planned_runs: int
    runtime_minutes: int
    gpus: int
    longest_hours: float
    """Estimated wall hours of the longest run on ``gpus`` GPUs."""
    longest_d_traj: int

    @property
    def allocations(self) -> int:
        """Allocations the longest run needs back to back (a resumed run repeats at most the
        updates since its last checkpoint, which this leaves out)."""
        return math.ceil(self.longest_hours * 60 / self.runtime_minutes)

    def message(self) -> str:
        return (
            f"{self.runs} of {self.planned_runs} training runs cannot finish within one allocation: "
            f"resources.train.runtime is {self.runtime_minutes} min ({self.runtime_minutes / 60:.0f} h), and the "
            f"cost model (axisrl.cluster_cost, an estimate) puts the longest (d_traj={self.longest_d_traj}) at "
            f"about {self.longest_hours:.0f} h on {self.gpus} GPUs, {self.allocations} allocations. Such a run "
            "continues from its newest checkpoint when its job runs again: Slurm requeues a preempted job "
            "(slurm-requeue in the Slurm profile) and Snakemake resubmits one that hit its time limit "
            f"(retries: at least {self.allocations - 1}), or rerun the workflow."
        )


def allocation_shortfall(config: Mapping[str, Any]) -> AllocationShortfall | None:
    """The plan's runs that cannot finish within ``resources.train.runtime``, by the cost model;
    None when all can, for the tiny backend (no allocations) and for a model whose parameter count
    is unknown (no estimate). Cheap enough for Snakemake's parse time: one estimate per ``d_traj``."""
    if config["train"]["backend"] == "tiny" or model_name(config) not in MODEL_PARAMETERS:
        return None
    study, resources, model = config["study"], config["resources"]["train"], gpu_cost_model(config)
    wall_hours: dict[int, float] = {}  # by d_traj, the only design field a fixed_visits run's cost reads
    planned_runs, runs_over, longest_hours, longest_d_traj = 0, 0, 0.0, 0
    for planned in plan_designs(study).values():
        d_traj = planned.design.d_traj
        if d_traj not in wall_hours:
            wall_hours[d_traj] = run_gpu_hours(config, d_traj, model) / resources["gpus"]
        hours = wall_hours[d_traj]
        seeds = sum(len(batch) for batch in seed_batches(study, planned))
        planned_runs += seeds
        if hours * 60 > resources["runtime"]:
            runs_over += seeds
            longest_hours, longest_d_traj = max((longest_hours, longest_d_traj), (hours, d_traj))
    if not runs_over:
        return None
    return AllocationShortfall(
        runs_over, planned_runs, resources["runtime"], resources["gpus"], longest_hours, longest_d_traj
    )
