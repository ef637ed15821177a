"""GRPO and PPO on toolworld with the ToolPointer policy, one update at a time.

One update visits ``visits_per_update`` tasks (walking a seeded shuffle of the training tasks,
reshuffled each pass, so every task is visited equally often), rolls out ``group_size`` episodes
of each (one episode seed, so one anonymisation, per group: the samples of one prompt), then takes
one optimiser step (GRPO) or ``ppo_epochs`` x ``ppo_minibatches`` steps (PPO): the update rule
``UPDATES`` holds under ``algo``. A non-finite score, loss, gradient or parameter ends the run
with status ``"failed"`` and the metrics so far.

Synthetic trajectories (``SyntheticTrajectories``, GRPO only) join every group: ``per_group``
of them per task beside the ``group_size`` real rollouts, the group's advantages normalised over
all of them as if they were more samples of the prompt (how many visits an update holds is the
training budget's business, ``axisrl.budget``). Their steps do not count against
``max_rollout_steps`` (a cap on real env steps); their FLOPs count against ``max_flops``.

A FLOP cap ends the run close to the cap: once the cap leaves less than two updates, each update
plays at most half the visits the recent FLOPs per visit say are left.

Randomness: ``torch.manual_seed(seed)`` for the initial weights, and separate numpy generators
(one ``SeedSequence`` spawn each) for task sampling, episode seeds, action sampling and PPO
minibatches; synthetic trajectories (which ones are replayed, simulator seeds, simulated
actions) draw from a generator of their own, seeded apart from those four so that asking for
them leaves the real rollouts' streams as they were. Thread counts are the caller's business.

Top to bottom: the update rules' registry, the settings and the result; the parts of an update
(task sampling, synthetic trajectories, re-scoring, the GRPO and PPO rules, the caps); last
``train``, whose loop is ROLLOUT, UPDATE, RECORD.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import torch

from axisrl.backends.tiny.algos import (
    LOSS_AGG_MODES,
    agg_loss,
    chunk_share,
    compute_gae_advantage_return,
    compute_grpo_outcome_advantage,
    compute_policy_loss,
    kl_penalty_k3,
)
from axisrl.backends.tiny.fast_torch import Adam, deterministic_eager_ops
from axisrl.backends.tiny.features import collate, collate_episodes
from axisrl.backends.tiny.policy import ToolPointer, segment_entropy, segment_log_softmax
from axisrl.backends.tiny.rollout import Diverged, Episode, RolloutStats, Specs, distinct, no_cyclic_gc, rollout

log = logging.getLogger(__name__)

__all__ = ["UPDATES", "SyntheticTrajectories", "TrainResult", "TrainSettings", "UpdateContext", "UpdateStats",
           "make_policy", "param_hash", "register_update", "train"]


@dataclass(frozen=True)
class UpdateContext:
    """What an update rule gets: the policy it trains with its optimiser, the frozen reference
    (GRPO with ``kl_coef > 0``, else None), the update's episodes (real rollouts, then synthetic
    trajectories) with the group of each, the settings, the padded horizon and a generator of
    the rule's own (PPO's minibatches)."""

    policy: ToolPointer
    reference: ToolPointer | None
    optimizer: Adam
    episodes: Sequence[Episode]
    groups: torch.Tensor
    settings: TrainSettings
    horizon: int
    rng: np.random.Generator


@dataclass(frozen=True)
class UpdateStats:
    """What an update reports for its metrics row (see ``TrainResult``)."""

    loss: float = 0.0
    grad_norm: float = 0.0
    kl: float = 0.0
    train_flops: int = 0
    gradient_steps: int = 0


UpdateRule = Callable[[UpdateContext], UpdateStats]
UPDATES: dict[str, UpdateRule] = {}
"""The update rules by ``TrainSettings.algo``, filled by ``register_update``."""


def register_update(name: str) -> Callable[[UpdateRule], UpdateRule]:
    """Register an update rule as the one ``algo=name`` selects."""

    def register(rule: UpdateRule) -> UpdateRule:
        if name in UPDATES:
            raise ValueError(f"update rule {name!r} is registered twice")
        UPDATES[name] = rule
        return rule

    return register


@dataclass(frozen=True)
class TrainSettings:
    """Defaults are the CPU study's: Dr. GRPO advantages with DAPO's step-mean clip-higher loss,
    no KL and no reference model."""

    algo: str = "grpo"
    """The update rule, a key of ``UPDATES``: ``grpo`` or ``ppo``."""
    width: int = 64
    """The policy's embedding and hidden width."""
    updates: int = 100
    """Updates to run, unless a cap ends the run sooner."""
    visits_per_update: int = 32
    """Tasks visited per update (GRPO groups), each by ``group_size`` rollouts."""
    group_size: int = 8
    """Real rollouts per visited task: the samples of one prompt."""
    lr: float = 3e-3
    """Adam's learning rate."""
    clip_ratio_low: float = 0.2
    """The surrogate's ratio is clipped below at ``1 - clip_ratio_low``."""
    clip_ratio_high: float | None = None
    """None: 0.28 for GRPO (DAPO clip-higher), ``clip_ratio_low`` for PPO (the symmetric clip)."""
    loss_agg_mode: str = "token-mean"
    """GRPO's aggregation of step losses, one of ``LOSS_AGG_MODES`` (PPO's minibatches take the token mean)."""
    norm_adv_by_std_in_grpo: bool = False
    """Divide GRPO's advantages by the group's std (original GRPO); False is Dr. GRPO."""
    kl_coef: float = 0.0
    """GRPO's weight of the k3 KL to the initial policy (0: no reference model)."""
    reward_density: str = "sparse"
    """What an episode is trained on: ``sparse``, its verified outcome; ``dense``, the fraction of subgoals met."""
    gamma: float = 1.0
    """PPO's discount."""
    lam: float = 0.95
    """PPO's GAE lambda."""
    ppo_epochs: int = 4
    """PPO's passes over an update's decisions."""
    ppo_minibatches: int = 4
    """PPO's minibatches per pass, one optimiser step each."""
    vf_coef: float = 0.5
    """PPO's weight of the value loss."""
    ent_coef: float = 0.01
    """PPO's entropy bonus; GRPO has none (its zero-advantage steps are then skipped exactly)."""
    max_grad_norm: float = 1.0
    """The gradient's norm is clipped to this before every optimiser step."""
    leak_primitive_role: bool = False
    """Add each tool's true primitive to its descriptor: a deliberate leak, for the leak check only."""
    max_rollout_steps: int | None = None
    """Token cap: the run stops at exactly this many env steps (episodes running then are truncated)."""
    max_flops: float | None = None
    """FLOP cap on rollout + training FLOPs: the run ends as close to it as whole visits allow."""

    def __post_init__(self) -> None:
        checks = {
            f"algo must be one of {sorted(UPDATES)}": self.algo in UPDATES,
            f"loss_agg_mode must be one of {LOSS_AGG_MODES}": self.loss_agg_mode in LOSS_AGG_MODES,
            "reward_density must be 'sparse' or 'dense'": self.reward_density in ("sparse", "dense"),
            "width, updates, visits_per_update, group_size, ppo_epochs and ppo_minibatches must be >= 1":
                min(self.width, self.updates, self.visits_per_update, self.group_size, self.ppo_epochs,
                    self.ppo_minibatches) >= 1,
            "max_rollout_steps and max_flops must be positive": all(
                cap is None or cap > 0 for cap in (self.max_rollout_steps, self.max_flops)),
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
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown tiny backend settings: {unknown}")
        return cls(**values)


@dataclass(frozen=True)
class SyntheticTrajectories:
    """Trajectory-axis synthetic data: ``per_group`` synthetic trajectories (``D_s``) added to each
    task's group of ``group_size`` real rollouts (``D_r``), from exactly one source:

    * ``replay`` (SWiRL-like: generated, filtered trajectories used as training signal): task id
      -> rows with ``calls`` (canonical JSON list of tool calls in the environment's own names,
      ending with ``finish``, like a task's ``reference``) and ``label`` (the claimed reward, which
      is what the trajectory is trained on, not its verified outcome). Each is teacher-forced
      through the real environment, the policy scoring every replayed decision (its log-prob is
      the surrogate's old log-prob, as for a sampled action), and ends truncated at the first call
      no candidate plays. A task's rows are used in a seeded order, reshuffled after each pass; a
      task without rows gets only its real rollouts.
    * ``simulator`` (DreamGym-like: the policy's own rollouts in a learned experience model):
      ``simulator(spec, task, seed)`` builds an environment with ToolworldEnv's API (``reset``,
      ``step``, ``fork``, ``verify``; it must end an episode within the spec's ``max_steps``) in
      which ``per_group`` extra rollouts of the task are sampled, rewarded by its ``verify()``."""

    per_group: int
    replay: Mapping[str, Sequence[Mapping[str, Any]]] | None = None
    simulator: Callable[[dict[str, Any], Mapping[str, Any], int], Any] | None = None

    def __post_init__(self) -> None:
        if self.per_group < 0:
            raise ValueError(f"per_group must be >= 0, got {self.per_group}")
        if (self.replay is None) == (self.simulator is None):
            raise ValueError("synthetic trajectories need exactly one of replay and simulator")


SYNTHETIC_STREAM = 0x53594E
"""Seeds the synthetic trajectories' generator, ``SeedSequence([seed, SYNTHETIC_STREAM])``, apart
from the run's ``SeedSequence(seed).spawn(4)``."""


@dataclass
class TrainResult:
    """``status``: "ok", or "failed" when the run diverged or an update raised (``metrics`` then
    stop before it; ``error`` says what happened). Both are deterministic for a seed, so the run is
    recorded as failed at once rather than retried.

    ``metrics``, one row per update: reward_mean (the trained reward, sparse or dense),
    success_mean, entropy (mean over rollout decisions), kl (GRPO: k3 KL to the reference when
    ``kl_coef > 0``, else 0; PPO: mean old - new log-prob of the last minibatch), loss, grad_norm
    (before clipping), env_steps, scored_decisions (distinct decision points scored: a group's
    shared prefix once), gradient_steps (decisions in the loss with a non-zero weight: GRPO skips
    zero-advantage episodes; PPO trains every decision), episodes, rollout_flops, train_flops,
    zero_variance_groups and groups. ``compute``: their totals plus updates, visits (the groups
    played), distinct_tasks_seen, distinct_envs_seen, failed_episodes (not verified) and
    truncated_episodes (stopped without ``finish``).

    Synthetic trajectories are compute like any other: their scored decisions, FLOPs and
    gradient steps count in scored_decisions, rollout_flops, train_flops and gradient_steps, and
    they are group members for zero_variance_groups. What the agent did stays real: reward_mean,
    success_mean, entropy, env_steps, episodes, failed_episodes and truncated_episodes are over the
    real rollouts only. Rows (and ``compute``, as totals) add synthetic_episodes,
    synthetic_env_steps (replayed steps in the real environment, or simulated steps),
    synthetic_unmatched_steps (replayed calls no candidate plays) and synthetic_missing_tasks
    (tasks drawn without replay rows); rows add synthetic_reward_mean (the trained score of the
    update's synthetic trajectories: replay labels, simulated rewards; None without any)."""

    status: str
    metrics: list[dict[str, Any]]
    compute: dict[str, Any]
    state: dict[str, torch.Tensor]
    param_hash: str
    settings: TrainSettings
    timings: dict[str, float] = field(default_factory=dict)
    """Measured, machine-dependent, never compute: CPU seconds of rollouts and of optimisation
    (benchmarks), and the rollouts' cost drivers (wall seconds and counts of env calls,
    verifications and policy forwards; see ``RolloutStats``)."""
    error: str | None = None


COST_DRIVERS = ("env_seconds", "env_calls", "verifier_seconds", "verifier_calls", "policy_seconds")
TIMINGS = ("rollout_seconds", "train_seconds", "rollout_wall_seconds", *COST_DRIVERS)
SYNTHETIC_COUNTS = ("synthetic_episodes", "synthetic_env_steps", "synthetic_unmatched_steps", "synthetic_missing_tasks")
ROW_TOTALS = ("rollout_flops", "train_flops", "env_steps", "scored_decisions", "gradient_steps", "episodes",
              "zero_variance_groups", *SYNTHETIC_COUNTS)
"""The metrics row's counts that ``RunTotals`` sums."""


@dataclass
class RunTotals:
    """The run so far, summed over its updates' metrics rows and visits: ``TrainResult.compute``."""

    rollout_flops: int = 0
    train_flops: int = 0
    env_steps: int = 0
    scored_decisions: int = 0
    gradient_steps: int = 0
    episodes: int = 0
    visits: int = 0
    updates: int = 0
    zero_variance_groups: int = 0
    failed_episodes: int = 0
    truncated_episodes: int = 0
    synthetic_episodes: int = 0
    synthetic_env_steps: int = 0
    synthetic_unmatched_steps: int = 0
    synthetic_missing_tasks: int = 0
    tasks_seen: set[str] = field(default_factory=set)
    envs_seen: set[str] = field(default_factory=set)

    def add(self, row: Mapping[str, Any], visit: Visit) -> None:
        """Count one update: its metrics ``row`` and the real rollouts and tasks of its ``visit``."""
        for key in ROW_TOTALS:
            setattr(self, key, getattr(self, key) + row[key])
        self.visits += row["groups"]
        self.updates += 1
        self.failed_episodes += sum(not e.success for e in visit.episodes)
        self.truncated_episodes += sum(e.truncated for e in visit.episodes)
        self.tasks_seen.update(task["task_id"] for task in visit.tasks)
        self.envs_seen.update(task["env_id"] for task in visit.tasks)

    def as_compute(self) -> dict[str, Any]:
        counts = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if not f.name.endswith("_seen")}
        return {**counts, "distinct_tasks_seen": len(self.tasks_seen), "distinct_envs_seen": len(self.envs_seen)}


