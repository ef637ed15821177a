"""Launch one verl run and read back what it did, in the tiny backend's metrics row schema.

``train`` exports the run's data (one domain's tasks), writes the agent-loop config, validates the
overrides and the prompt lengths on CPU, then runs ``python -m verl.trainer.main_ppo`` on this node
(verl starts its own Ray: ``RAY_ADDRESS`` is removed so a job never joins another job's cluster)
with verl's file logger on. ``merge_command`` converts the last actor checkpoint to a Hugging Face directory for
vLLM evaluation. Only ``train``'s subprocess needs a GPU.

Resume: verl checkpoints every ``save_every`` updates and, with ``resume_mode`` auto, continues
from the step its tracker names. Each ``train`` call is a new attempt with its own logs
(``RunLayout.attempt``); before it starts, the checkpoints are pruned to the newest
``keep_checkpoints`` complete ones and the tracker pointed at the newest (``complete_checkpoints``:
one being written when a job died is never loaded). ``train`` returns only for a run that reached
its last update and otherwise raises ``RunIncomplete``, so the job leaves no outputs and its rerun
continues; ``read_metrics`` merges the attempts, each step once.

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
groups, drawn_groups    equal, and the number of groups (episode log; every group played is trained)
rollout_kl              ``actor/ppo_kl`` (the KL to the rollout policy, k1, over the step's minibatches)
value_loss              ``critic/vf_loss`` (PPO; None for GRPO)
tokens                  ``perf/total_num_tokens`` (prompt and response tokens of the step)
response_length_mean    ``response_length/mean``
num_turns_mean          ``num_turns/mean`` (verl counts the prompt, assistant turns and tool-response rounds)
tool_calls_mean,        the collapse diagnostics (``axisrl.diagnostics``) of the step's training
no_tool_call_share,     episodes, from the agent loop's counts in the episode log: tool calls
turns_mean,             (``finish`` not counted), assistant turns, tool-call blocks that did not
parse_failures,         parse, and whether the trajectory hit ``max_response_length``
truncated_share
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
from collections.abc import Callable, Mapping, Sequence
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
from axisrl.diagnostics import EpisodeCounts, step_diagnostics
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


TRACKER = "latest_checkpointed_iteration.txt"
"""verl's checkpoint tracker: the step of the newest checkpoint it finished saving."""
LAST_SAVED = "data.pt"
"""The file verl writes last into a ``global_step_<N>`` folder (the dataloader state)."""


@dataclass(frozen=True)
class VerlResult:
    """A run that reached its last update: ``metrics``, one row per step over all its attempts;
    ``checkpoint``: the last update's actor checkpoint."""

    metrics: list[dict[str, Any]]
    checkpoint: Path


class RunIncomplete(RuntimeError):
    """``main_ppo`` ended before the run's last update (killed, out of time, or it raised): the
    job writes no outputs, and a rerun resumes from the newest complete checkpoint."""


MAIN_PPO = "AXISRL_MAIN_PPO"
"""An environment variable naming a Python script that the train job runs in place of
``verl.trainer.main_ppo`` (with this interpreter and the same overrides): how the tests and dry runs
replace the GPU step, e.g. with tests/verl/scripted_main_ppo.py. Unset or empty: verl's trainer."""


def main_ppo_command(override_list: Sequence[str]) -> list[str]:
    """The trainer's command line: ``python -m verl.trainer.main_ppo <overrides>``, or the script
    ``AXISRL_MAIN_PPO`` names."""
    script = os.environ.get(MAIN_PPO)
    trainer = [script] if script else ["-m", "verl.trainer.main_ppo"]
    return [sys.executable, *trainer, *override_list]


SLURM_END = "SLURM_JOB_END_TIME"
"""Where Slurm puts the end of the job's allocation (Unix seconds) in the job's environment."""
VERL_DEADLINE = "MLP_CURRENT_CAPACITY_BLOCK_EXPIRATION_TIMESTAMP"
"""The end time verl 0.9.1 reads (``should_save_ckpt_esi``): once the time left would not hold another
step and a save, it saves a checkpoint after every step, so a job that reaches its time limit loses
at most one step instead of up to ``save_every``."""


def launch_env(layout: RunLayout, base: Mapping[str, str] = os.environ) -> dict[str, str]:
    """``base`` with verl's file and TensorBoard loggers pointed into the run, Slurm's allocation end
    as verl's deadline, and without ``RAY_ADDRESS``."""
    env = {key: value for key, value in base.items() if key != "RAY_ADDRESS"}
    env["VERL_FILE_LOGGER_PATH"] = str(layout.metrics_log)
    env["TENSORBOARD_DIR"] = str(layout.tensorboard_dir)
    if SLURM_END in base:
        env.setdefault(VERL_DEADLINE, base[SLURM_END])
    return env


