"""The workflow's stages as plain functions: read upstream artifacts, compute, write artifacts.

Each function takes the stage's spec (what its key covers), its full validated settings, and
named input/output paths. Nothing here knows about Snakemake, so a stage can be run and tested
from Python directly; ``workflow/scripts/*.py`` only forward Snakemake's job to these.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import polars as pl

from axisrl import dedup as dedup_math
from axisrl import domains
from axisrl.artifacts import catalog, read_artifact, write_artifact
from axisrl.budget import training_budget
from axisrl.config import StageSpec
from axisrl.plan import backend_settings
from axisrl.domains import toolworld

log = logging.getLogger("axisrl")

SPLIT_FILES = {"train": ("envs", "tasks"), "heldout": ("heldout_envs", "heldout_tasks"),
               "placebo": ("placebo_envs", "placebo_tasks")}
"""Each pool's env and task files; dedup treats every pool on its own (no task is dropped as a
near-duplicate of another pool's)."""
ENV_COLUMNS = {
    "env_id": pl.String, "world_id": pl.String, "world_seed": pl.Int64, "variant_index": pl.Int64,
    "variant_seed": pl.Int64, "content_seed": pl.Int64, "skin_index": pl.Int64, "split": pl.String,
    "tier": pl.String, "n_tables": pl.Int64, "n_tools": pl.Int64, "n_rows": pl.Int64,
    "edits": pl.List(pl.String), "vocabulary": pl.List(pl.String), "spec": pl.String,
    "source": pl.String, "defect": pl.String,
}
TASK_COLUMNS = {
    "task_id": pl.String, "env_id": pl.String, "skeleton": pl.String, "skill_sig": pl.String,
    "verifier_sig": pl.String, "instruction": pl.String, "reference": pl.String, "goal": pl.String,
    "answer": pl.String, "n_steps": pl.Int64, "n_distractors": pl.Int64, "id_depth": pl.Int64,
    "split": pl.String, "tier": pl.String, "source": pl.String, "defect": pl.String,
}
"""Synthesized columns, fixed so empty pools and all-null columns keep their types. ``source`` is
``"real"`` or the synthetic method that made the row; ``defect`` names the failure a synthetic
source injected (null when faithful; for measuring sources only, training never reads it)."""
TRAJECTORY_COLUMNS = {
    "task_id": pl.String, "env_id": pl.String, "source": pl.String, "trajectory_index": pl.Int64,
    "calls": pl.String, "label": pl.Float64, "true_success": pl.Boolean, "n_steps": pl.Int64,
    "step_errors": pl.Int64, "defect": pl.String,
}
ENV_LEVELS = ("s3", "s2", "s1")
"""Environment identity levels, coarse to fine: API set / + state schema / + transition semantics."""


def synthesize(spec: StageSpec, settings: Mapping[str, Any], inputs: Mapping[str, str], outputs: Mapping[str, str]) -> None:
    """Generate the training and held-out pools of the configured domain."""
    log.info("synthesizing %s pool", settings["domain"])
    pool = domains.load(settings["domain"]).generate_pool(settings["synthesize"])
    for env_file, task_file in SPLIT_FILES.values():
        for name, columns in ((env_file, ENV_COLUMNS), (task_file, TASK_COLUMNS)):
            frame = pl.DataFrame(getattr(pool, name), schema=columns).with_columns(source=pl.lit("real"))
            write_artifact(frame, outputs[name], spec)
            log.info("wrote %s: %d rows", outputs[name], frame.height)


def synthesize_sources(spec: StageSpec, settings: Mapping[str, Any], inputs: Mapping[str, str],
                       outputs: Mapping[str, str]) -> None:
    """Every synthetic source the mixtures family reads: environments, tasks and trajectories with a
    ``source`` column (a common-core variant ``<method>_core`` when the study asks for one), and
    per-method generation statistics (drafts made, kept, defects)."""
    from axisrl.synthesis import CORE_SUFFIX

    envs = read_artifact(inputs["envs"], "synthesize").to_dicts()
    tasks = read_artifact(inputs["tasks"], "synthesize").to_dicts()
    sources = settings["sources"]
    rows: dict[str, list[dict[str, Any]]] = {"envs": [], "tasks": [], "trajectories": []}
    stats = []
    for common_core in (False, True) if settings["common_core"] else (False,):
        cfg = {**sources, "common_core": common_core,
               "methods": {m: sources["methods"][m] for m in settings["methods"]}}
        log.info("synthesizing sources %s%s", sorted(cfg["methods"]), " (common core)" if common_core else "")
        pool = toolworld.generate_synthetic(envs, tasks, cfg)
        suffix = CORE_SUFFIX if common_core else ""
        for name in rows:
            rows[name] += [{**row, "source": row["source"] + suffix} for row in getattr(pool, name)]
        stats += [{"source": method + suffix, **values} for method, values in pool.stats.items()]
    for name, columns in (("envs", ENV_COLUMNS), ("tasks", TASK_COLUMNS), ("trajectories", TRAJECTORY_COLUMNS)):
        frame = pl.DataFrame(rows[name], schema=columns)
        write_artifact(frame, outputs[f"synthetic_{name}"], spec)
        log.info("wrote %s: %d rows", outputs[f"synthetic_{name}"], frame.height)
    write_artifact(pl.DataFrame(stats, infer_schema_length=None), outputs["source_stats"], spec)