def param_hash(policy: torch.nn.Module) -> str:
    digest = hashlib.sha256()
    for name, tensor in policy.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().contiguous().numpy().tobytes())
    return digest.hexdigest()


def make_policy(settings: TrainSettings) -> ToolPointer:
    return ToolPointer(settings.width, settings.leak_primitive_role, value_head=settings.algo == "ppo")


class TaskSampler:
    """Walks a seeded shuffle of the tasks (or of one task's replay rows), reshuffling after each full pass."""

    def __init__(self, n_tasks: int, rng: np.random.Generator) -> None:
        self.n, self.rng = n_tasks, rng
        self.order: list[int] = []

    def take(self, count: int) -> list[int]:
        out: list[int] = []
        while len(out) < count:
            if not self.order:
                self.order = self.rng.permutation(self.n).tolist()
            out.append(self.order.pop(0))
        return out


def _scores(episodes: Sequence[Episode], density: str) -> torch.Tensor:
    """What each episode is trained on: its outcome (sparse or dense), or a replay's claimed label."""
    return torch.tensor([e.label if e.label is not None else e.reward if density == "sparse" else e.partial
                         for e in episodes], dtype=torch.float32)


def _zero_variance_groups(scores: torch.Tensor, group: torch.Tensor) -> int:
    """Groups of two or more whose scores are all equal: every advantage in them is zero."""
    count = 0
    for g in group.unique():
        members = scores[group == g]
        count += len(members) > 1 and bool(members.max() == members.min())
    return count


