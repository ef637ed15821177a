"""A scripted stand-in for ``python -m verl.trainer.main_ppo``: what the launcher reads, written as
verl 0.9.1 writes it, on CPU in seconds, and a process that can be killed mid-run.

Run with the launcher's override list (``launch.train(..., command=command)``). It composes verl's
own config from the overrides, resumes like ``resume_mode`` auto (verl's ``find_latest_ckpt_path``
on ``trainer.default_local_dir``, the "model" restored from the checkpoint), logs through verl's own
``FileLogger`` (``VERL_FILE_LOGGER_PATH``: a validation line, then one line per step), appends one
episode record per trajectory to the agent loop's ``episode_dir`` (the fields ``AgentEpisodeLoop``
writes) and saves a checkpoint every ``trainer.save_freq`` steps and at the last in verl's order
(actor, ``data.pt``, then the tracker), pruned to ``max_actor_ckpt_to_keep`` the way verl's
checkpoint manager prunes what its own process saved. Its "model" is one number that every step
updates, so a resume from the wrong checkpoint shows in the metrics. Each actor checkpoint is also
what verl's FSDP checkpoint manager writes on one GPU, so the real ``verl.model_merger merge
--backend fsdp`` turns it into a Hugging Face directory: ``fsdp_config.json`` (world size 1),
``model_world_size_1_rank_0.pt`` (the state dict of ``actor_rollout_ref.model.path``'s
architecture, initialised from seed 0, with ``model.norm.weight`` filled with the scripted model's
number) and ``huggingface/`` (the model's config and tokenizer).

``SCRIPTED_MAIN_PPO_KILL`` makes it SIGKILL itself: ``after_step:N`` once step N is logged,
``in_save:N`` halfway through writing step N's checkpoint (the actor written, nothing after).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
from pathlib import Path

import torch
from omegaconf import OmegaConf
from verl.utils.checkpoint.checkpoint_manager import find_latest_ckpt_path
from verl.utils.tracking import FileLogger

from axisrl.backends.verl.config import compose
from axisrl.backends.verl.episode import append_episode_record


def update(weight: float, step: int) -> float:
    """One training step of the scripted model."""
    return round(0.8 * weight + 0.05 * (step % 4), 6)


def die_if(kill: str, event: str) -> None:
    if kill == event:
        os.kill(os.getpid(), signal.SIGKILL)


def write_fsdp_actor(actor: Path, model_path: str, weight: float) -> None:
    """An actor checkpoint as verl's FSDP checkpoint manager writes it on one GPU (world size 1):
    the files ``verl.model_merger``'s fsdp backend reads."""
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(model_path))
    state = model.state_dict()
    state["model.norm.weight"].fill_(weight)
    torch.save(state, actor / "model_world_size_1_rank_0.pt")
    (actor / "fsdp_config.json").write_text(json.dumps({"FSDP_version": 1, "world_size": 1}))
    shutil.copytree(model_path, actor / "huggingface", dirs_exist_ok=True)


def save(
    checkpoints: Path,
    step: int,
    weight: float,
    saved: list[Path],
    keep: int | None,
    kill: str,
    model_path: str,
) -> None:
    """verl's ``_save_checkpoint``: the actor (its manager first removes the oldest of this
    process's saves beyond ``keep - 1``), the dataloader state, then the tracker."""
    folder = checkpoints / f"global_step_{step}"
    if keep and len(saved) >= keep:
        for old in saved[: len(saved) - keep + 1]:
            shutil.rmtree(old, ignore_errors=True)
        del saved[: len(saved) - keep + 1]
    (folder / "actor").mkdir(parents=True, exist_ok=True)
    (folder / "actor" / "model.json").write_text(json.dumps({"weight": weight}))
    write_fsdp_actor(folder / "actor", model_path, weight)
    saved.append(folder / "actor")
    die_if(kill, f"in_save:{step}")
    torch.save({"step": step}, folder / "data.pt")
    (checkpoints / "latest_checkpointed_iteration.txt").write_text(str(step))


def main(override_list: list[str]) -> None:
    cfg = compose(override_list)
    trainer, rollout = cfg.trainer, cfg.actor_rollout_ref.rollout
    checkpoints = Path(trainer.default_local_dir)
    (entry,) = OmegaConf.load(rollout.agent.agent_loop_config_path)
    kill = os.environ.get("SCRIPTED_MAIN_PPO_KILL", "")
    logger = FileLogger(trainer.project_name, trainer.experiment_name)

    step, weight = 0, 0.5
    found = None if trainer.resume_mode == "disable" else find_latest_ckpt_path(str(checkpoints))
    if found is not None:
        step = int(found.split("global_step_")[-1])
        weight = json.loads((Path(found) / "actor" / "model.json").read_text())["weight"]
    logger.log({"val-core/toolworld/acc/mean@1": weight}, step=step)  # val_before_train
    saved: list[Path] = []
    while step < trainer.total_training_steps:
        step += 1
        weight = update(weight, step)
        for prompt in range(cfg.data.train_batch_size):
            for sample in range(rollout.n):
                success = (prompt + sample + step) % 3 == 0 or weight > 0.6
                append_episode_record(
                    entry["episode_dir"],
                    {
                        "global_steps": step,
                        "uid": f"{step}-{prompt}",
                        "split": "train",
                        "tier": "T0",
                        "env_id": f"env-{prompt % 2}",
                        "task_id": f"task-{prompt}",
                        "num_turns": 3,
                        "response_tokens": 40 + sample,
                        "tool_calls": 1 + sample % 2,
                        "turns": 2,
                        "parse_failures": 0,
                        "truncated": False,
                        "success": success,
                        "subgoals_met": int(success),
                        "subgoals_total": 1,
                        "env_steps": 1 + sample % 2,
                        "finished": True,
                    },
                )
        if step == trainer.total_training_steps or step % trainer.save_freq == 0:
            save(
                checkpoints, step, weight, saved, trainer.max_actor_ckpt_to_keep, kill, cfg.actor_rollout_ref.model.path
            )
        logger.log(
            {
                "training/global_step": step,
                "training/epoch": 0,
                "critic/score/mean": weight,
                "actor/entropy": 1.0 - weight / 2,
                "actor/pg_loss": -weight / 10,
                "actor/grad_norm": 0.5,
                "response_length/mean": 41.5,
                "num_turns/mean": 3.0,
                "perf/total_num_tokens": 1000 + step,
                "timing_s/step": 1.0,
            },
            step=step,
        )
        die_if(kill, f"after_step:{step}")
    logger.finish()


if __name__ == "__main__":
    main(sys.argv[1:])
