"""The whole laws analysis on a default-sized study with 2,000 bootstrap resamples, on one core (prints numbers;
not a test).

Run: python bench/bench_laws.py [--runs results/collect/<key>/runs.parquet --episodes .../episodes.parquet]
[--n-boot 2000]

Without ``--runs`` the study is simulated from a known additive law on the default plan's grid
(every family of config/config.yaml at 2 seeds, 256 held-out tasks per run), so the benchmark
runs anywhere. Timed: ``axisrl.laws.study.analyse`` (what the ``laws`` stage runs), excluding
imports and Parquet reads.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core, before numpy is imported
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import time
from pathlib import Path

import numpy as np
import polars as pl

from axisrl.config import load_config
from axisrl.laws.study import LawSettings, analyse
from axisrl.plan import plan_designs, plan_rows

ROOT = Path(__file__).resolve().parents[1]
ALPHA = {"d_env": 0.4, "d_task": 0.25, "d_traj": 0.1}
N_TASKS = 256


def simulated_study(seed: int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The default plan's runs with binomial held-out outcomes from ``p = exp(-L)``,
    ``L = 0.2 + sum_i x_i^-alpha_i`` (width, algorithm and the other settings change nothing)."""
    config = load_config(ROOT / "config" / "config.yaml", schema_path=ROOT / "config" / "schema.yaml")
    rows = plan_rows(plan_designs(config["study"]), config["study"], config["domain"])
    runs = pl.DataFrame(rows, schema_overrides={"worlds": pl.Int64})
    loss = 0.2 + sum(runs[axis].to_numpy().astype(float) ** -alpha for axis, alpha in ALPHA.items())
    rng = np.random.default_rng(seed)
    success = rng.random((runs.height, N_TASKS)) < np.exp(-loss)[:, None]
    episodes = pl.DataFrame(
        {
            "run_key": np.repeat(runs["run_key"].to_numpy(), N_TASKS),
            "task_id": np.tile([f"t{k}" for k in range(N_TASKS)], runs.height),
            "tier": "T2",
            "success": success.ravel(),
        }
    )
    p = success.mean(axis=1)
    return runs.with_columns(status=pl.lit("ok"), n_T2=pl.lit(N_TASKS), p_T2=pl.Series(p)), episodes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs")
    parser.add_argument("--episodes")
    parser.add_argument("--n-boot", type=int, default=2000)
    args = parser.parse_args()
    if args.runs:
        runs = pl.read_parquet(args.runs)
        episodes = pl.read_parquet(args.episodes) if args.episodes else None
    else:
        runs, episodes = simulated_study()
    started = time.perf_counter()
    frames = analyse(runs, episodes, LawSettings(n_boot=args.n_boot))
    seconds = time.perf_counter() - started
    print(
        f"{runs.height} runs, {0 if episodes is None else episodes.height} episodes, n_boot={args.n_boot}: "
        f"{seconds:.1f} s; {len(frames)} frames"
    )


if __name__ == "__main__":
    main()