def embed(spec: StageSpec, settings: Mapping[str, Any], inputs: Mapping[str, str], outputs: Mapping[str, str]) -> None:
    """Embed every task instruction once, so threshold changes in dedup never re-embed."""
    from axisrl.embedding import embed_texts

    tasks = pl.concat([read_artifact(inputs[name], "synthesize").select("task_id", "split", "instruction")
                       for _, name in SPLIT_FILES.values()])
    log.info("embedding %d instructions with %s", tasks.height, settings["model"])
    vectors = embed_texts(tasks["instruction"].to_list(), settings["model"], settings["batch_size"])
    frame = tasks.select("task_id", "split").with_columns(
        pl.Series("embedding", vectors, dtype=pl.Array(pl.Float32, vectors.shape[1]))
    )
    write_artifact(frame, outputs["embeddings"], spec)


def _short_hash(*parts: str) -> str:
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def env_signatures(envs: pl.DataFrame, domain: str = "toolworld") -> pl.DataFrame:
    """Add the signature columns, the S3/S2/S1 identities and first-occurrence flags per level.

    ``env_s3`` = API set, ``env_s2`` = (API set, schema), ``env_s1`` = (API set, schema,
    semantics). ``distinct_<level>`` keeps the first row of each identity in generation order,
    and ``level`` says at which level a distinct (S1) environment first differs from the ones
    before it: a new API set (S3), a new schema under a seen API set (S2), or new semantics only (S1).
    """
    signatures = domains.load(domain).signatures
    sigs = pl.DataFrame([signatures(json.loads(s)) for s in envs["spec"]])
    frame = pl.concat([envs, sigs], how="horizontal").with_columns(
        env_s3=pl.col("sig_api"),
        env_s2=pl.struct("sig_api", "sig_schema").map_elements(
            lambda s: _short_hash(s["sig_api"], s["sig_schema"]), return_dtype=pl.String),
        env_s1=pl.struct("sig_api", "sig_schema", "sig_sem").map_elements(
            lambda s: _short_hash(s["sig_api"], s["sig_schema"], s["sig_sem"]), return_dtype=pl.String),
    )
    frame = frame.with_columns(
        pl.Series(f"distinct_{level}", dedup_math.first_occurrence_keep(frame[f"env_{level}"].to_list()))
        for level in ENV_LEVELS
    )
    level = (pl.when(~pl.col("distinct_s1")).then(None)
             .when(pl.col("distinct_s3")).then(pl.lit("S3"))
             .when(pl.col("distinct_s2")).then(pl.lit("S2"))
             .otherwise(pl.lit("S1")))
    return frame.with_columns(level=level)


def pool_stats(envs: pl.DataFrame, split: str, domain: str = "toolworld") -> dict[str, Any]:
    """One row of Table 6: diversity of the signature-distinct environments of a pool."""
    tokens = domains.load(domain)
    distinct = envs.filter(pl.col("distinct_s1"))
    specs = [json.loads(s) for s in distinct["spec"]]
    counts = {level: int((distinct["level"] == level.upper()).sum()) for level in ENV_LEVELS}
    n = max(distinct.height, 1)
    return {
        "split": split,
        "n_raw": envs.height,
        "n_distinct": distinct.height,
        "n_worlds": distinct["world_id"].n_unique(),
        "n_skins": envs["skin"].n_unique(),
        **{f"n_{level}": counts[level] for level in ENV_LEVELS},
        **{f"share_{level}": counts[level] / n for level in ENV_LEVELS},
        "jaccard_tools": dedup_math.mean_pairwise_jaccard_distance([tokens.tool_tokens(s) for s in specs]),
        "jaccard_schema": dedup_math.mean_pairwise_jaccard_distance([tokens.schema_tokens(s) for s in specs]),
        "transition_diversity": dedup_math.mean_pairwise_jaccard_distance(
            [tokens.transition_tokens(s) for s in specs]),
    }


def check_heldout_disjoint(train: pl.DataFrame, heldout: pl.DataFrame) -> None:
    """The held-out T2 tier must share no environment identity or skin with training."""
    t2 = heldout.filter(pl.col("tier") == "T2")
    for column in ("env_s1", "skin"):
        shared = set(t2[column]) & set(train[column])
        if shared:
            raise ValueError(f"held-out T2 pool overlaps training: {len(shared)} shared {column} value(s), "
                             f"e.g. {sorted(shared)[0]}; the held-out split would leak")


def theta_column(theta: float) -> str:
    return f"keep_emb_{theta:g}"


TASK_RULES = {"raw": "keep_raw", "skill_sig": "keep_skill", "verifier_sig": "keep_verifier"}
"""The non-embedding dedup rules and their keep-flag columns."""


