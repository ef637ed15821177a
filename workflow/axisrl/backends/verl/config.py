"""The Hydra overrides of one verl run, from the study's train settings, and their CPU validation.

``overrides(settings, job)`` takes the train settings a design resolves to (``axisrl.plan.backend_settings``: the
tiny backend's names; the budget ones from ``axisrl.budget``) and a ``VerlJob`` (model, paths, resources) and
returns the override list for ``python -m verl.trainer.main_ppo``. How the settings map:

============================  ===============================================================
setting                       verl override
============================  ===============================================================
algo grpo / ppo               ``algorithm.adv_estimator`` grpo / gae (gae enables the critic)
d_traj                        ``actor_rollout_ref.rollout.n``
visits_per_update             ``data.train_batch_size`` prompts (task visits per update)
updates                       ``trainer.total_training_steps`` (``total_epochs`` = updates, so
                              the step count binds however few tasks there are)
lr                            ``actor_rollout_ref.actor.optim.lr``
lr_warmup_steps_ratio         ``actor_rollout_ref.actor.optim.lr_warmup_steps_ratio``
clip_ratio_low / _high        ``actor.clip_ratio_low`` / ``clip_ratio_high`` (None: 0.28 for GRPO,
                              the low ratio for PPO, as the tiny backend)
loss_agg_mode (GRPO)          ``actor.loss_agg_mode`` (same names; PPO keeps verl's token-mean)
norm_adv_by_std_in_grpo       ``algorithm.norm_adv_by_std_in_grpo``
kl_coef (GRPO)                ``actor.use_kl_loss`` (kl_coef > 0), ``kl_loss_coef``, ``kl_loss_type``
                              low_var_kl (k3, as the tiny backend); never a KL penalty in the reward
max_grad_norm                 ``actor.grad_clip`` (and ``critic.grad_clip``)
grpo_minibatches              ``actor.ppo_mini_batch_size`` = prompts // minibatches, ``ppo_epochs`` 1
ppo_epochs, ppo_minibatches   ``actor/critic.ppo_epochs``, ``ppo_mini_batch_size`` = prompts // minibatches
gamma, lam                    ``algorithm.gamma``, ``algorithm.lam``
ent_coef (PPO)                ``actor.entropy_coeff``
reward_density                ``+reward.custom_reward_function.reward_kwargs.reward_density``
============================  ===============================================================

Not carried: ``width`` (an LLM's size is its ``model_path``), ``vf_coef`` (verl trains the critic
with its own optimizer and ``critic.optim.lr``); ``leak_primitive_role``, ``token_cap``
and ``flop_cap`` have no verl counterpart, and ``dynamic_sampling`` and ``kl_bound`` (the tiny
learner's; verl 0.9.1's main_ppo has no group filter) are not carried yet, so a design that sets
them is refused rather than silently run another way.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from axisrl.backends.verl.episode import AGENT_NAME

REWARD_PATH = "pkg://axisrl.backends.verl.reward"
AGENT_LOOP_TARGET = "axisrl.backends.verl.agent_loop.AgentEpisodeLoop"
MAPPED = {
    "algo",
    "d_traj",
    "visits_per_update",
    "updates",
    "lr",
    "lr_warmup_steps_ratio",
    "clip_ratio_low",
    "clip_ratio_high",
    "loss_agg_mode",
    "norm_adv_by_std_in_grpo",
    "grpo_minibatches",
    "kl_coef",
    "max_grad_norm",
    "ppo_epochs",
    "ppo_minibatches",
    "gamma",
    "lam",
    "ent_coef",
    "reward_density",
}
NOT_CARRIED = {"width", "vf_coef", "max_draws", "target_kl"}  # the last two: only with a refused switch
REFUSED = {
    "leak_primitive_role": False,
    "token_cap": None,
    "flop_cap": None,
    "dynamic_sampling": False,
    "kl_bound": None,
}
"""Settings verl cannot honour, with the only value accepted."""


@dataclass(frozen=True)
class RunLayout:
    """Where one verl run keeps its inputs and outputs, all under ``run_dir``. Each start of
    ``main_ppo`` (``attempt``, from 1) writes its own logs (file logger, console, episode log) in
    ``attempts/<attempt>/``: verl's file logger truncates its file when it opens it, and a resumed
    run must keep what earlier attempts wrote."""

    run_dir: Path
    attempt: int = 1

    def attempts(self) -> list[RunLayout]:
        """The run's attempts that have a log folder, oldest first."""
        root = self.run_dir / "attempts"
        numbers = sorted(int(path.name) for path in root.glob("*") if path.name.isdigit()) if root.is_dir() else []
        return [RunLayout(self.run_dir, number) for number in numbers]

    def next_attempt(self) -> RunLayout:
        """The layout of the run's next start (attempt 1 for a fresh run)."""
        done = self.attempts()
        return RunLayout(self.run_dir, done[-1].attempt + 1 if done else 1)

    @property
    def attempt_dir(self) -> Path:
        return self.run_dir / "attempts" / str(self.attempt)

    @property
    def train_file(self) -> Path:
        return self.run_dir / "data" / "train.parquet"

    @property
    def val_file(self) -> Path:
        return self.run_dir / "data" / "heldout.parquet"

    @property
    def agent_loop_config(self) -> Path:
        return self.run_dir / "agent_loops.yaml"

    @property
    def checkpoints(self) -> Path:
        return self.run_dir / "checkpoints"

    @property
    def metrics_log(self) -> Path:
        """verl's file logger (``VERL_FILE_LOGGER_PATH``): one ``{"step", "data"}`` line per step."""
        return self.attempt_dir / "verl_metrics.jsonl"

    @property
    def episode_dir(self) -> Path:
        """The agent loop's per-trajectory outcome logs."""
        return self.attempt_dir / "episodes"

    @property
    def console_log(self) -> Path:
        return self.attempt_dir / "main_ppo.log"

    @property
    def tensorboard_dir(self) -> Path:
        """The TensorBoard logger's event files, every attempt's (``TENSORBOARD_DIR``; verl's default is
        relative to the job's working directory)."""
        return self.run_dir / "tensorboard"