class SyntheticEpisodes(NamedTuple):
    """One update's synthetic trajectories, not yet played."""

    episodes: list[Episode]
    groups: list[int]
    """The group (index of the visited task) of each."""
    scripts: list[list[Any]] | None
    """Each replay's calls; None when simulated."""
    missing: int
    """Visited tasks without replay rows."""


class Synthesizer:
    """Builds each update's synthetic trajectories (see ``SyntheticTrajectories``) from their own
    generator; a task's replay rows are walked like the tasks (``TaskSampler``)."""

    def __init__(self, synthetic: SyntheticTrajectories, specs: Specs, leak_primitive_role: bool, seed: int) -> None:
        self.synthetic, self.specs, self.leak = synthetic, specs, leak_primitive_role
        self.rng = np.random.default_rng(np.random.SeedSequence([seed, SYNTHETIC_STREAM]))
        self.samplers: dict[str, TaskSampler] = {}

    def episodes(self, chosen: Sequence[Mapping[str, Any]], episode_seeds: np.ndarray) -> SyntheticEpisodes:
        """Each task's trajectories share a start node of their own under the group's anonymisation."""
        size, replay, simulator = self.synthetic.per_group, self.synthetic.replay, self.synthetic.simulator
        episodes: list[Episode] = []
        groups: list[int] = []
        scripts: list[list[Any]] = []
        missing = 0
        for g, task in enumerate(chosen):
            spec, episode_seed = self.specs[task["env_id"]], int(episode_seeds[g])
            if simulator is not None:
                env = simulator(spec, task, int(self.rng.integers(0, 2**62)))
                group = Episode.group(spec, task, episode_seed, self.leak, size, env)
            else:
                rows = replay.get(task["task_id"], ())
                if not rows:
                    missing += 1
                    continue
                group = Episode.group(spec, task, episode_seed, self.leak, size)
                picks = self.samplers.setdefault(task["task_id"], TaskSampler(len(rows), self.rng)).take(size)
                for episode, pick in zip(group, picks, strict=True):
                    episode.label = float(rows[pick]["label"])
                    scripts.append(json.loads(rows[pick]["calls"]))
            episodes += group
            groups += [g] * size
        return SyntheticEpisodes(episodes, groups, None if replay is None else scripts, missing)

    def rollout(self, policy: ToolPointer, episodes: Sequence[Episode], scripts: list[list[Any]] | None
                ) -> RolloutStats:
        """Replays are teacher-forced; simulated rollouts sample from the synthetic generator."""
        return rollout(policy, episodes, self.rng if scripts is None else None, scripts=scripts)