def task_keep_flags(tasks: pl.DataFrame, embeddings: pl.DataFrame, thetas: Sequence[float], theta: float,
                    block_size: int, task_rule: str = "embedding") -> pl.DataFrame:
    """One keep flag per dedup rule (Table 15) and per embedding threshold (Table 14).

    Rules walk tasks in ``task_id`` order (a content hash, so the order is fixed and unrelated to
    generation order). ``keep`` is ``task_rule``'s flag: by default embedding distance > ``theta``.
    """
    ordered = tasks.join(embeddings.select("task_id", "embedding"), on="task_id", how="left").sort("task_id")
    missing = ordered["embedding"].null_count()
    if missing:
        raise ValueError(f"{missing} task(s) have no embedding; the embed artifact does not match the tasks")
    vectors = ordered["embedding"].to_numpy().astype(np.float32, copy=False)
    keeps = dedup_math.greedy_threshold_keep(vectors, thetas, block_size=block_size)
    flags = ordered.select("task_id").with_columns(
        keep_raw=pl.lit(True),
        keep_skill=pl.Series(dedup_math.first_occurrence_keep(list(zip(ordered["env_s1"], ordered["skill_sig"])))),
        keep_verifier=pl.Series(dedup_math.first_occurrence_keep(list(zip(ordered["env_s1"], ordered["verifier_sig"])))),
        **{theta_column(t): pl.Series(keeps[t]) for t in thetas},
    ).with_columns(keep=pl.col(TASK_RULES.get(task_rule, theta_column(theta))))
    return tasks.join(flags, on="task_id", how="left", maintain_order="left")


def task_dedup_summary(tasks: pl.DataFrame, split: str, thetas: Sequence[float]) -> list[dict[str, Any]]:
    """Effective D_T under each rule: the rows behind Tables 14 and 15."""
    rules = [(rule, None, column) for rule, column in TASK_RULES.items()]
    rules += [("embedding", t, theta_column(t)) for t in thetas]
    return [{"split": split, "rule": rule, "theta": theta, "column": column,
             "n_raw": tasks.height, "n_kept": int(tasks[column].sum())} for rule, theta, column in rules]


def dedup(spec: StageSpec, settings: Mapping[str, Any], inputs: Mapping[str, str], outputs: Mapping[str, str]) -> None:
    """Signature-level environment identity, pool statistics and task keep-flags for both pools."""
    embeddings = read_artifact(inputs["embeddings"], "embed")
    domain = settings["domain"]
    envs = {split: env_signatures(read_artifact(inputs[files[0]], "synthesize"), domain)
            for split, files in SPLIT_FILES.items()}
    check_heldout_disjoint(envs["train"], envs["heldout"])
    stats, summary = [], []
    for split, (env_file, task_file) in SPLIT_FILES.items():
        log.info("dedup %s: %d raw environments", split, envs[split].height)
        stats.append(pool_stats(envs[split], split, domain))
        tasks = read_artifact(inputs[task_file], "synthesize").join(
            envs[split].select("env_id", "env_s1"), on="env_id", how="left", maintain_order="left")
        tasks = task_keep_flags(tasks, embeddings, settings["thetas"], settings["theta"], settings["block_size"],
                                settings["task_rule"])
        summary += task_dedup_summary(tasks, split, settings["thetas"])
        write_artifact(envs[split], outputs[env_file], spec)
        write_artifact(tasks, outputs[task_file], spec)
    write_artifact(pl.DataFrame(stats), outputs["pool_stats"], spec)
    write_artifact(pl.DataFrame(summary, schema_overrides={"theta": pl.Float64}), outputs["task_dedup"], spec)


def dedup_sources(spec: StageSpec, settings: Mapping[str, Any], inputs: Mapping[str, str],
                  outputs: Mapping[str, str]) -> None:
    """Dedup the synthetic pool like a real one, each source on its own: environment signatures and
    identities, and task keep-flags (embedding its own instructions, so a change of sources never
    re-embeds the real pool). Task-synthesis tasks sit on real environments and take their
    identities from the real pool."""
    from axisrl.embedding import embed_texts

    envs = read_artifact(inputs["synthetic_envs"], "sources")
    tasks = read_artifact(inputs["synthetic_tasks"], "sources")
    real_envs = read_artifact(inputs["real_envs"], "dedup")
    if envs.height:
        envs = pl.concat([env_signatures(envs.filter(pl.col("source") == source))
                          for source in envs["source"].unique(maintain_order=True)])
        check_heldout_disjoint(envs, read_artifact(inputs["heldout_envs"], "dedup"))
    identities = pl.concat([real_envs.select("env_id", "env_s1"), *([envs.select("env_id", "env_s1")] if envs.height
                                                                      else [])])
    if tasks.height:
        vectors = embed_texts(tasks["instruction"].to_list(), settings["embedding"]["model"],
                              settings["embedding"]["batch_size"])
        embeddings = tasks.select("task_id").with_columns(
            pl.Series("embedding", vectors, dtype=pl.Array(pl.Float32, vectors.shape[1])))
        tasks = pl.concat([
            task_keep_flags(tasks.filter(pl.col("source") == source).join(identities, on="env_id", how="left",
                                                                           maintain_order="left"),
                            embeddings, settings["thetas"], settings["theta"], settings["block_size"],
                            settings["task_rule"])
            for source in tasks["source"].unique(maintain_order=True)])
        for source, kept, total in tasks.group_by("source", maintain_order=True).agg(
                pl.col("keep").sum(), pl.len()).iter_rows():
            log.info("dedup %s: %d of %d tasks kept", source, kept, total)
    write_artifact(envs, outputs["synthetic_envs"], spec)
    write_artifact(tasks, outputs["synthetic_tasks"], spec)


