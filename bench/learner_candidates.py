"""Compare tiny-backend learner settings on training success and the validation tier V, never T2.

Each candidate is a set of ``train`` overrides (JSON; ``algo`` sets the designs' algorithm);
every candidate trains the same seeds of the same designs (the centre and the cheapest ends of the
d_env and d_traj sweeps by default) and is evaluated on V, the validation worlds of
``synthesize.heldout.validation_worlds``. Per candidate and design it prints the mean training
success (the last fifth of training's rollouts), V success, the between-seed SD of V success and
its part beyond binomial noise, the share of seeds that take off (V success above
``laws.take_off``) and the CPU seconds per run.

    python bench/learner_candidates.py --results results --seeds 8 \\
        --candidate base='{}' --candidate mb4='{"grpo_minibatches": 4}'

``--results`` is a finished study's results folder (its dedup stage's training pool); V is made
here from the config, so a study run before V existed works too. One process per core, one
thread each, started by spawn (a forked polars can deadlock).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from axisrl.config import load_config
from axisrl.plan import Design, backend_settings

ROOT = Path(__file__).resolve().parent.parent
VALIDATION = "V"


def _pool(results: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    folders = sorted((results / "dedup").glob("*/tasks.parquet"))
    if not folders:
        raise SystemExit(f"no dedup stage output under {results}/dedup: run the study (or its dedup target) first")
    folder = folders[0].parent
    return pl.read_parquet(folder / "envs.parquet"), pl.read_parquet(folder / "tasks.parquet")


def _validation(config: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    from axisrl.domains.toolworld.pool import generate_pool

    pool = generate_pool(config["synthesize"])
    envs = [env for env in pool.heldout_envs if env["tier"] == VALIDATION]
    tasks = [task for task in pool.heldout_tasks if task["tier"] == VALIDATION]
    if not tasks:
        raise SystemExit("the config makes no validation tier (synthesize.heldout.validation_worlds is 0)")
    return envs, tasks


def _run(job: dict[str, Any]) -> dict[str, Any]:
    import torch

    torch.set_num_threads(1)
    from axisrl.backends.tiny import TrainSettings, checkpoint, evaluate, policy_of, train
    from axisrl.datasets import select_training_data

    envs, tasks = select_training_data(job["envs"], job["tasks"], job["design"])
    started = time.process_time()
    result = train(envs.to_dicts(), tasks.to_dicts(), TrainSettings.from_dict(job["settings"]), job["seed"])
    seconds = time.process_time() - started
    tail = result.metrics[-max(1, len(result.metrics) // 5) :]
    rows = evaluate(policy_of(checkpoint(result)), job["v_envs"], job["v_tasks"], job["evaluate_seed"])
    return {
        "candidate": job["candidate"],
        "design": job["label"],
        "seed": job["seed"],
        "status": result.status,
        "param_hash": result.param_hash,
        "train_success": float(np.mean([row["success_mean"] for row in tail])),
        "zero_variance_share": result.compute["zero_variance_groups"] / max(result.compute["visits"], 1),
        "p_V": float(np.mean([row["success"] for row in rows])),
        "n_V": len(rows),
        "cpu_seconds": seconds,
    }


def summary(runs: pl.DataFrame, take_off: float) -> pl.DataFrame:
    """Per candidate and design: means, the between-seed SD of V success and its net part."""
    binomial = pl.col("p_V").mean() * (1 - pl.col("p_V").mean()) / pl.col("n_V").mean()
    return (
        runs.group_by("candidate", "design", maintain_order=True)
        .agg(
            seeds=pl.len(),
            train_success=pl.col("train_success").mean(),
            p_V=pl.col("p_V").mean(),
            sd_V=pl.col("p_V").std(),
            binomial_sd=binomial.sqrt(),
            net_sd=(pl.col("p_V").var() - binomial).clip(lower_bound=0).sqrt(),
            take_off_share=(pl.col("p_V") > take_off).mean(),
            zero_variance_share=pl.col("zero_variance_share").mean(),
            cpu_seconds=pl.col("cpu_seconds").mean(),
        )
        .sort("design", "candidate", maintain_order=True)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=str(ROOT / "config" / "config.yaml"))
    parser.add_argument("--results", default="results", type=Path)
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--first-seed", type=int, default=100, help="seeds first-seed .. first-seed + seeds - 1")
    parser.add_argument("--candidate", action="append", default=[], help="NAME=JSON train overrides; repeatable")
    parser.add_argument(
        "--design", action="append", default=[], help="NAME=d_env,d_task,d_traj (default: centre, d_env=1, d_traj=2)"
    )
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None, help="write the per-run rows here (parquet)")
    args = parser.parse_args()

    config = load_config(args.config, schema_path=ROOT / "config" / "schema.yaml")
    study, centre = config["study"], config["study"]["centre"]
    designs = dict(item.rsplit("=", 1) for item in args.design) or {
        "centre": f"{centre['d_env']},{centre['d_task']},{centre['d_traj']}",
        "d_env=1": f"1,{centre['d_task']},{centre['d_traj']}",
        "d_traj=2": f"{centre['d_env']},{centre['d_task']},2",
    }
    candidates = {name: json.loads(text) for name, text in (item.split("=", 1) for item in args.candidate)}
    candidates = candidates or {"base": {}}
    envs, tasks = _pool(args.results)
    v_envs, v_tasks = _validation(config)
    jobs = []
    for name, overrides in candidates.items():
        train_section = {**config["train"], **{k: v for k, v in overrides.items() if k != "algo"}}
        for label, values in designs.items():
            d_env, d_task, d_traj = (int(v) for v in values.split(","))
            algo = overrides.get("algo", study["algo"])
            design = Design(d_env, d_task, d_traj, study["width"], algo, study["reward_density"]).as_dict()
            settings = backend_settings(train_section, design)
            for seed in range(args.first_seed, args.first_seed + args.seeds):
                jobs.append(
                    {
                        "candidate": name,
                        "label": label,
                        "design": design,
                        "settings": settings,
                        "seed": seed,
                        "envs": envs,
                        "tasks": tasks,
                        "v_envs": v_envs,
                        "v_tasks": v_tasks,
                        "evaluate_seed": config["evaluate"]["seed"],
                    }
                )
    print(f"{len(jobs)} runs: {len(candidates)} candidates x {len(designs)} designs x {args.seeds} seeds", flush=True)
    rows = []
    with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        for row in pool.map(_run, jobs):
            rows.append(row)
            print(
                f"{row['candidate']:>12} {row['design']:>10} seed {row['seed']}: train {row['train_success']:.3f} "
                f"V {row['p_V']:.3f} ({row['cpu_seconds']:.1f} s)",
                flush=True,
            )
    runs = pl.DataFrame(rows)
    if args.out is not None:
        runs.write_parquet(args.out)
    with pl.Config(tbl_rows=-1, tbl_cols=-1, tbl_width_chars=200, float_precision=3):
        print(summary(runs, config["laws"]["take_off"]))


if __name__ == "__main__":
    main()