class Padded(NamedTuple):
    """Episodes as padded ``[B, H]`` step tensors."""

    mask: torch.Tensor
    """1 on every valid step."""
    old_log_probs: torch.Tensor
    """The rollouts' log-probs of the actions taken."""
    positions: np.ndarray
    """The flat position in ``[B, H]`` of every decision, episode by episode."""


def _padded(episodes: Sequence[Episode], horizon: int) -> Padded:
    mask = torch.zeros(len(episodes), horizon)
    old = torch.zeros(len(episodes), horizon)
    positions = []
    for b, e in enumerate(episodes):
        n = len(e.actions)
        mask[b, :n] = 1.0
        old[b, :n] = torch.tensor(e.log_probs)
        positions += range(b * horizon, b * horizon + n)
    return Padded(mask, old, np.asarray(positions, dtype=np.int64))


class Scored(NamedTuple):
    """The policy's recomputed outputs at some (episode, step) picks, with gradients."""

    log_probs: torch.Tensor
    """Of the action taken."""
    values: torch.Tensor | None
    """None without a value head."""
    entropy: torch.Tensor


def _chosen_log_probs(policy: ToolPointer, episodes: Sequence[Episode], picks: Sequence[tuple[int, int]]) -> Scored:
    """Log-prob of the taken action, value and entropy at each (episode, step) in ``picks``,
    recomputed with gradients over only the episodes involved; a decision point that several
    picks share (a group's common prefix) is scored once and its gradient accumulates."""
    involved = sorted({b for b, _ in picks})
    row = {b: r for r, b in enumerate(involved)}
    batch_of_episodes = collate_episodes([episodes[b].features for b in involved])
    decisions, index = distinct([episodes[b].decisions[t] for b, t in picks])
    first_row: dict[int, int] = {}
    for (b, _), u in zip(picks, index.tolist(), strict=True):
        first_row.setdefault(u, row[b])
    batch = collate(batch_of_episodes, decisions, [first_row[u] for u in range(len(decisions))])
    logits, values = policy(batch)
    log_probs = segment_log_softmax(logits, batch.cand_decision, len(decisions))
    taken = torch.from_numpy(batch.cand_start[index] + np.array([episodes[b].actions[t] for b, t in picks],
                                                                 dtype=np.int64))
    at = torch.from_numpy(index)
    entropy = segment_entropy(log_probs, batch.cand_decision, len(decisions))[at]
    return Scored(log_probs[taken], None if values is None else values[at], entropy)


