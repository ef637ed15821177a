"""The train family with the tiny backend: every seed of one grid point trained and evaluated on the
held-out pool in one process, so process start and the torch import are paid once per grid point."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from axisrl import domains
from axisrl.artifacts import read_artifact, write_artifact
from axisrl.config import StageSpec
from axisrl.diagnostics import run_diagnostics
from axisrl.stages.collect import base_success
from axisrl.stages.dedup import heldout
from axisrl.stages.learning_curves import curve_updates, curves
from axisrl.threads import limit_threads

log = logging.getLogger("axisrl")


def train(spec: StageSpec, settings: Mapping[str, Any], inputs: Mapping[str, str], outputs: Mapping[str, str]) -> None:
    """Train every seed of one grid point and evaluate each on the held-out pool."""
    limit_threads(1)
    from axisrl.backends.tiny import (
        HeldoutStarts,
        TrainSettings,
        checkpoint,
        evaluate,
        policy_of,
        save_checkpoints,
        train_seeds,
    )
    from axisrl.datasets import select_training_data

    design = settings["design"]
    pool = (
        None
        if design["source"] == "real"
        else (
            read_artifact(inputs["synthetic_envs"], "dedup_sources"),
            read_artifact(inputs["synthetic_tasks"], "dedup_sources"),
        )
    )
    envs, tasks = select_training_data(
        read_artifact(inputs["envs"], "dedup"), read_artifact(inputs["tasks"], "dedup"), design, pool
    )
    heldout_envs, heldout_tasks = (frame.to_dicts() for frame in heldout(inputs))
    synthetic = synthetic_trajectories(settings["domain"], design, tasks, inputs, settings.get("sources"))
    backend = TrainSettings.from_dict(settings["settings"])
    budget = settings["budget"]
    planned = {key: budget[key] for key in ("budget_visits", "budget_rollouts", "token_cap", "flop_cap")}
    horizon = float(np.mean([json.loads(spec)["max_steps"] for spec in envs["spec"]]))
    effective = effective_d_task(tasks)
    seeds, run_keys = settings["seeds"], settings["run_keys"]
    init, base = starting_point(settings, inputs)
    curve_points = settings.get("curve_points", 0)
    snapshots = curve_updates(backend.updates, curve_points) if curve_points else ()
    log.info("train %s seeds %s: %d envs, %d tasks", run_keys, seeds, envs.height, tasks.height)
    results = train_seeds(
        envs.to_dicts(),
        tasks.to_dicts(),
        backend,
        seeds,
        synthetic=synthetic,
        progress=lambda seed, row: log.info("seed %d update %d reward %.3f", seed, row["update"], row["reward_mean"]),
        init=init,
        snapshots=snapshots,
        domain=settings["domain"],
    )
    metrics, runs, checkpoints = [], [], {}
    for seed, run, result in zip(seeds, run_keys, results):
        tail = result.metrics[-max(1, len(result.metrics) // 5) :]
        metrics += [{"run_key": run, "seed": seed, **row} for row in result.metrics]
        if result.error is not None:
            log.warning("train %s seed %d recorded as failed: %s", run, seed, result.error)
        runs.append(
            {
                "run_key": run,
                "seed": seed,
                "status": result.status,
                "error": result.error,
                "param_hash": result.param_hash,
                "train_success": float(np.mean([row["success_mean"] for row in tail])) if tail else None,
                **result.compute,
                **run_diagnostics(result.metrics),
                "executed_compute": result.compute["rollout_flops"] + result.compute["train_flops"],
                **planned,
                **cost_drivers(result.compute, result.timings, horizon),
                "training_cpu_seconds": sum(result.timings.get(k, 0.0) for k in ("rollout_seconds", "train_seconds")),
                **effective,
                **base,
            }
        )
        checkpoints[seed] = checkpoint(result)
    started = time.process_time()
    evaluate_seed = settings["evaluate"]["seed"]
    starts = HeldoutStarts(heldout_envs, heldout_tasks, evaluate_seed, backend.leak_primitive_role, settings["domain"])
    evaluated = [
        evaluate(
            policy_of(checkpoints[seed]),
            heldout_envs,
            heldout_tasks,
            evaluate_seed,
            starts=starts,
            domain=settings["domain"],
        )
        for seed in seeds
    ]
    per_episode = (time.process_time() - started) / max(1, sum(map(len, evaluated)))
    for row in runs:  # measured like the cost drivers: what the planner prices a larger held-out pool at
        row["heldout_seconds_per_episode"] = per_episode
    if curve_points:
        frame, seconds = curves(
            results,
            run_keys,
            seeds,
            evaluated,
            starts,
            heldout_envs,
            heldout_tasks,
            evaluate_seed,
            base.get("p_V_base"),
            settings["domain"],
        )
        for row in runs:  # the curves' evaluations, kept apart from the run's compute like the held-out pool's
            row["curve_seconds"] = seconds / len(runs)
        write_artifact(frame, outputs["curves"], spec)
    episodes = []
    for seed, run, rows in zip(seeds, run_keys, evaluated):
        episodes += [{"run_key": run, "seed": seed, **row} for row in rows]
        log.info(
            "evaluate %s: %d held-out episodes, success %.3f", run, len(rows), np.mean([r["success"] for r in rows])
        )
    save_checkpoints(checkpoints, outputs["policies"])
    write_artifact(pl.DataFrame(metrics, infer_schema_length=None), outputs["metrics"], spec)
    write_artifact(pl.DataFrame(runs, infer_schema_length=None), outputs["runs"], spec)
    write_artifact(pl.DataFrame(episodes, infer_schema_length=None), outputs["episodes"], spec)
    if "progress" in settings:
        log.info("%s", study_progress(settings["progress"], outputs["runs"]))


def study_progress(progress: Mapping[str, Any], runs_path: str) -> str:
    """What a user watching the study reads after each train job: the plan's runs done of those
    planned, in this job's domain. A train job's runs table is ``train/<key>/runs.parquet``, so the
    other jobs' are found beside this one's, whatever folder a study across domains puts it in."""
    planned: Mapping[str, int] = progress["planned"]
    train_dir = Path(runs_path).parent.parent
    done = [key for key in planned if (train_dir / key / Path(runs_path).name).exists()]
    runs_done, runs = sum(planned[key] for key in done), sum(planned.values())
    return (
        f"progress: {progress['domain']} {runs_done} of {runs} planned runs done "
        f"({len(done)} of {len(planned)} train jobs, {100 * runs_done / max(1, runs):.0f}%)"
    )


def starting_point(settings: Mapping[str, Any], inputs: Mapping[str, str]) -> tuple[Any, dict[str, Any]]:
    """The weights every seed starts from (None: random init) and what the runs' rows record of
    the base (``base`` or ``strong``): its parameter hash, BC steps and FLOPs (the base's compute,
    kept apart from the run's ``executed_compute`` as the paper keeps pretraining apart from RL) and
    its own held-out success per tier (``p_<tier>_base``). Nothing for random init."""
    if "init" not in settings:  # random init
        return None, {}
    import torch

    base = torch.load(inputs["base"], weights_only=True)[0]
    record = {"base_param_hash": base["param_hash"], "base_bc_steps": base["bc_steps"], "base_flops": base["bc_flops"]}
    return base["state_dict"], {**record, **base_success(read_artifact(inputs["base_episodes"], "pretrain"))}


def synthetic_trajectories(
    domain: str,
    design: Mapping[str, Any],
    tasks: pl.DataFrame,
    inputs: Mapping[str, str],
    sources: Mapping[str, Any] | None,
) -> Any:
    """The trajectory-axis synthetic data of a mixture design for the tiny backend, or None:
    replayed trajectories of its source for its tasks (SWiRL-like), or rollouts stepped by the
    source's simulated environment (DreamGym-like)."""
    from axisrl.backends.tiny import SyntheticTrajectories
    from axisrl.plan import Design
    from axisrl.synthesis import method_of

    per_group = int(Design(**design).synthetic_amounts()["d_traj_synthetic"])
    if not per_group:
        return None
    method = method_of(design["source"]).name
    if method == "dreamgym":
        fidelity = sources["methods"][method]  # the simulator ignores the unit cost
        simulated = domains.load(domain).require("SimulatedEnv")
        return SyntheticTrajectories(
            per_group, simulator=lambda spec, task, seed: simulated(spec, task, fidelity, seed)
        )
    rows = (
        read_artifact(inputs["synthetic_trajectories"], "sources")
        .filter((pl.col("source") == design["source"]) & pl.col("task_id").is_in(tasks["task_id"].to_list()))
        .sort("task_id", "trajectory_index")
    )
    replay = {task_id: group.to_dicts() for (task_id,), group in rows.group_by("task_id", maintain_order=True)}
    return SyntheticTrajectories(per_group, replay=replay)


def effective_d_task(tasks: pl.DataFrame) -> dict[str, int]:
    """How many of a run's training tasks are distinct under each dedup rule (Tables 14-15):
    ``d_task_raw``; ``d_task_skill`` and ``d_task_verifier``, distinct (environment identity,
    signature) pairs among them; ``d_task_emb_<theta>``, those the pool-level embedding rule at
    ``theta`` keeps (a task it drops has an earlier near-duplicate in the pool, which the run may
    or may not hold: an approximation from above of the duplicates within the run)."""
    counts = {
        "d_task_raw": tasks.height,
        "d_task_skill": tasks.select("env_s1", "skill_sig").n_unique(),
        "d_task_verifier": tasks.select("env_s1", "verifier_sig").n_unique(),
    }
    for column in tasks.columns:
        if column.startswith("keep_emb_"):
            counts[column.replace("keep_emb_", "d_task_emb_")] = int(tasks[column].sum())
    return counts


def cost_drivers(compute: Mapping[str, float], timings: Mapping[str, float], horizon: float) -> dict[str, float | None]:
    """The measured cost drivers of Table 18 for one training run: step limit (``horizon``), env
    steps per trajectory, wall seconds per env call and per verification, the failed-rollout
    fraction (rollouts stopped by the step limit or cap without finishing: toolworld's timeouts)
    and utilisation (the share of rollout wall time spent in the policy's forward passes)."""

    def ratio(num: float, den: float) -> float | None:
        return num / den if den else None

    return {
        "horizon": horizon,
        "rollout_steps_per_trajectory": ratio(compute["env_steps"], compute["episodes"]),
        "env_seconds_per_call": ratio(timings["env_seconds"], timings["env_calls"]),
        "verifier_seconds_per_trajectory": ratio(timings["verifier_seconds"], timings["verifier_calls"]),
        "failed_rollout_fraction": ratio(compute["truncated_episodes"], compute["episodes"]),
        "utilization": ratio(timings["policy_seconds"], timings["rollout_wall_seconds"]),
    }