def prepare(
    settings: Mapping[str, Any],
    job: VerlJob,
    train_data: tuple[pl.DataFrame, pl.DataFrame],
    heldout_data: tuple[pl.DataFrame, pl.DataFrame],
    domain: str,
    attempt: RunLayout | None = None,
) -> list[str]:
    """Write the run's inputs (train and held-out Parquet, agent-loop config); the override list.
    ``*_data`` are (envs, tasks) frames of ``domain``; ``attempt``: the start whose episode log
    the agent loop writes (default the run's first)."""
    layout = job.layout
    write_verl_parquet(domain, *train_data, layout.train_file, "train", min_rows=prompts_per_step(settings))
    write_verl_parquet(domain, *heldout_data, layout.val_file, "heldout")
    write_agent_loop_config(attempt or layout)
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
    command: Callable[[Sequence[str]], list[str]] = main_ppo_command,
) -> VerlResult:
    """Prepare, check on CPU, run ``main_ppo`` (GPU) as the run's next attempt and read back its
    metrics and last checkpoint; raises ``RunIncomplete`` unless the run reached its last update.
    ``*_data`` are (envs, tasks) frames of ``domain`` (a name in ``axisrl.domains.DOMAINS``).
    ``command`` turns the overrides into the trainer's command line: ``main_ppo_command``, or in
    the tests a scripted stand-in that writes verl's files on CPU."""
    from transformers import AutoTokenizer

    layout = job.layout
    attempt = layout.next_attempt()
    override_list = prepare(settings, job, train_data, heldout_data, domain, attempt)
    validate_overrides(override_list)
    tokenizer = AutoTokenizer.from_pretrained(job.model_path)
    for path in (layout.train_file, layout.val_file):
        longest = longest_prompt(path, tokenizer, job.chat_template_kwargs)
        if longest > job.max_prompt_length:
            raise ValueError(f"{path.name}: a prompt has {longest} tokens > max_prompt_length {job.max_prompt_length}")
    updates = settings["updates"]
    resumed = keep_newest_checkpoints(layout, job.keep_checkpoints)
    returncode = 0
    if resumed < updates:  # verl would train a step past the end of a finished run
        attempt.episode_dir.mkdir(parents=True)
        with attempt.console_log.open("w") as log:
            returncode = subprocess.run(
                command(override_list), env=launch_env(attempt), stdout=log, stderr=subprocess.STDOUT, check=False
            ).returncode
    reached = keep_newest_checkpoints(layout, job.keep_checkpoints)
    if returncode != 0 or reached < updates:
        tail = attempt.console_log.read_text(errors="replace")[-4000:] if attempt.console_log.exists() else ""
        raise RunIncomplete(
            f"main_ppo (attempt {attempt.attempt}, resumed from step {resumed}) exited with {returncode}; "
            f"the newest complete checkpoint is step {reached} of {updates}, which a rerun resumes from:\n{tail}"
        )
    metrics = read_metrics(layout, settings["algo"], settings["reward_density"], domain)
    return VerlResult(metrics, actor_checkpoint(layout, reached))


def _episode_columns(records: list[dict[str, Any]], reward_density: str) -> dict[str, Any]:
    """success_mean, env_steps, episodes, zero_variance_groups, groups, drawn_groups and the collapse diagnostics
    (``axisrl.diagnostics.STEP_COLUMNS``) of one step's training episodes."""
    counts = [EpisodeCounts(r["tool_calls"], r["turns"], r["parse_failures"], r["truncated"]) for r in records]
    if not records:
        columns = ("success_mean", "env_steps", "episodes", "zero_variance_groups", "groups", "drawn_groups")
        return {**dict.fromkeys(columns), **step_diagnostics(counts)}
    scores: dict[str, list[float]] = defaultdict(list)
    for record in records:
        scores[record["uid"]].append(Outcome.from_record(record).score(reward_density))
    return {
        "success_mean": sum(r["success"] for r in records) / len(records),
        "env_steps": sum(r["env_steps"] for r in records),
        "episodes": len(records),
        "zero_variance_groups": sum(len(s) > 1 and max(s) == min(s) for s in scores.values()),
        "groups": len(scores),
        "drawn_groups": len(scores),
        **step_diagnostics(counts),
    }


