"""Tiny-backend training speed: GRPO runs (default 100 updates x 32 visits x 8 rollouts) on one thread, and their floor.

Run: python bench/bench_train.py [--updates 100] [--visits 32] [--d-traj 8] [--width 64] [--algo grpo] [--repeats 1]
``--repeats N`` trains seeds 0 .. N-1 one after another (``train_seeds``, as a train job does). Prints per seed: its
CPU seconds, split between rollouts and optimisation, the wall seconds of
the rollouts' policy forwards, env steps (= decisions) per second and the process's peak RSS; then the whole
training's wall seconds (process start, imports and pool synthesis excluded) and env steps per second, and its
floor: the seconds that the run's counted FLOPs take as plain torch matrix products of the run's own shapes on this
machine (each counted product replayed as ``F.linear`` on random tensors of its shape, a training product three
times), with the ratio of the wall time to it. Numbers to record in bench/README.md.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch is imported
os.environ.setdefault("MKL_NUM_THREADS", "1")

import argparse
import resource
import time
from collections import Counter
from pathlib import Path

import torch
from torch.nn import functional as F

from axisrl.backends.tiny import TrainSettings, train_seeds
from axisrl.backends.tiny.policy import Matmul, record_matmuls
from axisrl.config import load_config
from axisrl.domains import toolworld

ROOT = Path(__file__).resolve().parents[1]


def floor_seconds(matmuls: Counter[Matmul]) -> tuple[float, int]:
    """Seconds to replay every counted product as a plain ``F.linear`` of its shape, and their FLOPs."""
    total, flops = 0.0, 0
    for (rows, fan_in, fan_out, times), count in sorted(matmuls.items()):
        x, weight, bias = torch.randn(rows, fan_in), torch.randn(fan_out, fan_in), torch.randn(fan_out)
        F.linear(x, weight, bias)  # first touch of the memory, not timed
        started = time.perf_counter()
        for _ in range(count * times):
            F.linear(x, weight, bias)
        total += time.perf_counter() - started
        flops += 2 * rows * fan_in * fan_out * count * times
    return total, flops


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=100)
    parser.add_argument("--visits", type=int, default=32, help="task visits (groups) per update")
    parser.add_argument("--d-traj", type=int, default=8, help="rollouts per visit (a GRPO group)")
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--algo", default="grpo", choices=["grpo", "ppo"])
    parser.add_argument("--repeats", type=int, default=1, help="seeds 0 .. N-1, one after another")
    args = parser.parse_args()
    torch.set_num_threads(1)

    config = load_config(ROOT / "config" / "config.yaml", schema_path=ROOT / "config" / "schema.yaml")
    pool = toolworld.generate_pool(config["synthesize"])
    settings = TrainSettings(
        algo=args.algo,
        width=args.width,
        updates=args.updates,
        visits_per_update=args.visits,
        d_traj=args.d_traj,
    )
    seeds = list(range(args.repeats))
    print(
        f"pool: {len(pool.envs)} envs, {len(pool.tasks)} tasks; {settings.algo} width={settings.width} "
        f"updates={settings.updates} visits/update={settings.visits_per_update} G={settings.d_traj}; "
        f"seeds {seeds}"
    )
    with record_matmuls() as matmuls:
        start = time.perf_counter()
        results = train_seeds(pool.envs, pool.tasks, settings, seeds)
        seconds = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    for seed, result in zip(seeds, results):
        steps = result.compute["env_steps"]
        flops = result.compute["rollout_flops"] + result.compute["train_flops"]
        share = result.timings["rollout_seconds"] + result.timings["train_seconds"]
        print(
            f"run {seed}: status={result.status} seconds={share:.2f} "
            f"(cpu rollout={result.timings['rollout_seconds']:.2f} train={result.timings['train_seconds']:.2f}; "
            f"wall in rollout policy forwards={result.timings['policy_seconds']:.2f}) "
            f"env_steps={steps} decisions/s={steps / share:.0f} episodes={result.compute['episodes']} "
            f"gflop={flops / 1e9:.1f} final_success={result.metrics[-1]['success_mean']:.3f} "
            f"peak_rss_mb={peak_mb:.0f}"
        )
    steps = sum(result.compute["env_steps"] for result in results)
    counted = sum(result.compute["rollout_flops"] + result.compute["train_flops"] for result in results)
    floor, replayed = floor_seconds(matmuls)
    if replayed != counted:
        raise SystemExit(f"the recorded products hold {replayed} FLOPs, the runs counted {counted}")
    print(
        f"total: seconds={seconds:.2f} env_steps={steps} env_steps/s={steps / seconds:.0f} "
        f"gflop={counted / 1e9:.1f} floor_seconds={floor:.2f} ({counted / floor / 1e9:.0f} GFLOP/s, "
        f"{sum(c * m.times for m, c in matmuls.items())} products of {len(matmuls)} shapes) "
        f"seconds/floor={seconds / floor:.1f} peak_rss_mb={peak_mb:.0f}"
    )


if __name__ == "__main__":
    main()
