"""verl: train LLM agents in any domain (``axisrl.domains``) with verl 0.9.1 (GRPO or PPO, vLLM
rollouts) on one GPU node.

    job = VerlJob(model_path="/models/Qwen3-4B", run_dir=run_dir, experiment_name=run_key,
                  n_gpus=8, num_cpus=int(os.environ["SLURM_CPUS_PER_TASK"]))
    result = train(backend_settings(cfg["train"], design), job, (envs, tasks), (heldout_envs, heldout_tasks),
                   "mathcode")
    subprocess.run(merge_command(result.checkpoint, hf_dir), check=True)  # for vLLM evaluation

Modules: ``export`` (verl Parquet, ``data_source`` = the domain), ``episode`` (the verl-free
environment core), ``agent_loop`` (the ``axisrl_agent`` loop for every domain; imports verl),
``reward`` (the custom reward function), ``config`` (the Hydra overrides and their CPU
validation), ``launch`` (run ``main_ppo``, read its metrics). This package imports no verl at
import time; only ``agent_loop``, ``validate_overrides`` and ``train`` need it. The verl pitfalls
it works around are listed in docs/cluster.md.
"""

from axisrl.backends.verl.config import RunLayout, VerlJob, overrides, validate_overrides
from axisrl.backends.verl.episode import AGENT_NAME, AgentEpisode, Outcome, observation_text
from axisrl.backends.verl.export import write_verl_parquet
from axisrl.backends.verl.launch import (
    RunIncomplete,
    VerlResult,
    latest_checkpoint,
    merge_command,
    read_metrics,
    train,
)

__all__ = [
    "AGENT_NAME",
    "AgentEpisode",
    "Outcome",
    "RunIncomplete",
    "RunLayout",
    "VerlJob",
    "VerlResult",
    "latest_checkpoint",
    "merge_command",
    "observation_text",
    "overrides",
    "read_metrics",
    "train",
    "validate_overrides",
    "write_verl_parquet",
]
