"""The GPU family: one seed of a grid point trained with verl, and every seed's model evaluated with vLLM
(or transformers).
Both run on cluster nodes; the workflow's tests run them against a scripted stand-in of the GPU parts."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import polars as pl

from axisrl.artifacts import read_artifact, write_artifact
from axisrl.backends.llm_eval import Engine
from axisrl.backends.llm_eval import evaluate as evaluate_llm
from axisrl.config import StageSpec
from axisrl.diagnostics import run_diagnostics
from axisrl.stages.dedup import heldout

log = logging.getLogger("axisrl")


def train_verl(
    spec: StageSpec, settings: Mapping[str, Any], inputs: Mapping[str, str], outputs: Mapping[str, str]
) -> None:
    """Train one seed of one grid point with verl on this job's GPUs (a run takes a node for days,
    so each seed is a job) and merge its final checkpoint into ``model`` (a Hugging Face
    directory) for the vLLM evaluate job. A run that stops before its last update (killed, out of
    time, or verl raised) raises ``RunIncomplete`` and writes no outputs: the job's retry or
    rerun resumes it from its newest complete checkpoint."""
    import subprocess
    from pathlib import Path

    from axisrl.backends.verl import VerlJob, merge_command
    from axisrl.backends.verl import train as train_llm
    from axisrl.backends.verl.config import project_name
    from axisrl.datasets import select_training_data

    design, llm, resources = settings["design"], settings["llm"], settings["resources"]
    train_data = select_training_data(
        read_artifact(inputs["envs"], "dedup"), read_artifact(inputs["tasks"], "dedup"), design
    )
    backend = settings["settings"]
    model = Path(outputs["model"])
    (seed,), (run,) = settings["seeds"], settings["run_keys"]
    log.info("train %s seed %d with verl: %d envs, %d tasks", run, seed, *(frame.height for frame in train_data))
    job = VerlJob(
        model_path=llm["model"],
        run_dir=model.parent / "verl",
        experiment_name=run,
        project_name=project_name(settings["domain"], llm["model"]),
        loggers=tuple(llm["loggers"]),
        seed=seed,
        n_gpus=resources["gpus"],
        num_cpus=resources["cpus"],
        max_prompt_length=llm["max_prompt_length"],
        max_response_length=llm["max_response_length"],
        max_turns=llm["max_turns"],
        max_parallel_calls=llm["max_parallel_calls"],
        max_tool_response_chars=llm["max_tool_response_chars"],
        enable_thinking=llm["enable_thinking"],
        save_every=llm["save_every"],
        keep_checkpoints=llm["keep_checkpoints"],
    )
    result = train_llm(backend, job, train_data, heldout(inputs), settings["domain"])
    subprocess.run(merge_command(result.checkpoint, model), check=True)
    done = result.metrics
    tail = [row["success_mean"] for row in done[-max(1, len(done) // 5) :] if row["success_mean"] is not None]
    budget = settings["budget"]
    run_row = {
        "run_key": run,
        "seed": seed,
        "status": "ok",
        "error": None,
        "updates": len(done),
        "visits": len(done) * budget["visits_per_update"],
        "budget_visits": budget["budget_visits"],
        "budget_rollouts": budget["budget_rollouts"],
        "episodes": sum(row["episodes"] or 0 for row in done),
        "env_steps": sum(row["env_steps"] or 0 for row in done),
        "zero_variance_groups": sum(row["zero_variance_groups"] or 0 for row in done),
        "train_success": float(np.mean(tail)) if tail else None,
        **run_diagnostics(done),
    }
    write_artifact(
        pl.DataFrame([{"run_key": run, "seed": seed, **row} for row in done], infer_schema_length=None),
        outputs["metrics"],
        spec,
    )
    write_artifact(pl.DataFrame([run_row], infer_schema_length=None), outputs["runs"], spec)


def _vllm_engine(model: str, evaluate: Mapping[str, Any], chat_template_kwargs: Mapping[str, Any]) -> Engine:
    from axisrl.backends.vllm_eval import VllmEngine

    options = evaluate["vllm"]
    return VllmEngine(
        model,
        options["max_tokens"],
        chat_template_kwargs,
        max_model_len=options["max_model_len"],
        seed=evaluate["seed"],
        tensor_parallel_size=options["tensor_parallel_size"],
        gpu_memory_utilization=options["gpu_memory_utilization"],
    )


def _hf_engine(model: str, evaluate: Mapping[str, Any], chat_template_kwargs: Mapping[str, Any]) -> Engine:
    from axisrl.backends.hf_eval import HfEngine

    options = evaluate["hf"]
    return HfEngine(
        model,
        options["max_tokens"],
        options["max_model_len"],
        chat_template_kwargs,
        dtype=options["dtype"],
        device=options["device"],
        batch_size=options["batch_size"],
    )


ENGINES: dict[str, Callable[[str, Mapping[str, Any], Mapping[str, Any]], Engine]] = {
    "vllm": _vllm_engine,
    "hf": _hf_engine,
}
"""``evaluate.backend`` -> the engine that plays a merged model, from ``evaluate`` (its own block,
``evaluate.<backend>``) and the chat template's options; each imports its library only when built."""


def evaluate(
    spec: StageSpec, settings: Mapping[str, Any], inputs: Mapping[str, str], outputs: Mapping[str, str]
) -> None:
    """Every seed's merged model played greedily (with the engine ``evaluate.backend`` names) on the
    held-out pool, with the turn, call and truncation limits it was trained under; a seed without a
    model (its training failed) has no episodes, so collect reports no success for it."""
    from pathlib import Path

    envs, tasks = (frame.to_dicts() for frame in heldout(inputs))
    llm, options = settings["llm"], settings["evaluate"]
    build = ENGINES[options["backend"]]
    episodes = []
    for seed, run, model in zip(settings["seeds"], settings["run_keys"], inputs["models"]):
        if not any(Path(model).iterdir()):
            log.warning("evaluate %s: no model (training failed), no episodes", run)
            continue
        engine = build(model, options, {"enable_thinking": llm["enable_thinking"]})
        rows = evaluate_llm(
            engine,
            envs,
            tasks,
            settings["domain"],
            llm["max_turns"],
            llm["max_parallel_calls"],
            llm["max_tool_response_chars"],
        )
        del engine  # frees the GPU for the next seed's model
        episodes += [{"run_key": run, "seed": seed, **row} for row in rows]
        log.info(
            "evaluate %s: %d held-out episodes, success %.3f", run, len(rows), np.mean([r["success"] for r in rows])
        )
    write_artifact(pl.DataFrame(episodes, infer_schema_length=None), outputs["episodes"], spec)