@dataclass(frozen=True)
class VerlJob:
    """What one verl run needs beyond the train settings: model, place, resources, lengths.

    ``num_cpus`` must be the job's allocation (Ray otherwise sees the whole node and can hang under
    Slurm). ``ray_temp_dir`` defaults to a short per-run directory under the system temp dir: Ray
    puts its sockets there, and a Unix socket path may not exceed 107 bytes, which a results path
    easily does. ``max_prompt_length`` and ``max_response_length`` are tokens; the response budget
    is shared by every turn of an episode, tool outputs included. The episode limits are what the
    vLLM evaluation applies too: ``max_turns`` assistant turns (``multi_turn.max_assistant_turns``;
    the calls of the last one are not executed), ``max_parallel_calls`` executed calls per turn,
    tool messages cut at ``max_tool_response_chars`` characters
    (``multi_turn.max_tool_response_length``), and the chat template's ``enable_thinking`` switch
    (``data.apply_chat_template_kwargs``). A checkpoint every ``save_every`` updates
    (``trainer.save_freq``; verl always saves the last), the newest ``keep_checkpoints`` kept
    (``trainer.max_actor_ckpt_to_keep``, ``max_critic_ckpt_to_keep``), and ``trainer.resume_mode``
    auto: a rerun of a killed job continues from the newest checkpoint (``axisrl.backends.verl.launch``)."""

    model_path: str
    run_dir: Path
    experiment_name: str
    seed: int = 0
    n_gpus: int = 1
    num_cpus: int = 8
    critic_model_path: str | None = None
    critic_lr: float = 1e-5
    max_prompt_length: int = 4096
    max_response_length: int = 4096
    max_turns: int = 8
    max_parallel_calls: int = 1
    max_tool_response_chars: int = 2048
    enable_thinking: bool = False
    micro_batch_size_per_gpu: int = 4
    tensor_model_parallel_size: int = 1
    gpu_memory_utilization: float = 0.6
    test_freq: int = 10
    val_before_train: bool = True
    save_every: int = 10
    keep_checkpoints: int = 2
    ray_temp_dir: str | None = None
    loggers: tuple[str, ...] = ()
    """verl's experiment loggers beside ``console`` and ``file`` (``train.llm.loggers``)."""
    project_name: str = "axisrl"
    """The loggers' project (``trainer.project_name``): the study's, by ``project_name``."""

    @property
    def layout(self) -> RunLayout:
        return RunLayout(Path(self.run_dir))

    @property
    def chat_template_kwargs(self) -> dict[str, Any]:
        return {"enable_thinking": self.enable_thinking}

    @property
    def ray_dir(self) -> str:
        if self.ray_temp_dir is not None:
            return self.ray_temp_dir
        digest = hashlib.sha256(str(Path(self.run_dir).resolve()).encode()).hexdigest()[:12]
        return str(Path(tempfile.gettempdir()) / f"axisrl-ray-{digest}")