def build_catalog(spec: StageSpec, settings: Mapping[str, Any], inputs: Mapping[str, str],
                  outputs: Mapping[str, str]) -> None:
    """List every artifact under ``settings["results"]`` (all keys, not only the current config's)."""
    frame = catalog(settings["results"])
    write_artifact(frame, outputs["catalog"], spec)
    log.info("catalog: %d artifacts", frame.height)



def plan(spec: StageSpec, settings: Mapping[str, Any], inputs: Mapping[str, str], outputs: Mapping[str, str]) -> None:
    """Write the plan computed at parse time: one row per run."""
    frame = pl.DataFrame(settings["runs"], schema_overrides={"worlds": pl.Int64, "families": pl.List(pl.String),
                                                             "sweeps": pl.List(pl.String)})
    write_artifact(frame, outputs["runs"], spec)
    log.info("plan: %d runs over %d grid points", frame.height, frame["point_key"].n_unique())


def _single_thread_torch() -> None:
    """One thread per training job: two threads in one process collapse when another job holds a core."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)


def train(spec: StageSpec, settings: Mapping[str, Any], inputs: Mapping[str, str], outputs: Mapping[str, str]) -> None:
    """Train every seed of one grid point and evaluate each on the held-out pool, in one process:
    process start and the torch import (about 3 s) are paid once per grid point, not once per
    seed and stage."""
    _single_thread_torch()
    from axisrl.backends.tiny import (HeldoutStarts, TrainSettings, checkpoint, evaluate, policy_of, save_checkpoints,
                                      train as train_policy)
    from axisrl.datasets import select_training_data

    design = settings["design"]
    pool = None if design["source"] == "real" else (read_artifact(inputs["synthetic_envs"], "dedup_sources"),
                                                    read_artifact(inputs["synthetic_tasks"], "dedup_sources"))
    envs, tasks = select_training_data(read_artifact(inputs["envs"], "dedup"), read_artifact(inputs["tasks"], "dedup"),
                                       design, pool)
    heldout_envs, heldout_tasks = (frame.to_dicts() for frame in _heldout(inputs))
    synthetic = synthetic_trajectories(design, tasks, inputs, settings.get("sources"))
    backend = TrainSettings.from_dict(backend_settings(settings["train"], design))
    budget = training_budget(design, settings["train"])
    planned = {"budget_visits": budget.visits, "budget_rollouts": budget.rollouts,
               "max_rollout_steps": budget.max_rollout_steps, "max_flops": budget.max_flops}
    horizon = float(np.mean([json.loads(spec)["max_steps"] for spec in envs["spec"]]))
    effective = effective_d_task(tasks)
    metrics, runs, episodes, checkpoints = [], [], [], {}
    starts = HeldoutStarts(heldout_envs, heldout_tasks, settings["evaluate"]["seed"], backend.leak_primitive_role)
    for seed, run in zip(settings["seeds"], settings["run_keys"]):
        log.info("train %s seed %d: %d envs, %d tasks", run, seed, envs.height, tasks.height)
        result = train_policy(envs.to_dicts(), tasks.to_dicts(), backend, seed, synthetic=synthetic,
                              progress=lambda row: log.info("update %(update)d reward %(reward_mean).3f", row))
        tail = result.metrics[-max(1, len(result.metrics) // 5):]
        metrics += [{"run_key": run, "seed": seed, **row} for row in result.metrics]
        if result.error is not None:
            log.warning("train %s seed %d recorded as failed: %s", run, seed, result.error)
        runs.append({"run_key": run, "seed": seed, "status": result.status, "error": result.error,
                     "param_hash": result.param_hash,
                     "train_success": float(np.mean([row["success_mean"] for row in tail])) if tail else None,
                     **result.compute,
                     "executed_compute": result.compute["rollout_flops"] + result.compute["train_flops"],
                     **planned, **cost_drivers(result.compute, result.timings, horizon), **effective})
        checkpoints[seed] = checkpoint(result)
        rows = evaluate(policy_of(checkpoints[seed]), heldout_envs, heldout_tasks, settings["evaluate"]["seed"],
                        starts=starts)
        episodes += [{"run_key": run, "seed": seed, **row} for row in rows]
        log.info("evaluate %s: %d held-out episodes, success %.3f", run, len(rows), np.mean([r["success"] for r in rows]))
    save_checkpoints(checkpoints, outputs["policies"])
    write_artifact(pl.DataFrame(metrics, infer_schema_length=None), outputs["metrics"], spec)
    write_artifact(pl.DataFrame(runs, infer_schema_length=None), outputs["runs"], spec)
    write_artifact(pl.DataFrame(episodes, infer_schema_length=None), outputs["episodes"], spec)


def _heldout(inputs: Mapping[str, str]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The held-out pool every run is evaluated on: its environments and the tasks dedup kept."""
    return (read_artifact(inputs["heldout_envs"], "dedup"),
            read_artifact(inputs["heldout_tasks"], "dedup").filter(pl.col("keep")))


