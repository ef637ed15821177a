"""GPU-hours of the cluster studies' jobs by the recipe's cost model (``axisrl.cluster_cost``).

Run: python bench/cluster_gpu_hours.py [--peak-tflops 989] [--mfu 0.35]
Prints, per Qwen3 study, GPU-hours and wall days of one training job (one run: a design and a
seed on one node) and GPU-hours of the whole study's training (job counts from the study's plan).
The cost model and its assumptions: ``axisrl.cluster_cost``. Every number here is an estimate from
stated assumptions, not a measurement.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from axisrl.cluster_cost import H100_DENSE_BF16_TFLOPS, MFU, gpu_cost_model, model_parameters, run_gpu_hours
from axisrl.config import load_config
from axisrl.plan import plan_designs

ROOT = Path(__file__).resolve().parents[1]
STUDIES = ("qwen3-4b", "qwen3-8b", "qwen3-14b")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--peak-tflops", type=float, default=H100_DENSE_BF16_TFLOPS, help="dense bf16 peak per GPU (H100 SXM)"
    )
    parser.add_argument("--mfu", type=float, default=MFU, help="model FLOPs utilization of training and generation")
    args = parser.parse_args()
    print(
        "| study | N | designs x seeds (train jobs) | GPUs per train job | GPU-h per train job "
        "| wall days per train job | study training GPU-h |"
    )
    print("|---|---|---|---|---|---|---|")
    for study in STUDIES:
        cfg = load_config(
            ROOT / "config" / "config.yaml",
            ROOT / "config" / "studies" / f"{study}.yaml",
            schema_path=ROOT / "config" / "schema.yaml",
        )
        model = gpu_cost_model(cfg, args.peak_tflops, args.mfu)
        gpus = cfg["resources"]["train"]["gpus"]
        run_hours = run_gpu_hours(cfg, cfg["study"]["centre"]["d_traj"], model)  # one centre run
        seeds = len(cfg["study"]["seeds"])
        designs = plan_designs(cfg["study"]).values()
        # under fixed_visits a run's rollouts grow with its d_traj: the study sums its designs' own
        study_hours = seeds * sum(run_gpu_hours(cfg, p.design.d_traj, model) for p in designs)
        print(
            f"| {study} | {model_parameters(cfg):.1e} | {len(designs)} x {seeds} | {gpus} | {run_hours:,.0f} "
            f"| {run_hours / gpus / 24:.1f} | {study_hours:,.0f} |"
        )


if __name__ == "__main__":
    main()