def project_name(domain: str, model_path: str) -> str:
    """The experiment loggers' project of a study: its domain and model directory name, so one W&B or
    MLflow project holds a study's runs (each named by its run key) and a study edit never moves it."""
    return re.sub(r"[^\w.-]+", "-", f"axisrl-{domain}-{Path(model_path).name}")


def prompts_per_step(settings: Mapping[str, Any]) -> int:
    """Prompts (tasks) per verl step: the tiny backend's tasks per update."""
    return settings["visits_per_update"]


def _checked(settings: Mapping[str, Any]) -> Mapping[str, Any]:
    unknown = sorted(set(settings) - MAPPED - NOT_CARRIED - set(REFUSED))
    if unknown:
        raise ValueError(f"train settings the verl backend does not know: {unknown}")
    refused = sorted(k for k, accepted in REFUSED.items() if settings.get(k, accepted) != accepted)
    if refused:
        raise ValueError(
            f"the verl backend cannot honour {refused} (the fixed_visits budget only, no leak check, "
            "no dynamic sampling or KL bound yet)"
        )
    if settings["algo"] not in ("grpo", "ppo"):
        raise ValueError(f"algo must be 'grpo' or 'ppo', got {settings['algo']!r}")
    return settings


def write_agent_loop_config(layout: RunLayout) -> Path:
    """The ``rollout.agent.agent_loop_config_path`` file: registers the agent loop (one for every
    domain) in every Ray worker (``@register`` only runs where the module is imported) with its
    episode log."""
    layout.agent_loop_config.parent.mkdir(parents=True, exist_ok=True)
    entry = {"name": AGENT_NAME, "_target_": AGENT_LOOP_TARGET, "episode_dir": str(layout.episode_dir)}
    layout.agent_loop_config.write_text(yaml.safe_dump([entry], sort_keys=False))
    return layout.agent_loop_config


