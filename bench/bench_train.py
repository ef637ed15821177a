"""Tiny-backend training speed: one GRPO run (default 100 updates x 32 visits x 8 rollouts) on one thread.

Run: python bench/bench_train.py [--updates 100] [--visits 32] [--group-size 8] [--width 64] [--algo grpo] [--repeats 1]
Prints per run: wall seconds of train() (process start, imports and pool synthesis excluded), the
CPU-second split between rollouts and optimisation, the seconds of the rollouts' policy forwards
(torch arithmetic that no rewrite of the environment or the features removes), env steps (= decisions)
per second, and the process's peak RSS. Numbers to record in bench/README.md.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch is imported
os.environ.setdefault("MKL_NUM_THREADS", "1")

import argparse
import resource
import time
from pathlib import Path

import torch

from axisrl.backends.tiny import TrainSettings, train
from axisrl.config import load_config
from axisrl.domains import toolworld

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=100)
    parser.add_argument("--visits", type=int, default=32, help="task visits (groups) per update")
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--algo", default="grpo", choices=["grpo", "ppo"])
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(1)

    config = load_config(ROOT / "config" / "config.yaml", schema_path=ROOT / "config" / "schema.yaml")
    pool = toolworld.generate_pool(config["synthesize"])
    settings = TrainSettings(
        algo=args.algo,
        width=args.width,
        updates=args.updates,
        visits_per_update=args.visits,
        group_size=args.group_size,
    )
    print(
        f"pool: {len(pool.envs)} envs, {len(pool.tasks)} tasks; {settings.algo} width={settings.width} "
        f"updates={settings.updates} visits/update={settings.visits_per_update} G={settings.group_size}"
    )
    for repeat in range(args.repeats):
        start = time.perf_counter()
        result = train(pool.envs, pool.tasks, settings, seed=repeat)
        seconds = time.perf_counter() - start
        steps = result.compute["env_steps"]
        flops = result.compute["rollout_flops"] + result.compute["train_flops"]
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"run {repeat}: status={result.status} seconds={seconds:.2f} "
            f"(cpu rollout={result.timings['rollout_seconds']:.2f} train={result.timings['train_seconds']:.2f}; "
            f"wall in rollout policy forwards={result.timings['policy_seconds']:.2f}) "
            f"env_steps={steps} decisions/s={steps / seconds:.0f} episodes={result.compute['episodes']} "
            f"gflop={flops / 1e9:.1f} final_success={result.metrics[-1]['success_mean']:.3f} "
            f"peak_rss_mb={peak_mb:.0f}"
        )


if __name__ == "__main__":
    main()
