"""GPU-seconds of a cluster study's training runs by the recipe's cost model (``axisrl.recipe.CostModel``).

Every term on: rollout tokens cost ``k * N / (peak * mfu)`` GPU-seconds each (k = 6 for the actor's
forward and backward, + 2 for the old-policy log-probabilities, + 2 for the reference model when
the KL loss is on), divided by the utilization eta and by 1 - f for failed rollouts; environment and
verifier seconds cost ``gpus / concurrent trajectories`` GPU-seconds each. Drivers are the seed
paper's Table 18 math+code values. An estimate from stated assumptions, not a measurement: measure
``timing_s/step`` from the first job's verl log and scale. Used by the power planner and
``bench/cluster_gpu_hours.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

from axisrl.budget import visits_per_run
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


def model_parameters(config: Mapping[str, Any]) -> float:
    """N of the study's ``train.llm.model``, by its directory name."""
    name = PurePath(config["train"]["llm"]["model"] or "").name
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