def _backward(loss: torch.Tensor) -> None:
    if not torch.isfinite(loss):
        raise Diverged("non-finite loss")
    loss.backward()


def _step(policy: ToolPointer, optimizer: Adam, max_grad_norm: float) -> float:
    """Clip the accumulated gradient, take the optimiser step, zero the gradient; the norm before clipping."""
    grad_norm = float(torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm))
    if not math.isfinite(grad_norm):
        raise Diverged("non-finite gradient")
    optimizer.step()
    optimizer.zero_grad()
    if not math.isfinite(float(torch.nn.utils.get_total_norm(policy.parameters(), foreach=True))):
        raise Diverged("non-finite parameters")  # one norm over all parameters, not one per tensor
    return grad_norm


GRPO_CHUNK_ACTIVATIONS = 16384 * 64
"""Candidate rows x policy width (whole episodes, at least one) per forward/backward in a GRPO
step: gradients accumulate, so the autograd graph of one chunk, not of the whole update, is held
in memory, and that graph grows with the candidates scored times the width, not with the steps.
A default update fits in one chunk; large groups are cut into several (bench/README.md has the
sizes and the memory that set this)."""


def _chunks(episodes: Sequence[Episode], indices: Sequence[int], candidates: int) -> list[list[int]]:
    """``indices`` in order, cut into runs of at most ``candidates`` candidate rows (a decision that
    several episodes share is counted for each of them, so a run scores no more than that)."""
    chunks: list[list[int]] = [[]]
    size = 0
    for b in indices:
        rows = sum(decision.candidates.count for decision in episodes[b].decisions)
        if chunks[-1] and size + rows > candidates:
            chunks.append([])
            size = 0
        chunks[-1].append(b)
        size += rows
    return chunks