def overrides(settings: Mapping[str, Any], job: VerlJob) -> list[str]:
    """The ``main_ppo`` override list (see the module docstring for the mapping)."""
    s = _checked(settings)
    grpo = s["algo"] == "grpo"
    layout = job.layout
    prompts = prompts_per_step(s)
    mini_batch = max(1, prompts // s["grpo_minibatches" if grpo else "ppo_minibatches"])
    epochs = 1 if grpo else s["ppo_epochs"]
    clip_high = s["clip_ratio_high"] if s["clip_ratio_high"] is not None else 0.28 if grpo else s["clip_ratio_low"]
    kl_coef = s["kl_coef"] if grpo else 0.0
    actor = "actor_rollout_ref.actor"
    rollout = "actor_rollout_ref.rollout"
    values: dict[str, Any] = {
        "algorithm.adv_estimator": "grpo" if grpo else "gae",
        "algorithm.use_kl_in_reward": False,
        "data.train_files": str(layout.train_file),
        "data.val_files": str(layout.val_file),
        "data.train_batch_size": prompts,
        "data.max_prompt_length": job.max_prompt_length,
        "data.max_response_length": job.max_response_length,
        "data.seed": job.seed,
        **{f"+data.apply_chat_template_kwargs.{key}": value for key, value in job.chat_template_kwargs.items()},
        "actor_rollout_ref.model.path": job.model_path,
        f"{actor}.optim.lr": s["lr"],
        f"{actor}.optim.lr_warmup_steps_ratio": s["lr_warmup_steps_ratio"],
        f"{actor}.ppo_mini_batch_size": mini_batch,
        f"{actor}.ppo_micro_batch_size_per_gpu": job.micro_batch_size_per_gpu,
        f"{actor}.ppo_epochs": epochs,
        f"{actor}.clip_ratio_low": s["clip_ratio_low"],
        f"{actor}.clip_ratio_high": clip_high,
        f"{actor}.grad_clip": s["max_grad_norm"],
        f"{actor}.entropy_coeff": 0.0 if grpo else s["ent_coef"],
        f"{actor}.use_kl_loss": kl_coef > 0,
        f"{actor}.kl_loss_coef": kl_coef,
        f"{actor}.kl_loss_type": "low_var_kl",
        f"{rollout}.name": "vllm",
        f"{rollout}.n": s["d_traj"],
        f"{rollout}.seed": job.seed,
        f"{rollout}.tensor_model_parallel_size": job.tensor_model_parallel_size,
        f"{rollout}.gpu_memory_utilization": job.gpu_memory_utilization,
        f"{rollout}.log_prob_micro_batch_size_per_gpu": job.micro_batch_size_per_gpu,
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": job.micro_batch_size_per_gpu,
        f"{rollout}.multi_turn.enable": True,
        f"{rollout}.multi_turn.format": "hermes",
        f"{rollout}.multi_turn.max_assistant_turns": job.max_turns,
        f"{rollout}.multi_turn.max_parallel_calls": job.max_parallel_calls,
        f"{rollout}.multi_turn.max_tool_response_length": job.max_tool_response_chars,
        f"{rollout}.agent.default_agent_loop": AGENT_NAME,
        f"{rollout}.agent.agent_loop_config_path": str(layout.agent_loop_config),
        "reward.custom_reward_function.path": REWARD_PATH,
        "reward.custom_reward_function.name": "compute_score",
        "+reward.custom_reward_function.reward_kwargs.reward_density": s["reward_density"],
        "trainer.total_training_steps": s["updates"],
        "trainer.total_epochs": s["updates"],
        "trainer.save_freq": job.save_every,
        "trainer.resume_mode": "auto",
        "trainer.max_actor_ckpt_to_keep": job.keep_checkpoints,
        "trainer.max_critic_ckpt_to_keep": job.keep_checkpoints,
        "trainer.test_freq": job.test_freq,
        "trainer.val_before_train": job.val_before_train,
        "trainer.logger": ["console", "file", *job.loggers],
        "trainer.project_name": job.project_name,
        "trainer.experiment_name": job.experiment_name,
        "trainer.default_local_dir": str(layout.checkpoints),
        "trainer.n_gpus_per_node": job.n_gpus,
        "trainer.nnodes": 1,
        "ray_kwargs.ray_init.num_cpus": job.num_cpus,
        "+ray_kwargs.ray_init._temp_dir": job.ray_dir,
    }
    if grpo:
        values.update(
            {
                "algorithm.norm_adv_by_std_in_grpo": s["norm_adv_by_std_in_grpo"],
                f"{actor}.loss_agg_mode": s["loss_agg_mode"],
            }
        )
    else:
        values.update(
            {
                "algorithm.gamma": s["gamma"],
                "algorithm.lam": s["lam"],
                "critic.model.path": job.critic_model_path or job.model_path,
                "critic.optim.lr": job.critic_lr,
                "critic.ppo_mini_batch_size": mini_batch,
                "critic.ppo_micro_batch_size_per_gpu": job.micro_batch_size_per_gpu,
                "critic.ppo_epochs": epochs,
                "critic.grad_clip": s["max_grad_norm"],
            }
        )
    return [f"{key}={_hydra_value(value)}" for key, value in values.items()]


_PLAIN = re.compile(r"[\w./:+-]+")


def _hydra_value(value: Any) -> str:
    """A value in Hydra's override grammar: quoted unless it is a plain word or path."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, Sequence) and not isinstance(value, str):
        return "[" + ",".join(_hydra_value(v) for v in value) + "]"
    text = str(value)
    if _PLAIN.fullmatch(text) and not text.startswith(("+", "-")):
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def compose(override_list: Sequence[str]) -> Any:
    """verl's own packaged ``ppo_trainer`` config with the overrides applied, as ``main_ppo`` composes it."""
    import verl
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    config_dir = Path(verl.__file__).parent / "trainer" / "config"
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        return hydra_compose("ppo_trainer", overrides=list(override_list))


def validate_overrides(override_list: Sequence[str]) -> Any:
    """Check an override list on CPU before a GPU job is spent on it; the composed config.

    Composition rejects misspelled keys; ``verl.utils.config.validate_config`` the batch arithmetic
    and the worker configs (the critic's loads its model directory). Beyond verl's checks: the
    custom reward function must load (a reward configured under the legacy key would leave it
    unset) and every agent loop in the agent-loop config must import."""
    from hydra.utils import get_class
    from omegaconf import OmegaConf
    from verl.trainer.ppo.reward import get_custom_reward_fn
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    cfg = compose(override_list)
    with warnings.catch_warnings():  # need_critic warns that GRPO runs without a critic, as intended
        warnings.filterwarnings("ignore", message="Disabled critic")
        validate_config(cfg, need_reference_policy(cfg), need_critic(cfg))
    if get_custom_reward_fn(cfg) is None:
        raise ValueError("no custom reward function is configured under reward.custom_reward_function")
    for entry in OmegaConf.load(cfg.actor_rollout_ref.rollout.agent.agent_loop_config_path):
        get_class(entry["_target_"])
    return cfg
