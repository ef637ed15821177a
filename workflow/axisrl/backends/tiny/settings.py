"""``TrainSettings``: what one tiny run is trained with. Below the trainer and its update rules, which
both read it; the names of rules and bounds it accepts are the registries' (``registry``). Every
default is the config schema's (``axisrl.schema``), so a run built in code trains as a study's run
with the same settings does."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from axisrl.backends.tiny.algos import LOSS_AGG_MODES
from axisrl.backends.tiny.registry import KL_BOUNDS, UPDATES
from axisrl.schema import current_names, default


@dataclass(frozen=True)
class TrainSettings:
    """Defaults are the schema's (the CPU study's): Dr. GRPO advantages with DAPO's step-mean
    clip-higher loss, no KL and no reference model; no cap (a budget convention sets one)."""

    algo: str = default("study", "algo")
    """The update rule, a key of ``UPDATES``: ``grpo``, ``ppo`` or ``bc`` (behaviour cloning on references)."""
    width: int = default("study", "width")
    """The policy's embedding and hidden width."""
    updates: int = default("train", "updates")
    """Updates to run, unless a cap ends the run sooner."""
    visits_per_update: int = default("train", "visits_per_update")
    """Tasks visited per update (GRPO groups), each by ``d_traj`` rollouts."""
    d_traj: int = default("study", "centre", "d_traj")
    """Real rollouts per visited task: the samples of one prompt."""
    lr: float = default("train", "lr")
    """Adam's learning rate."""
    lr_warmup_steps_ratio: float = default("train", "lr_warmup_steps_ratio")
    """The learning rate rises linearly over this share of ``updates`` (verl's name), then holds."""
    clip_ratio_low: float = default("train", "clip_ratio_low")
    """The surrogate's ratio is clipped below at ``1 - clip_ratio_low``."""
    clip_ratio_high: float | None = default("train", "clip_ratio_high")
    """None: 0.28 for GRPO (DAPO clip-higher), ``clip_ratio_low`` for PPO (the symmetric clip)."""
    loss_agg_mode: str = default("train", "loss_agg_mode")
    """GRPO's aggregation of step losses, one of ``LOSS_AGG_MODES`` (PPO's minibatches take the token mean)."""
    norm_adv_by_std_in_grpo: bool = default("train", "norm_adv_by_std_in_grpo")
    """Divide GRPO's advantages by the group's std (original GRPO); False is Dr. GRPO."""
    grpo_minibatches: int = default("train", "grpo_minibatches")
    """GRPO's optimiser steps per update, each on a disjoint share of its groups (verl's ``ppo_mini_batch_size``)."""
    kl_coef: float = default("train", "kl_coef")
    """GRPO's weight of the k3 KL to the initial policy (0: no reference model)."""
    reward_density: str = default("study", "reward_density")
    """What an episode is trained on: ``sparse``, its verified outcome; ``dense``, the fraction of subgoals met."""
    gamma: float = default("train", "gamma")
    """PPO's discount."""
    lam: float = default("train", "lam")
    """PPO's GAE lambda."""
    ppo_epochs: int = default("train", "ppo_epochs")
    """PPO's passes over an update's decisions."""
    ppo_minibatches: int = default("train", "ppo_minibatches")
    """PPO's minibatches per pass, one optimiser step each."""
    vf_coef: float = default("train", "vf_coef")
    """PPO's weight of the value loss."""
    ent_coef: float = default("train", "ent_coef")
    """PPO's entropy bonus; GRPO has none (its zero-advantage steps are then skipped exactly)."""
    max_grad_norm: float = default("train", "max_grad_norm")
    """The gradient's norm is clipped to this before every optimiser step."""
    leak_primitive_role: bool = default("train", "leak_primitive_role")
    """Add each tool's true primitive to its descriptor: a deliberate leak, for the leak check only."""
    token_cap: int | None = None
    """Token cap: the run stops at exactly this many env steps (episodes running then are truncated)."""
    flop_cap: float | None = None
    """FLOP cap on rollout + training FLOPs: the run ends as close to it as whole visits allow."""
    dynamic_sampling: bool = default("train", "dynamic_sampling", "enabled")
    """DAPO's dynamic sampling: train on groups with a learning signal, drawing more to fill the update."""
    max_draws: int = default("train", "dynamic_sampling", "max_draws")
    """Dynamic sampling: draws per update at most, the first included (each a whole update's visits)."""
    kl_bound: str | None = None
    """A rule of ``KL_BOUNDS`` that sets each update's learning rate from the last ``rollout_kl``; None: none."""
    target_kl: float = default("train", "kl_bound", "target_kl")
    """The bound's target per-update ``rollout_kl``."""

    def __post_init__(self) -> None:
        checks = {
            f"algo must be one of {sorted(UPDATES)}": self.algo in UPDATES,
            f"loss_agg_mode must be one of {LOSS_AGG_MODES}": self.loss_agg_mode in LOSS_AGG_MODES,
            "reward_density must be 'sparse' or 'dense'": self.reward_density in ("sparse", "dense"),
            "width, updates, visits_per_update, d_traj, grpo_minibatches, ppo_epochs and ppo_minibatches "
            "must be >= 1": min(
                self.width,
                self.updates,
                self.visits_per_update,
                self.d_traj,
                self.grpo_minibatches,
                self.ppo_epochs,
                self.ppo_minibatches,
            )
            >= 1,
            "token_cap and flop_cap must be positive": all(
                cap is None or cap > 0 for cap in (self.token_cap, self.flop_cap)
            ),
            "dynamic sampling needs GRPO or PPO groups of 2 or more rollouts and max_draws >= 1": (
                not self.dynamic_sampling or (self.algo != "bc" and self.d_traj > 1 and self.max_draws >= 1)
            ),
            f"kl_bound must be None or one of {sorted(KL_BOUNDS)}": self.kl_bound is None or self.kl_bound in KL_BOUNDS,
            "target_kl must be positive": self.target_kl > 0,
        }
        failed = [message for message, ok in checks.items() if not ok]
        if failed:
            raise ValueError("; ".join(failed))

    @property
    def clip_high(self) -> float:
        if self.clip_ratio_high is not None:
            return self.clip_ratio_high
        return 0.28 if self.algo == "grpo" else self.clip_ratio_low

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> TrainSettings:
        """The settings a dict names (a checkpoint's from before issue 60 under its old names too)."""
        values = current_names(values)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown tiny backend settings: {unknown}")
        return cls(**values)