@register_update("grpo")
def grpo_update(u: UpdateContext) -> UpdateStats:
    """One GRPO step. Every aggregation is a sum over episodes with batch-wide normalisers, so the
    loss is computed chunk by chunk, each weighted by its share of the normaliser (``chunk_share``).
    Without a KL term an episode whose advantage is zero contributes nothing and is not recomputed
    at all; the normalisers still count its steps."""
    s, policy, episodes, horizon = u.settings, u.policy, u.episodes, u.horizon
    mask, old, _ = _padded(episodes, horizon)
    advantages = compute_grpo_outcome_advantage(_scores(episodes, s.reward_density), u.groups, mask,
                                                s.norm_adv_by_std_in_grpo)
    needed = [b for b in range(len(episodes)) if s.kl_coef > 0 or bool(advantages[b].any())]
    if not needed:
        return UpdateStats()
    loss_sum, kl_sum, train_flops = 0.0, 0.0, 0
    for chunk in _chunks(episodes, needed, GRPO_CHUNK_ACTIVATIONS // policy.width):
        rows = torch.tensor(chunk)
        share = chunk_share(s.loss_agg_mode, mask, rows)
        steps = [(b, t) for b in chunk for t in range(len(episodes[b].actions))]
        at = torch.tensor([r * horizon + t for r, b in enumerate(chunk) for t in range(len(episodes[b].actions))])
        policy.flops = 0
        chosen = _chosen_log_probs(policy, episodes, steps).log_probs
        train_flops += 3 * policy.flops
        log_prob = old[rows].flatten().index_put((at,), chosen).view(len(chunk), horizon)
        loss, _ = compute_policy_loss(old[rows], log_prob, advantages[rows], mask[rows], s.clip_ratio_low,
                                      s.clip_high, s.loss_agg_mode)
        loss = share * loss
        if u.reference is not None:
            u.reference.flops = 0
            with torch.no_grad():
                ref_chosen = _chosen_log_probs(u.reference, episodes, steps).log_probs
            train_flops += u.reference.flops
            ref = old[rows].flatten().index_put((at,), ref_chosen).view(len(chunk), horizon)
            kl = share * agg_loss(kl_penalty_k3(log_prob, ref), mask[rows], s.loss_agg_mode)
            loss = loss + s.kl_coef * kl
            kl_sum += float(kl.detach())
        _backward(loss)
        loss_sum += float(loss.detach())
    grad_norm = _step(policy, u.optimizer, s.max_grad_norm)
    return UpdateStats(loss_sum, grad_norm, kl_sum, train_flops, sum(len(episodes[b].actions) for b in needed))


@register_update("ppo")
def ppo_update(u: UpdateContext) -> UpdateStats:
    """CleanRL-style PPO: GAE on the episodes' outcome rewards, then epochs of shuffled
    minibatches over the decisions, advantages normalised per minibatch."""
    s, policy, episodes, horizon = u.settings, u.policy, u.episodes, u.horizon
    mask, old, positions = _padded(episodes, horizon)
    values = torch.zeros(len(episodes), horizon)
    rewards = torch.zeros(len(episodes), horizon)
    for b, (e, score) in enumerate(zip(episodes, _scores(episodes, s.reward_density), strict=True)):
        if e.actions:  # an episode cut by the step cap before its first step has nothing to learn from
            values[b, :len(e.values)] = torch.tensor(e.values)
            rewards[b, len(e.actions) - 1] = score
    advantages, returns = compute_gae_advantage_return(rewards, values, mask, s.gamma, s.lam)
    at = torch.from_numpy(positions)
    flat_adv, flat_ret, flat_old = advantages.flatten()[at], returns.flatten()[at], old.flatten()[at]
    steps = [(b, t) for b, e in enumerate(episodes) for t in range(len(e.actions))]
    last_loss, grad_norm, kl, train_flops = 0.0, 0.0, 0.0, 0
    for _ in range(s.ppo_epochs):
        for chunk in np.array_split(u.rng.permutation(len(steps)), s.ppo_minibatches):
            if len(chunk) == 0:
                continue
            policy.flops = 0
            log_prob, value, entropy = _chosen_log_probs(policy, episodes, [steps[k] for k in chunk])
            train_flops += 3 * policy.flops
            idx = torch.from_numpy(chunk)
            adv = flat_adv[idx]
            if len(chunk) > 1:
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
            ones = torch.ones(1, len(chunk))
            pg_loss, _ = compute_policy_loss(flat_old[idx][None], log_prob[None], adv[None], ones,
                                             s.clip_ratio_low, s.clip_high, "token-mean")
            v_loss = 0.5 * ((value - flat_ret[idx]) ** 2).mean()
            loss = pg_loss - s.ent_coef * entropy.mean() + s.vf_coef * v_loss
            kl = float((flat_old[idx] - log_prob.detach()).mean())
            last_loss = float(loss.detach())
            _backward(loss)
            grad_norm = _step(policy, u.optimizer, s.max_grad_norm)
    return UpdateStats(last_loss, grad_norm, kl, train_flops, len(steps))


RECENT_UPDATES = 4
"""Updates whose FLOPs per visit estimate the next one's under a FLOP cap: a visit grows dearer as
the policy learns (more groups with a learning signal to train on), so the recent ones say more."""


def _visits_within_caps(s: TrainSettings, metrics: Sequence[Mapping[str, Any]], totals: RunTotals) -> int:
    """Visits the next update plays, 0 to end the run: 0 once the env-step cap is reached;
    ``visits_per_update``, or under a FLOP cap at most half the visits the recent FLOPs per visit
    say the cap leaves, so that a run closes in on its cap from below in shrinking updates even
    when one visit costs several times another (a group with a learning signal trains, one
    without does not); with less than two visits left, one more if that lands nearer the cap."""
    if s.max_rollout_steps is not None and totals.env_steps >= s.max_rollout_steps:
        return 0
    if s.max_flops is None or not metrics:
        return s.visits_per_update
    recent = metrics[-RECENT_UPDATES:]
    per_visit = sum(row["rollout_flops"] + row["train_flops"] for row in recent) / sum(row["groups"] for row in recent)
    left = (s.max_flops - (totals.rollout_flops + totals.train_flops)) / per_visit
    return min(s.visits_per_update, math.floor(left / 2)) if left >= 2 else int(left >= 0.5)


class Visit(NamedTuple):
    """One update's visited tasks and the episodes on them."""

    tasks: list[Mapping[str, Any]]
    episodes: list[Episode]
    """``group_size`` real rollouts of each task, task by task."""
    synthetic: SyntheticEpisodes
    groups: torch.Tensor
    """The group (index of the task) of every episode, real then synthetic."""


class Played(NamedTuple):
    """What one update's rollouts did: the real ones and the synthetic ones."""

    real: RolloutStats
    synthetic: RolloutStats


def _visit(tasks: list[Mapping[str, Any]], episode_seeds: np.ndarray, specs: Specs, s: TrainSettings,
           synthesizer: Synthesizer | None) -> Visit:
    """The episodes of ``tasks``, each task's on one start (one anonymisation) from its episode seed."""
    episodes = [episode for g, task in enumerate(tasks)
                for episode in Episode.group(specs[task["env_id"]], task, int(episode_seeds[g]),
                                             s.leak_primitive_role, s.group_size)]
    synthetic = (synthesizer.episodes(tasks, episode_seeds) if synthesizer is not None
                 else SyntheticEpisodes([], [], None, 0))
    groups = torch.cat([torch.arange(len(tasks)).repeat_interleave(s.group_size),
                        torch.tensor(synthetic.groups, dtype=torch.int64)])
    return Visit(tasks, episodes, synthetic, groups)


def _play(policy: ToolPointer, visit: Visit, rng: np.random.Generator, step_budget: int | None,
          synthesizer: Synthesizer | None) -> Played:
    """Play the visit's real episodes (sampling with ``rng``, within ``step_budget`` env steps), then its
    synthetic ones."""
    real = rollout(policy, visit.episodes, rng, step_budget)
    synthetic = (synthesizer.rollout(policy, visit.synthetic.episodes, visit.synthetic.scripts)
                 if synthesizer is not None and visit.synthetic.episodes else RolloutStats())
    return Played(real, synthetic)


def _add_timings(timings: dict[str, float], played: Played, rollout_seconds: float, train_seconds: float) -> None:
    timings["rollout_seconds"] += rollout_seconds
    timings["train_seconds"] += train_seconds
    for key in COST_DRIVERS:
        timings[key] += getattr(played.real, key) + getattr(played.synthetic, key)
    timings["rollout_wall_seconds"] += played.real.seconds + played.synthetic.seconds


def _metrics_row(update: int, visit: Visit, played: Played, out: UpdateStats, density: str) -> dict[str, Any]:
    """The update's metrics row (see ``TrainResult``)."""
    real, synthetic = played
    rewards = _scores(visit.episodes, density)
    synthetic_rewards = _scores(visit.synthetic.episodes, density)
    return {"update": update, "reward_mean": float(rewards.mean()),
            "success_mean": float(np.mean([e.success for e in visit.episodes])),
            "entropy": real.entropy_sum / max(real.decisions, 1), "kl": out.kl, "loss": out.loss,
            "grad_norm": out.grad_norm, "env_steps": real.env_steps, "episodes": len(visit.episodes),
            "scored_decisions": real.scored_decisions + synthetic.scored_decisions,
            "gradient_steps": out.gradient_steps, "rollout_flops": real.flops + synthetic.flops,
            "train_flops": out.train_flops,
            "zero_variance_groups": _zero_variance_groups(torch.cat([rewards, synthetic_rewards]), visit.groups),
            "groups": len(visit.tasks), "synthetic_episodes": len(visit.synthetic.episodes),
            "synthetic_env_steps": synthetic.env_steps, "synthetic_unmatched_steps": synthetic.unmatched_steps,
            "synthetic_missing_tasks": visit.synthetic.missing,
            "synthetic_reward_mean": float(synthetic_rewards.mean()) if visit.synthetic.episodes else None}


def train(envs: Sequence[Mapping[str, Any]], tasks: Sequence[Mapping[str, Any]], settings: TrainSettings,
          seed: int, progress: Callable[[dict[str, Any]], None] | None = None,
          synthetic: SyntheticTrajectories | None = None) -> TrainResult:
    """Train a fresh policy on ``tasks`` (rows of env ``envs``), with ``synthetic`` trajectories in
    its groups if given; see the module docstring."""
    with no_cyclic_gc():
        return _train(envs, tasks, settings, seed, progress, synthetic)


def _train(envs: Sequence[Mapping[str, Any]], tasks: Sequence[Mapping[str, Any]], settings: TrainSettings,
           seed: int, progress: Callable[[dict[str, Any]], None] | None,
           synthetic: SyntheticTrajectories | None) -> TrainResult:
    # SETUP: generators, policy (and reference), optimiser, task sampler, synthetic source
    if not tasks:
        raise ValueError("no training tasks")
    s = settings
    per_group = 0 if synthetic is None else synthetic.per_group
    if per_group and s.algo != "grpo":
        raise ValueError(f"synthetic trajectories join GRPO groups; algo {s.algo!r} has none (use algo='grpo')")
    torch.manual_seed(seed)
    deterministic_eager_ops()
    task_rng, seed_rng, action_rng, batch_rng = (np.random.default_rng(child)
                                                 for child in np.random.SeedSequence(seed).spawn(4))
    specs = Specs(envs)
    policy = make_policy(s)
    reference = copy.deepcopy(policy).requires_grad_(False) if s.algo == "grpo" and s.kl_coef > 0 else None
    optimizer = Adam(policy.parameters(), lr=s.lr)
    optimizer.zero_grad()
    sampler = TaskSampler(len(tasks), task_rng)
    horizon = max(spec["max_steps"] for spec in specs.by_id.values())
    synthesizer = Synthesizer(synthetic, specs, s.leak_primitive_role, seed) if per_group else None
    metrics: list[dict[str, Any]] = []
    totals = RunTotals()
    timings = dict.fromkeys(TIMINGS, 0.0)
    status, error = "ok", None

    for update in range(s.updates):
        visits = _visits_within_caps(s, metrics, totals)
        if visits == 0:
            break
        # ROLLOUT: group_size episodes of each visited task (and its synthetic ones), played in lockstep
        started = time.process_time()
        chosen = [tasks[k] for k in sampler.take(visits)]
        visit = _visit(chosen, seed_rng.integers(0, 2**62, size=visits), specs, s, synthesizer)
        steps_left = None if s.max_rollout_steps is None else s.max_rollout_steps - totals.env_steps
        try:
            played = _play(policy, visit, action_rng, steps_left, synthesizer)
            rolled = time.process_time()
            # UPDATE: the algorithm's rule trains on the real and synthetic episodes of the visit
            context = UpdateContext(policy, reference, optimizer, visit.episodes + visit.synthetic.episodes,
                                    visit.groups, s, horizon, batch_rng)
            out = UPDATES[s.algo](context)
        except Exception as exc:  # a failed run is a result; the study goes on
            status, error = "failed", f"{type(exc).__name__}: {exc}"
            if not isinstance(exc, Diverged):
                log.exception("update %d failed", update)
            break
        # RECORD: timings, the update's metrics row, the run's totals
        _add_timings(timings, played, rolled - started, time.process_time() - rolled)
        row = _metrics_row(update, visit, played, out, s.reward_density)
        metrics.append(row)
        totals.add(row, visit)
        if progress is not None:
            progress(row)

    state = {k: v.detach().clone() for k, v in policy.state_dict().items()}
    return TrainResult(status, metrics, totals.as_compute(), state, param_hash(policy), s, timings, error)
