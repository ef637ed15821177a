"""Launch one verl run and read back what it did, in the tiny backend's metrics row schema.

``train`` exports the run's data (one domain's tasks), writes the agent-loop config, validates the
overrides and the prompt lengths on CPU, then runs ``python -m verl.trainer.main_ppo`` on this node
(verl starts its own Ray: ``RAY_ADDRESS`` is removed so a job never joins another job's cluster)
with verl's file logger on. ``merge_command`` converts the last actor checkpoint to a Hugging Face directory for
vLLM evaluation. Only ``train``'s subprocess needs a GPU.

Metrics rows (``read_metrics``), one per training step, from verl's file logger (``{"step",
"data"}`` per line) and the agent loop's episode log (verl 0.9.1 logs no per-sample reward details
for training steps, so success and environment steps come from the trajectories themselves):

======================  =====================================================================
row key                 source
======================  =====================================================================
update                  ``step`` - 1 (verl counts steps from 1, the tiny backend from 0)
reward_mean             ``critic/score/mean`` (the trained reward, before any KL penalty)
success_mean            mean ``success`` of the step's training episodes (episode log)
entropy                 ``actor/entropy``
kl                      GRPO: ``actor/kl_loss`` (0.0 without a KL loss); PPO: ``actor/ppo_kl``
loss                    ``actor/pg_loss``
grad_norm               ``actor/grad_norm``
env_steps, episodes     sum of ``env_steps`` / count of the step's training episodes (episode log)
zero_variance_groups    groups (``uid``: one prompt's rollouts) of 2+ whose trained scores are all
groups                  equal, and the number of groups (episode log)
value_loss              ``critic/vf_loss`` (PPO; None for GRPO)
tokens                  ``perf/total_num_tokens`` (prompt and response tokens of the step)
response_length_mean    ``response_length/mean``
num_turns_mean          ``num_turns/mean``
step_seconds            ``timing_s/step``
val_success             ``val-core/<domain>/acc/mean@N`` on a ``test_freq`` step (held-out tasks)
======================  =====================================================================

The tiny backend's compute accounting (``scored_decisions``, ``gradient_steps``,
``rollout_flops``, ``train_flops``) has no verl counterpart and is None; the verl backend has no
synthetic trajectories, so ``synthetic_*`` counts are 0 and ``synthetic_reward_mean`` None.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq

from axisrl.backends.verl.config import (
    RunLayout,
    VerlJob,
    overrides,
    prompts_per_step,
    validate_overrides,
    write_agent_loop_config,
)
from axisrl.backends.verl.episode import Outcome, read_episode_records
from axisrl.backends.verl.export import write_verl_parquet
from axisrl.domains import load

UNMEASURED = ("scored_decisions", "gradient_steps", "rollout_flops", "train_flops", "synthetic_reward_mean")
NO_SYNTHETIC = ("synthetic_episodes", "synthetic_env_steps", "synthetic_unmatched_steps", "synthetic_missing_tasks")
VERL_METRICS = {
    "reward_mean": "critic/score/mean",
    "entropy": "actor/entropy",
    "loss": "actor/pg_loss",
    "grad_norm": "actor/grad_norm",
    "value_loss": "critic/vf_loss",
    "tokens": "perf/total_num_tokens",
    "response_length_mean": "response_length/mean",
    "num_turns_mean": "num_turns/mean",
    "step_seconds": "timing_s/step",
}


@dataclass
class VerlResult:
    """``status`` "ok" or "failed" (``error``: the end of verl's console log); ``metrics``: the
    steps verl logged, also for a failed run; ``checkpoint``: the last actor checkpoint."""

    status: str
    metrics: list[dict[str, Any]]
    checkpoint: Path | None
    error: str | None = None


def main_ppo_command(override_list: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", "verl.trainer.main_ppo", *override_list]


def launch_env(layout: RunLayout, base: Mapping[str, str] = os.environ) -> dict[str, str]:
    """``base`` with verl's file logger pointed into the run and without ``RAY_ADDRESS``."""
    env = {key: value for key, value in base.items() if key != "RAY_ADDRESS"}
    env["VERL_FILE_LOGGER_PATH"] = str(layout.metrics_log)
    return env


def prepare(
    settings: Mapping[str, Any],
    job: VerlJob,
    train_data: tuple[pl.DataFrame, pl.DataFrame],
    heldout_data: tuple[pl.DataFrame, pl.DataFrame],
    domain: str,
) -> list[str]:
    """Write the run's inputs (train and held-out Parquet, agent-loop config); the override list.
    ``*_data`` are (envs, tasks) frames of ``domain``."""
    layout = job.layout
    write_verl_parquet(domain, *train_data, layout.train_file, "train", min_rows=prompts_per_step(settings))
    write_verl_parquet(domain, *heldout_data, layout.val_file, "heldout")
    write_agent_loop_config(layout)
    return overrides(settings, job)


def prompt_tokens(
    prompt: list[Mapping[str, str]],
    tools: list[dict[str, Any]],
    tokenizer: Any,
    chat_template_kwargs: Mapping[str, Any],
) -> int:
    """Tokens of a row's first prompt as the agent loop renders it: the messages and the
    environment's tools through the chat template (with the run's template switches), with the
    generation prompt."""
    text = tokenizer.apply_chat_template(
        prompt, tools=tools, add_generation_prompt=True, tokenize=False, **chat_template_kwargs
    )
    return len(tokenizer.encode(text, add_special_tokens=False))


def longest_prompt(path: str | Path, tokenizer: Any, chat_template_kwargs: Mapping[str, Any]) -> int:
    """The longest first prompt of a verl Parquet file. verl's dataset filter never sees the
    per-row tools, and the agent loop left-truncates a longer prompt (system turn and tools first)
    with only a warning, so this is checked before launching."""
    rows = pq.read_table(path, columns=["data_source", "prompt", "extra_info"]).to_pylist()
    unique = {row["extra_info"]["task_id"]: row for row in rows}
    return max(prompt_tokens(row["prompt"], row_tools(row), tokenizer, chat_template_kwargs) for row in unique.values())


def row_tools(row: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The tool schemas the agent loop gives an exported row: its domain's, for its spec."""
    return load(row["data_source"]).tool_schemas(json.loads(row["extra_info"]["spec"]))


def train(
    settings: Mapping[str, Any],
    job: VerlJob,
    train_data: tuple[pl.DataFrame, pl.DataFrame],
    heldout_data: tuple[pl.DataFrame, pl.DataFrame],
    domain: str,
) -> VerlResult:
    """Prepare, check on CPU, run ``main_ppo`` (GPU) and read back its metrics and checkpoint.
    ``*_data`` are (envs, tasks) frames of ``domain`` (a name in ``axisrl.domains.DOMAINS``)."""
    from transformers import AutoTokenizer

    layout = job.layout
    override_list = prepare(settings, job, train_data, heldout_data, domain)
    validate_overrides(override_list)
    tokenizer = AutoTokenizer.from_pretrained(job.model_path)
    for path in (layout.train_file, layout.val_file):
        longest = longest_prompt(path, tokenizer, job.chat_template_kwargs)
        if longest > job.max_prompt_length:
            raise ValueError(f"{path.name}: a prompt has {longest} tokens > max_prompt_length {job.max_prompt_length}")
    shutil.rmtree(layout.episode_dir, ignore_errors=True)  # a rerun starts afresh, as verl's file logger does
    layout.episode_dir.mkdir(parents=True)
    with layout.console_log.open("w") as log:
        returncode = subprocess.run(
            main_ppo_command(override_list), env=launch_env(layout), stdout=log, stderr=subprocess.STDOUT, check=False
        ).returncode
    metrics = read_metrics(layout, settings["algo"], settings["reward_density"], domain)
    if returncode != 0:
        tail = layout.console_log.read_text(errors="replace")[-4000:]
        return VerlResult("failed", metrics, None, f"main_ppo exited with {returncode}:\n{tail}")
    return VerlResult("ok", metrics, latest_checkpoint(layout))


def _episode_columns(records: list[dict[str, Any]], reward_density: str) -> dict[str, Any]:
    """success_mean, env_steps, episodes, zero_variance_groups and groups of one step's training episodes."""
    if not records:
        return dict.fromkeys(("success_mean", "env_steps", "episodes", "zero_variance_groups", "groups"))
    scores: dict[str, list[float]] = defaultdict(list)
    for record in records:
        scores[record["uid"]].append(Outcome.from_record(record).score(reward_density))
    return {
        "success_mean": sum(r["success"] for r in records) / len(records),
        "env_steps": sum(r["env_steps"] for r in records),
        "episodes": len(records),
        "zero_variance_groups": sum(len(s) > 1 and max(s) == min(s) for s in scores.values()),
        "groups": len(scores),
    }


def read_metrics(layout: RunLayout, algo: str, reward_density: str, domain: str) -> list[dict[str, Any]]:
    """One row per training step verl logged (see the module docstring for the mapping);
    ``domain`` names verl's validation metrics (the rows' ``data_source``)."""
    if not layout.metrics_log.exists():
        return []
    by_step: dict[int, list[dict[str, Any]]] = defaultdict(list)
    if layout.episode_dir.exists():
        for record in read_episode_records(layout.episode_dir):
            if record["split"] == "train" and record["global_steps"] is not None:
                by_step[record["global_steps"]].append(record)
    rows = []
    for line in layout.metrics_log.read_text().splitlines():
        entry = json.loads(line)
        data = entry["data"]
        if "training/global_step" not in data:
            continue  # the validation before training
        step = entry["step"]
        val = [value for key, value in data.items() if key.startswith(f"val-core/{domain}/acc/mean@")]
        kl = data.get("actor/kl_loss", 0.0) if algo == "grpo" else data.get("actor/ppo_kl")
        rows.append(
            {
                "update": step - 1,
                **{key: data.get(name) for key, name in VERL_METRICS.items()},
                "kl": kl,
                **_episode_columns(by_step[step], reward_density),
                **dict.fromkeys(UNMEASURED),
                **dict.fromkeys(NO_SYNTHETIC, 0),
                "val_success": val[0] if val else None,
            }
        )
    return rows


def latest_checkpoint(layout: RunLayout) -> Path:
    """The actor checkpoint of the last saved step (verl records the step in
    ``latest_checkpointed_iteration.txt``)."""
    step = int((layout.checkpoints / "latest_checkpointed_iteration.txt").read_text().strip())
    return layout.checkpoints / f"global_step_{step}" / "actor"


def merge_command(checkpoint: str | Path, target_dir: str | Path) -> list[str]:
    """The command that writes an FSDP actor checkpoint as a Hugging Face model directory (for vLLM)."""
    return [
        sys.executable,
        "-m",
        "verl.model_merger",
        "merge",
        "--backend",
        "fsdp",
        "--local_dir",
        str(checkpoint),
        "--target_dir",
        str(target_dir),
    ]