def train_verl(spec: StageSpec, settings: Mapping[str, Any], inputs: Mapping[str, str],
               outputs: Mapping[str, str]) -> None:
    """Train one seed of one grid point with verl on this job's GPUs (a run takes a node for days,
    so each seed is a job) and merge its final checkpoint into ``model`` (a Hugging Face
    directory) for the vLLM evaluate job. A run that fails is recorded with its error."""
    import subprocess
    from pathlib import Path

    from axisrl.backends.verl import VerlJob, merge_command, train as train_llm
    from axisrl.datasets import select_training_data

    design, llm, resources = settings["design"], settings["train"]["llm"], settings["resources"]
    train_data = select_training_data(read_artifact(inputs["envs"], "dedup"), read_artifact(inputs["tasks"], "dedup"),
                                      design)
    backend = backend_settings(settings["train"], design)
    model = Path(outputs["model"])
    (seed,), (run,) = settings["seeds"], settings["run_keys"]
    log.info("train %s seed %d with verl: %d envs, %d tasks", run, seed, *(frame.height for frame in train_data))
    job = VerlJob(model_path=llm["model"], run_dir=model.parent / "verl", experiment_name=run,
                  seed=seed, n_gpus=resources["gpus"], num_cpus=resources["cpus"],
                  max_prompt_length=llm["max_prompt_length"], max_response_length=llm["max_response_length"],
                  max_turns=llm["max_turns"], max_parallel_calls=llm["max_parallel_calls"],
                  max_tool_response_chars=llm["max_tool_response_chars"], enable_thinking=llm["enable_thinking"])
    result = train_llm(backend, job, train_data, _heldout(inputs), settings["domain"])
    if result.status == "ok":
        subprocess.run(merge_command(result.checkpoint, model), check=True)
    else:  # an empty model directory: the evaluate job skips this seed
        model.mkdir(parents=True, exist_ok=True)
        log.warning("train %s seed %d recorded as failed: %s", run, seed, result.error)
    done = result.metrics
    tail = [row["success_mean"] for row in done[-max(1, len(done) // 5):] if row["success_mean"] is not None]
    budget = training_budget(design, settings["train"])
    run_row = {"run_key": run, "seed": seed, "status": result.status, "error": result.error, "updates": len(done),
               "visits": len(done) * budget.visits_per_update, "budget_visits": budget.visits,
               "budget_rollouts": budget.rollouts, "episodes": sum(row["episodes"] or 0 for row in done),
               "env_steps": sum(row["env_steps"] or 0 for row in done),
               "train_success": float(np.mean(tail)) if tail else None}
    write_artifact(pl.DataFrame([{"run_key": run, "seed": seed, **row} for row in done], infer_schema_length=None),
                   outputs["metrics"], spec)
    write_artifact(pl.DataFrame([run_row], infer_schema_length=None), outputs["runs"], spec)


def evaluate_vllm(spec: StageSpec, settings: Mapping[str, Any], inputs: Mapping[str, str],
                  outputs: Mapping[str, str]) -> None:
    """Every seed's merged model played greedily with vLLM on the held-out pool, with the turn,
    call and truncation limits it was trained under; a seed without a model (its training
    failed) has no episodes, so collect reports no success for it."""
    from pathlib import Path

    from axisrl.backends.vllm_eval import VllmEngine, evaluate as evaluate_llm

    envs, tasks = (frame.to_dicts() for frame in _heldout(inputs))
    llm, options = settings["llm"], settings["evaluate"]["vllm"]
    episodes = []
    for seed, run, model in zip(settings["seeds"], settings["run_keys"], inputs["models"]):
        if not any(Path(model).iterdir()):
            log.warning("evaluate %s: no model (training failed), no episodes", run)
            continue
        engine = VllmEngine(model, options["max_tokens"], {"enable_thinking": llm["enable_thinking"]},
                            max_model_len=options["max_model_len"], seed=settings["evaluate"]["seed"],
                            tensor_parallel_size=options["tensor_parallel_size"],
                            gpu_memory_utilization=options["gpu_memory_utilization"])
        rows = evaluate_llm(engine, envs, tasks, settings["domain"], llm["max_turns"], llm["max_parallel_calls"],
                            llm["max_tool_response_chars"])
        del engine  # frees the GPU for the next seed's model
        episodes += [{"run_key": run, "seed": seed, **row} for row in rows]
        log.info("evaluate %s: %d held-out episodes, success %.3f", run, len(rows), np.mean([r["success"] for r in rows]))
    write_artifact(pl.DataFrame(episodes, infer_schema_length=None), outputs["episodes"], spec)


def synthetic_trajectories(design: Mapping[str, Any], tasks: pl.DataFrame, inputs: Mapping[str, str],
                           sources: Mapping[str, Any] | None) -> Any:
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
        fidelity = sources["methods"][method]  # toolworld ignores the unit cost
        return SyntheticTrajectories(per_group, simulator=lambda spec, task, seed: toolworld.SimulatedEnv(
            spec, task, fidelity, seed))
    rows = (read_artifact(inputs["synthetic_trajectories"], "sources")
            .filter((pl.col("source") == design["source"]) & pl.col("task_id").is_in(tasks["task_id"].to_list()))
            .sort("task_id", "trajectory_index"))
    replay = {task_id: group.to_dicts() for (task_id,), group in rows.group_by("task_id", maintain_order=True)}
    return SyntheticTrajectories(per_group, replay=replay)


def effective_d_task(tasks: pl.DataFrame) -> dict[str, int]:
    """How many of a run's training tasks are distinct under each dedup rule (Tables 14-15):
    ``d_task_raw``; ``d_task_skill`` and ``d_task_verifier``, distinct (environment identity,
    signature) pairs among them; ``d_task_emb_<theta>``, those the pool-level embedding rule at
    ``theta`` keeps (a task it drops has an earlier near-duplicate in the pool, which the run may
    or may not hold: an approximation from above of the duplicates within the run)."""
    counts = {"d_task_raw": tasks.height,
              "d_task_skill": tasks.select("env_s1", "skill_sig").n_unique(),
              "d_task_verifier": tasks.select("env_s1", "verifier_sig").n_unique()}
    for column in tasks.columns:
        if column.startswith("keep_emb_"):
            counts[column.replace("keep_emb_", "d_task_emb_")] = int(tasks[column].sum())
    return counts


def cost_drivers(compute: Mapping[str, float], timings: Mapping[str, float], horizon: float
                 ) -> dict[str, float | None]:
    """The measured cost drivers of Table 18 for one training run: step limit (``horizon``), env
    steps per trajectory, wall seconds per env call and per verification, the failed-rollout
    fraction (rollouts stopped by the step limit or cap without finishing: toolworld's timeouts)
    and utilisation (the share of rollout wall time spent in the policy's forward passes)."""
    def ratio(num: float, den: float) -> float | None:
        return num / den if den else None

    return {"horizon": horizon,
            "rollout_steps_per_trajectory": ratio(compute["env_steps"], compute["episodes"]),
            "env_seconds_per_call": ratio(timings["env_seconds"], timings["env_calls"]),
            "verifier_seconds_per_trajectory": ratio(timings["verifier_seconds"], timings["verifier_calls"]),
            "failed_rollout_fraction": ratio(compute["truncated_episodes"], compute["episodes"]),
            "utilization": ratio(timings["policy_seconds"], timings["rollout_wall_seconds"])}


TIERS = ("T0", "T1", "T2", "all")


def success_by_tier(episodes: pl.DataFrame) -> pl.DataFrame:
    """Pooled held-out success per run and tier with its binomial SE and the loss ``L = -ln p``.

    ``p`` is clipped to [1/(2n), 1 - 1/(2n)] before the log, so a run with no success has a finite loss.
    """
    tiers = pl.concat([episodes, episodes.with_columns(tier=pl.lit("all"))])
    stats = tiers.group_by("run_key", "tier").agg(n=pl.len(), p=pl.col("success").cast(pl.Float64).mean())
    stats = stats.with_columns(
        se=(pl.col("p") * (1 - pl.col("p")) / pl.col("n")).sqrt(),
        loss=-(pl.col("p").clip(1 / (2 * pl.col("n")), 1 - 1 / (2 * pl.col("n")))).log(),
    )
    wide = stats.pivot(on="tier", index="run_key", values=["n", "p", "se", "loss"], separator="_")
    return wide.select("run_key", *(f"{stat}_{tier}" for tier in TIERS for stat in ("n", "p", "se", "loss")
                                    if f"{stat}_{tier}" in wide.columns))


def collect(spec: StageSpec, settings: Mapping[str, Any], inputs: Mapping[str, str],
            outputs: Mapping[str, str]) -> None:
    """One row per run (design, held-out success per tier, train success, compute, cost drivers,
    status), and every held-out episode's success (the task-level bootstrap reads it)."""
    planned = read_artifact(inputs["plan"], "plan")
    trained = pl.concat([read_artifact(p, "train") for p in inputs["train_runs"]], how="diagonal_relaxed")
    episodes = pl.concat([read_artifact(p, settings["episodes_stage"]) for p in inputs["episodes"]],
                         how="diagonal_relaxed")
    steps = episodes.group_by("run_key").agg(steps_per_trajectory=pl.col("steps").mean())
    frame = (planned.join(trained.drop("seed"), on="run_key", how="left")
             .join(success_by_tier(episodes), on="run_key", how="left")
             .join(steps, on="run_key", how="left"))
    write_artifact(frame, outputs["runs"], spec)
    write_artifact(episodes.select("run_key", "seed", "task_id", "tier", "success"), outputs["episodes"], spec)
    log.info("collect: %d runs, %d failed", frame.height, int((frame["status"] != "ok").sum()))


def laws(spec: StageSpec, settings: Mapping[str, Any], inputs: Mapping[str, str], outputs: Mapping[str, str]) -> None:
    """Every scaling-law analysis of the collected study; an analysis the study has no runs for
    writes one row saying so."""
    from axisrl.laws.study import LawSettings, analyse

    frames = analyse(read_artifact(inputs["runs"], "collect"), read_artifact(inputs["episodes"], "collect"),
                     LawSettings(**settings))
    for name, path in outputs.items():
        frame = frames.get(name)
        if frame is None:
            frame = pl.DataFrame({"status": ["not_run"], "reason": [f"the study has no runs that {name} reads"]})
        write_artifact(frame, path, spec)
    for warning in frames["warnings"]["warning"]:
        log.warning("%s", warning)


def pricing(spec: StageSpec, settings: Mapping[str, Any], inputs: Mapping[str, str],
            outputs: Mapping[str, str]) -> None:
    """Discount kappa and collapse ratios r* of every synthetic source (Tables 3, 16, 17; Figure 4)."""
    from axisrl.pricing import PRICING_POINT_COLUMNS, price, pricing_tables

    options = settings["pricing"]
    if settings["points"]:
        points = pl.DataFrame(settings["points"], schema_overrides={"ratio": pl.Float64}).select(PRICING_POINT_COLUMNS)
        frames = price(read_artifact(inputs["runs"], "collect"), points, settings["unit_costs"], options["tier"],
                       options["threshold"], options["n_boot"], options["seed"])
        frames.update(pricing_tables(frames["pricing"], options["threshold"]))
    else:
        frames = {}
    for name, path in outputs.items():
        frame = frames.get(name)
        if frame is None or frame.height == 0:
            frame = pl.DataFrame({"status": ["not_run"],
                                  "reason": ["the study has no mixture runs (study.families.mixtures)"]})
        write_artifact(frame, path, spec)
    for row in frames.get("pricing", pl.DataFrame()).iter_rows(named=True):
        log.info("%s at %s=%s: kappa %s (%s), r* %s", row["source"], row["axis"], row["real_amount"], row["kappa"],
                 row["kappa_status"], row.get("r_star_threshold"))


def _recipe_settings(settings: Mapping[str, Any]) -> Any:
    from axisrl.recipe.study import RecipeSettings

    recipe = settings["recipe"]
    return RecipeSettings(tier=recipe["tier"], cost=recipe["cost"][settings["domain"]], budgets=recipe["budgets"],
                          strategies=recipe["strategies"], validation=recipe["validation"], n_boot=recipe["n_boot"],
                          seed=recipe["seed"], perturbation=recipe["perturbation"], train=settings["train"])


def recipe(spec: StageSpec, settings: Mapping[str, Any], inputs: Mapping[str, str],
           outputs: Mapping[str, str]) -> None:
    """The compute-optimal recipe (Tables 18-21) and the strategy and validation runs it
    pre-registers: their designs and predicted success are written before any of them is trained."""
    from axisrl.datasets import task_capacity
    from axisrl.recipe import study

    options = _recipe_settings(settings)
    runs = read_artifact(inputs["runs"], "collect")
    runs = runs.filter(pl.col("domain") == settings["domain"])
    drivers = study.drivers_table(runs)
    model = study.cost_model(options.cost, drivers.row(0, named=True), options.visits)
    fitted = study.fit_recipe_law(runs, read_artifact(inputs["episodes"], "collect"), options)
    log.info("recipe law over %s: %s; centre cost %.3g %s", sorted(fitted.law.alpha), fitted.law,
             study.centre_cost(fitted, model), model.currency)
    path, exponents = study.exponent_table(fitted, model, options)
    frames = {
        "law": study.law_frame(fitted), "cost": study.cost_frame(model, settings["domain"]), "path": path,
        "exponents": exponents, "curves": study.strategy_curves(fitted, model, options), "table18": drivers,
        "table19": study.progression_table(fitted, options, drivers.row(0, named=True)),
        "table20": exponents.filter(pl.col("axis") != "share_weighted_sum").select(
            pl.lit(settings["domain"]).alias("domain"), "axis", "slope", "slope_lo", "slope_hi", "identified",
            "paper_exponent"),
        "table21": study.perturbation_table(fitted, model, options),
        "strategies": study.strategy_designs(fitted, model, options, len(settings["seeds"]), task_capacity(
            read_artifact(inputs["envs"], "dedup"), read_artifact(inputs["tasks"], "dedup"))),
    }
    for name, path_ in outputs.items():
        write_artifact(frames[name], path_, spec)
    for row in exponents.iter_rows(named=True):
        log.info("exponent %s: %s [%s, %s]", row["axis"], row["slope"], row.get("slope_lo"), row.get("slope_hi"))
        if row["identified"] is False:
            log.warning("exponent %s is not identified: the fitted law gives %s no effect (A = 0), so its slope "
                        "is where the budget constraint left the spare compute", row["axis"], row["axis"])


def validate(spec: StageSpec, settings: Mapping[str, Any], inputs: Mapping[str, str],
             outputs: Mapping[str, str]) -> None:
    """The strategy runs measured against their pre-registered predictions, what each spent against
    what it was charged, and the recipe's compute efficiency over each baseline at each level."""
    from axisrl.laws.data import pool_points, usable_runs
    from axisrl.plan import run_key
    from axisrl.recipe import CostModel
    from axisrl.recipe.study import accounting, efficiency_table, law_from_frame

    strategies = read_artifact(inputs["strategies"], "recipe")
    trained = pl.concat([read_artifact(p, "train") for p in inputs["train_runs"]], how="diagonal_relaxed")
    episodes = pl.concat([read_artifact(p, settings["episodes_stage"]) for p in inputs["episodes"]],
                         how="diagonal_relaxed")
    keys = pl.DataFrame([{"run_key": run_key(point, seed), "point_key": point}
                         for point in strategies["point_key"].unique().to_list() for seed in settings["seeds"]])
    runs = trained.join(success_by_tier(episodes), on="run_key", how="left").join(keys, on="run_key")
    tier = settings["recipe"]["tier"]
    measured = pool_points(runs, ["point_key"], tier)
    charged = strategies.select("point_key", "charged_compute").unique("point_key")
    spent = accounting(runs.join(charged, on="point_key"), ["point_key"])
    table = (strategies.join(measured.select("point_key", "n_seeds", "p", "loss", "loss_se", "trials"),
                             on="point_key", how="left")
             .join(spent.drop("charged_compute"), on="point_key", how="left")
             .with_columns(p_se=(pl.col("p") * (1 - pl.col("p")) / pl.col("trials")).sqrt(),
                           inside_interval=pl.col("p").is_between(pl.col("success_lo"), pl.col("success_hi")),
                           total_cost=pl.col("executed_compute") + pl.col("declared_price"))
             .with_columns(total_over_budget=pl.col("total_cost") / pl.col("compute")))
    law, draws, ranges, fixed = law_from_frame(read_artifact(inputs["law"], "recipe"))
    cost_row = read_artifact(inputs["cost"], "recipe").row(0, named=True)
    model = CostModel.from_mapping({k: v for k, v in cost_row.items() if k != "domain"})
    seed_runs, _ = usable_runs(runs, tier)
    efficiency = efficiency_table(table, seed_runs.select("point_key", "successes", "trials"), law, draws, model,
                                  ranges, fixed, settings["recipe"]["efficiency_draws"],
                                  settings["recipe"]["efficiency_boot"], settings["recipe"]["seed"])
    write_artifact(table, outputs["measured"], spec)
    write_artifact(efficiency, outputs["efficiency"], spec)
    for row in table.iter_rows(named=True):
        log.info("%s %s at %gx: spent %.3g (executed %.3g of %.3g charged, x%.3f), measured %.3f", row["role"],
                 row["strategy"], row["compute_factor"], row["total_cost"], row["executed_compute"],
                 row["charged_compute"], row["executed_over_charged"], row["p"])
    for row in table.filter(pl.col("role") == "validation").iter_rows(named=True):
        log.info("validation at %gx: measured %.3f, predicted %.3f [%.3f, %.3f], inside: %s", row["compute_factor"],
                 row["p"], row["predicted_success"], row["success_lo"], row["success_hi"], row["inside_interval"])
    for row in efficiency.iter_rows(named=True):
        log.info("efficiency over %s at %gx: measured %.3g [%.3g, %.3g] (%s), predicted %s", row["baseline"],
                 row["compute_factor"], row["measured_efficiency"], row["measured_efficiency_lo"],
                 row["measured_efficiency_hi"], row["measured_status"], row["predicted_efficiency"])


def figure(spec: StageSpec | None, settings: Mapping[str, Any], inputs: Mapping[str, str],
           outputs: Mapping[str, str]) -> None:
    """One figure of the paper as PNG and PDF."""
    from axisrl.report import figures

    if settings["figure"] == "fig2":
        figures.figure2(read_artifact(inputs["points"], "laws"), read_artifact(inputs["axis_fits"], "laws"),
                        outputs["png"], outputs["pdf"], read_artifact(inputs["trends"], "laws"))
    elif settings["figure"] == "fig1":
        figures.figure1(read_artifact(inputs["measured"], "validate"), outputs["png"], outputs["pdf"])
    elif settings["figure"] == "fig5":
        figures.figure5(read_artifact(inputs["path"], "recipe"), read_artifact(inputs["exponents"], "recipe"),
                        read_artifact(inputs["curves"], "recipe"), read_artifact(inputs["measured"], "validate"),
                        outputs["png"], outputs["pdf"])
    elif settings["figure"] == "fig4":
        curves = read_artifact(inputs["curves"], "pricing")
        if "ratio" in curves.columns:
            figures.figure4(curves, read_artifact(inputs["collapse"], "pricing"), settings["threshold"],
                            outputs["png"], outputs["pdf"])
        else:
            figures.placeholder("Figure 4: this study has no mixture runs (study.families.mixtures)",
                                outputs["png"], outputs["pdf"])
    else:
        grid = figures.interaction_grid(read_artifact(inputs["runs"], "collect"), settings["tier"],
                                        settings["cost_per_env"], settings["cost_per_task"])
        if grid.height:
            figures.figure3(grid, outputs["png"], outputs["pdf"])
        else:
            figures.placeholder("Figure 3: this study has no interaction-family runs "
                                "(study.families.interaction)", outputs["png"], outputs["pdf"])


def table(spec: StageSpec | None, settings: Mapping[str, Any], inputs: Mapping[str, str],
          outputs: Mapping[str, str]) -> None:
    """One named table of the paper from the collected runs, as Markdown and CSV."""
    from axisrl.report.tables import TABLES, table9, write_table

    if settings["table"] == "table9":
        from axisrl.recipe import study

        runs = read_artifact(inputs["runs"], "collect")
        model = (study.cost_model(settings["cost"], study.drivers_table(runs).row(0, named=True), settings["visits"])
                 if settings["cost"] else None)
        frame = table9(runs, model, read_artifact(inputs["measured"], "validate") if "measured" in inputs else None)
    else:
        (source,) = inputs.values()
        frame = TABLES[settings["table"]](read_artifact(source))
    write_table(frame, outputs["markdown"], outputs["csv"], settings["title"])
    log.info("%s: %d rows", settings["table"], frame.height)