def read_metrics(layout: RunLayout, algo: str, reward_density: str, domain: str) -> list[dict[str, Any]]:
    """One row per training step verl logged, over every attempt of the run (see the module
    docstring for the mapping); ``domain`` names verl's validation metrics (the rows'
    ``data_source``). An attempt resumed from a checkpoint re-runs the steps after it, so a later
    attempt's rows replace every earlier row from its first step on, and a step's episode records
    are its attempt's: each step once, the latest attempt winning."""
    rows: dict[int, dict[str, Any]] = {}
    for attempt in layout.attempts():
        logged = _attempt_rows(attempt, algo, reward_density, domain)
        if logged:
            first = min(logged)
            rows = {step: row for step, row in rows.items() if step < first} | logged
    return [rows[step] for step in sorted(rows)]


def _attempt_rows(attempt: RunLayout, algo: str, reward_density: str, domain: str) -> dict[int, dict[str, Any]]:
    """The rows of one attempt's file-logger lines, by step. A line cut short by a kill (no
    newline yet) is left out."""
    if not attempt.metrics_log.exists():
        return {}
    by_step: dict[int, list[dict[str, Any]]] = defaultdict(list)
    if attempt.episode_dir.exists():
        for record in read_episode_records(attempt.episode_dir):
            if record["split"] == "train" and record["global_steps"] is not None:
                by_step[record["global_steps"]].append(record)
    rows = {}
    for line in attempt.metrics_log.read_text().split("\n")[:-1]:
        entry = json.loads(line)
        data = entry["data"]
        if "training/global_step" not in data:
            continue  # the validation before training
        step = entry["step"]
        val = [value for key, value in data.items() if key.startswith(f"val-core/{domain}/acc/mean@")]
        kl = data.get("actor/kl_loss", 0.0) if algo == "grpo" else data.get("actor/ppo_kl")
        rows[step] = {
            "update": step - 1,
            **{key: data.get(name) for key, name in VERL_METRICS.items()},
            "kl": kl,
            "rollout_kl": data.get("actor/ppo_kl"),
            **_episode_columns(by_step[step], reward_density),
            **dict.fromkeys(UNMEASURED),
            **dict.fromkeys(NO_SYNTHETIC, 0),
            "val_success": val[0] if val else None,
        }
    return rows


def _checkpoint_dirs(layout: RunLayout) -> dict[int, Path]:
    """verl's ``global_step_<N>`` folders, by N."""
    found = {}
    for path in layout.checkpoints.glob("global_step_*"):
        number = path.name.removeprefix("global_step_")
        if number.isdigit() and path.is_dir():
            found[int(number)] = path
    return found


def complete_checkpoints(layout: RunLayout) -> list[int]:
    """The steps whose checkpoint verl finished, oldest first. verl saves the actor (and critic),
    then the dataloader state (``data.pt``), then records the step in its tracker; a folder past
    the tracker's step, or without an actor or ``data.pt``, was being written or pruned when the
    run died. A tracker cut short by a kill leaves the newest folder with ``data.pt`` complete."""
    dirs = _checkpoint_dirs(layout).items()
    finished = sorted(step for step, path in dirs if (path / "actor").is_dir() and (path / LAST_SAVED).is_file())
    tracker = layout.checkpoints / TRACKER
    if not tracker.exists():
        return []
    text = tracker.read_text().strip()
    recorded = int(text) if text.isdigit() else max(finished, default=0)
    return [step for step in finished if step <= recorded]


def keep_newest_checkpoints(layout: RunLayout, keep: int) -> int:
    """Prune the run's checkpoints to the newest ``keep`` complete ones (verl prunes only those its
    own attempt saved) and point verl's tracker at the newest, which ``resume_mode`` auto loads; its
    step (0: none, a fresh start)."""
    kept = complete_checkpoints(layout)[-keep:]
    for step, path in _checkpoint_dirs(layout).items():
        if step not in kept:
            shutil.rmtree(path)
    tracker = layout.checkpoints / TRACKER
    if not kept:
        tracker.unlink(missing_ok=True)
        return 0
    partial = tracker.with_suffix(".tmp")
    partial.write_text(str(kept[-1]))
    partial.replace(tracker)
    return kept[-1]


def actor_checkpoint(layout: RunLayout, step: int) -> Path:
    return layout.checkpoints / f"global_step_{step}" / "actor"


def latest_checkpoint(layout: RunLayout) -> Path | None:
    """The actor checkpoint of the newest complete step (``complete_checkpoints``); None without one."""
    complete = complete_checkpoints(layout)
    return actor_checkpoint(layout, complete[-1]) if complete else None


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
