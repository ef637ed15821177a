"""GPU-hours of the cluster studies' jobs by the recipe's cost model (``axisrl.recipe.CostModel``).

Run: python bench/cluster_gpu_hours.py [--peak-tflops 989] [--mfu 0.35]
Prints, per Qwen3 study, GPU-hours and wall days of one training job (one run: a design and a
seed on one node) and GPU-hours of the whole study's training (job counts from the study's plan). The cost model is
the one the recipe uses, in GPU-seconds, with every term on: rollout tokens cost
``k * N / (peak * mfu)`` GPU-seconds each (k = 6 for the actor's forward and backward, + 2 for the
old-policy log-probabilities, + 2 for the reference model when the KL loss is on), divided by the
utilization eta and by 1 - f for failed rollouts; environment and verifier seconds cost
``gpus / concurrent trajectories`` GPU-seconds each. Drivers are the paper's Table 18 math+code
values. Every number here is an estimate from stated assumptions, not a measurement: measure
``timing_s/step`` from the first job's verl log and scale.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from axisrl.budget import visits_per_run
from axisrl.config import load_config
from axisrl.plan import plan_designs
from axisrl.recipe import CostModel

ROOT = Path(__file__).resolve().parents[1]
STUDIES = {"qwen3-4b": 4.0e9, "qwen3-8b": 8.2e9, "qwen3-14b": 14.8e9}
"""Study -> parameters N of its model."""
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peak-tflops", type=float, default=989.0, help="dense bf16 peak per GPU (H100 SXM)")
    parser.add_argument("--mfu", type=float, default=0.35, help="model FLOPs utilization of training and generation")
    args = parser.parse_args()
    print(
        "| study | N | designs x seeds (train jobs) | GPUs per train job | GPU-h per train job "
        "| wall days per train job | study training GPU-h |"
    )
    print("|---|---|---|---|---|---|---|")
    for study, params in STUDIES.items():
        cfg = load_config(
            ROOT / "config" / "config.yaml",
            ROOT / "config" / "studies" / f"{study}.yaml",
            schema_path=ROOT / "config" / "schema.yaml",
        )
        train, gpus = cfg["train"], cfg["resources"]["train"]["gpus"]
        passes = 6 + 2 + (2 if train["kl_coef"] > 0 else 0)
        model = CostModel(
            currency="gpu_seconds",
            visits=float(visits_per_run(train)),
            c_token=passes / (args.peak_tflops * 1e12 * args.mfu),
            steps_per_rollout=STEPS_PER_ROLLOUT,
            c_second=gpus / CONCURRENT_TRAJECTORIES,
            **TABLE18,
        )
        # one centre run's rollouts (synthesis is not GPU time): visits x the centre's d_traj
        run_hours = (
            float(model.cost({"width": params, "d_env": 0, "d_task": 0, "d_traj": cfg["study"]["centre"]["d_traj"]}))
            / 3600
        )
        seeds = len(cfg["study"]["seeds"])
        designs = plan_designs(cfg["study"]).values()
        # under fixed_visits a run's rollouts grow with its d_traj: the study sums its designs' own
        study_hours = (
            seeds
            * sum(
                float(model.cost({"width": params, "d_env": 0, "d_task": 0, "d_traj": p.design.d_traj}))
                for p in designs
            )
            / 3600
        )
        print(
            f"| {study} | {params:.1e} | {len(designs)} x {seeds} | {gpus} | {run_hours:,.0f} "
            f"| {run_hours / gpus / 24:.1f} | {study_hours:,.0f} |"
        )


if __name__ == "__main__":
    main()
