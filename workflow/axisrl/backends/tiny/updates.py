"""The tiny trainer's update rules: GRPO, PPO and behaviour cloning (BC), each a function from an
``UpdateContext`` (the update's episodes, the policy and its optimiser) to ``UpdateStats``,
registered in ``UPDATES`` under the ``TrainSettings.algo`` that selects it (as verl's
``core_algos.py`` registers its estimators and losses by name).

A rule re-scores the actions its episodes took with gradients (``rescore``: the policy's forward),
forms its loss from ``algos``, back-propagates it (``_backward``) and steps the optimiser
(``_step``). Kept apart from ``train`` so that the trainer reads as its loop (ROLLOUT, UPDATE,
RECORD) and a rule reads with the re-scoring and gradient steps it is built from. A non-finite
loss, gradient or parameter raises ``Diverged``, which ends the run as failed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import torch

from axisrl.backends.tiny.algos import (
    agg_loss,
    chunk_share,
    compute_gae_advantage_return,
    compute_grpo_outcome_advantage,
    compute_policy_loss,
    kl_penalty_k3,
)
from axisrl.backends.tiny.fast_torch import Adam
from axisrl.backends.tiny.features import collate, collate_episodes
from axisrl.backends.tiny.policy import ToolPointer, segment_entropy, segment_log_softmax
from axisrl.backends.tiny.registry import KL_BOUNDS, UPDATES
from axisrl.backends.tiny.rollout import Diverged, Episode, distinct

if TYPE_CHECKING:
    from axisrl.backends.tiny.settings import TrainSettings


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


def register_update(name: str) -> Callable[[UpdateRule], UpdateRule]:
    """Register an update rule as the one ``algo=name`` selects."""

    def register(rule: UpdateRule) -> UpdateRule:
        if name in UPDATES:
            raise ValueError(f"update rule {name!r} is registered twice")
        UPDATES[name] = rule
        return rule

    return register


def trained_scores(episodes: Sequence[Episode], density: str) -> torch.Tensor:
    """What each episode is trained on: its outcome (sparse or dense), or a replay's claimed label."""
    return torch.tensor(
        [e.label if e.label is not None else e.reward if density == "sparse" else e.partial for e in episodes],
        dtype=torch.float32,
    )


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
    flops: int = 0
    """The FLOPs of the forward that computed them."""


def rescore(policy: ToolPointer, episodes: Sequence[Episode], picks: Sequence[tuple[int, int]]) -> Scored:
    """Log-prob of the taken action, value and entropy at each (episode, step) in ``picks``,
    recomputed (with gradients, unless the caller turned them off) over only the episodes involved;
    a decision point that several picks share (a group's common prefix) is scored once and its
    gradient accumulates."""
    involved = sorted({b for b, _ in picks})
    row = {b: r for r, b in enumerate(involved)}
    unique, index = distinct([episodes[b].decisions[t] for b, t in picks])
    first_row: dict[int, int] = {}
    for (b, _), u in zip(picks, index.tolist(), strict=True):
        first_row.setdefault(u, row[b])
    before = policy.flops
    batch = collate(
        collate_episodes([episodes[b].features for b in involved]),
        unique,
        [first_row[u] for u in range(len(unique))],
    )
    logits, values = policy(batch)
    n_decisions, segment, starts = len(unique), batch.cand_decision, batch.cand_start
    log_probs = segment_log_softmax(logits, segment, n_decisions)
    actions = np.asarray([episodes[b].actions[t] for b, t in picks], dtype=np.int64)
    taken = torch.from_numpy(starts[index] + actions)
    at = torch.from_numpy(index)
    entropy = segment_entropy(log_probs, segment, n_decisions)[at]
    chosen_values = None if values is None else values[at]
    return Scored(log_probs[taken], chosen_values, entropy, policy.flops - before)


def rollout_kl(policy: ToolPointer, episodes: Sequence[Episode]) -> tuple[float, int]:
    """The k3 estimate of KL(rollout policy || policy) over every decision of ``episodes`` (mean of
    ``r - 1 - log r``, ``r`` the new over the rollout's probability of the action taken: unbiased,
    never negative), and the FLOPs of its forward without gradients. verl's ``actor/ppo_kl`` is the
    same quantity's k1 estimate, per minibatch."""
    picks = [(b, t) for b, e in enumerate(episodes) for t in range(len(e.actions))]
    with torch.no_grad():
        scored = rescore(policy, episodes, picks)
    if not picks:
        return 0.0, scored.flops
    old = torch.tensor([episodes[b].log_probs[t] for b, t in picks])
    log_ratio = scored.log_probs - old
    return float((torch.exp(log_ratio) - 1 - log_ratio).mean()), scored.flops


KlBound = Callable[[float, float, float], float]


def adaptive_lr(scale: float, kl: float, target: float) -> float:
    """The KL-adaptive learning rate of PPO implementations for robotics (rsl_rl's ``schedule:
    adaptive``, on an approximate KL): above twice the target the rate is divided by 1.5, below half
    of it multiplied by 1.5, within a factor of 100 below and 10 above the configured rate."""
    if kl > 2 * target:
        scale /= 1.5
    elif kl < target / 2:
        scale *= 1.5
    return min(max(scale, 0.01), 10.0)


KL_BOUNDS["adaptive_lr"] = adaptive_lr


def _backward(loss: torch.Tensor) -> None:
    """Back-propagate ``loss`` into the policy's gradients, once it is known to be finite."""
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
    """GRPO: advantages over each whole group, then ``grpo_minibatches`` optimiser steps, each on a
    disjoint share of the update's groups (shuffled with the rule's generator when more than one),
    as verl's ``ppo_mini_batch_size`` cuts a batch: the rollouts are paid once and the policy
    takes several steps on them, the later ones off-policy and held by the clip. Every aggregation
    is a sum over episodes with minibatch-wide normalisers, so a minibatch's loss is computed chunk
    by chunk, each weighted by its share of the normaliser (``chunk_share``). Without a KL term an
    episode whose advantage is zero contributes nothing and is not recomputed at all; the
    normalisers still count its steps. ``loss`` and ``kl`` are summed over a step's chunks and
    averaged over the steps; ``grad_norm`` is the steps' mean."""
    s, episodes = u.settings, u.episodes
    mask, old, _ = _padded(episodes, u.horizon)
    advantages = compute_grpo_outcome_advantage(
        trained_scores(episodes, s.reward_density), u.groups, mask, s.norm_adv_by_std_in_grpo
    )
    groups = u.groups.unique().numpy()
    if s.grpo_minibatches > 1:
        groups = u.rng.permutation(groups)
    steps = []
    for share in np.array_split(groups, min(s.grpo_minibatches, len(groups))):
        members = np.flatnonzero(np.isin(u.groups.numpy(), share))
        steps.append(_grpo_step(u, members, mask, old, advantages))
    taken = [step for step in steps if step.gradient_steps]
    if not taken:
        return UpdateStats()
    return UpdateStats(
        sum(step.loss for step in taken) / len(taken),
        sum(step.grad_norm for step in taken) / len(taken),
        sum(step.kl for step in taken) / len(taken),
        sum(step.train_flops for step in taken),
        sum(step.gradient_steps for step in taken),
    )


def _grpo_step(
    u: UpdateContext, members: np.ndarray, mask: torch.Tensor, old: torch.Tensor, advantages: torch.Tensor
) -> UpdateStats:
    """One optimiser step on the episodes ``members`` (whole groups) of the update; no step when
    none of them has a learning signal."""
    s, policy, episodes, horizon = u.settings, u.policy, u.episodes, u.horizon
    needed = [int(b) for b in members if s.kl_coef > 0 or bool(advantages[b].any())]
    if not needed:
        return UpdateStats()
    batch_mask = mask[torch.from_numpy(members)]
    loss_sum, kl_sum, train_flops = 0.0, 0.0, 0
    for chunk in _chunks(episodes, needed, GRPO_CHUNK_ACTIVATIONS // policy.width):
        rows = torch.tensor(chunk)
        share = chunk_share(s.loss_agg_mode, batch_mask, mask[rows])
        steps = [(b, t) for b in chunk for t in range(len(episodes[b].actions))]
        at = torch.tensor([r * horizon + t for r, b in enumerate(chunk) for t in range(len(episodes[b].actions))])
        scored = rescore(policy, episodes, steps)
        chosen = scored.log_probs
        train_flops += 3 * scored.flops
        log_prob = old[rows].flatten().index_put((at,), chosen).view(len(chunk), horizon)
        loss, _ = compute_policy_loss(
            old[rows], log_prob, advantages[rows], mask[rows], s.clip_ratio_low, s.clip_high, s.loss_agg_mode
        )
        loss = share * loss
        if u.reference is not None:
            with torch.no_grad():
                ref_scored = rescore(u.reference, episodes, steps)
            train_flops += ref_scored.flops
            ref_chosen = ref_scored.log_probs
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
    for b, (e, score) in enumerate(zip(episodes, trained_scores(episodes, s.reward_density), strict=True)):
        if e.actions:  # an episode cut by the step cap before its first step has nothing to learn from
            values[b, : len(e.values)] = torch.tensor(e.values)
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
            log_prob, value, entropy, flops = rescore(policy, episodes, [steps[k] for k in chunk])
            train_flops += 3 * flops
            idx = torch.from_numpy(chunk)
            adv = flat_adv[idx]
            if len(chunk) > 1:
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
            ones = torch.ones(1, len(chunk))
            pg_loss, _ = compute_policy_loss(
                flat_old[idx][None], log_prob[None], adv[None], ones, s.clip_ratio_low, s.clip_high, "token-mean"
            )
            v_loss = 0.5 * ((value - flat_ret[idx]) ** 2).mean()
            loss = pg_loss - s.ent_coef * entropy.mean() + s.vf_coef * v_loss
            kl = float((flat_old[idx] - log_prob.detach()).mean())
            last_loss = float(loss.detach())
            _backward(loss)
            grad_norm = _step(policy, u.optimizer, s.max_grad_norm)
    return UpdateStats(last_loss, grad_norm, kl, train_flops, len(steps))


@register_update("bc")
def bc_update(u: UpdateContext) -> UpdateStats:
    """Behaviour cloning (how the tiny study's base is pretrained): the cross-entropy of each
    teacher-forced reference call among its decision's candidates, a mean over every step of the
    update's episodes, then one optimiser step. The episodes are the tasks' references played
    through the real environment (``train`` teacher-forces them when ``algo`` is ``bc``)."""
    s, episodes = u.settings, u.episodes
    steps = [(b, t) for b, e in enumerate(episodes) for t in range(len(e.actions))]
    if not steps:
        return UpdateStats()
    scored = rescore(u.policy, episodes, steps)
    loss = -scored.log_probs.mean()
    _backward(loss)
    grad_norm = _step(u.policy, u.optimizer, s.max_grad_norm)
    return UpdateStats(float(loss.detach()), grad_norm, 0.0, 3 * scored.flops, len(steps))
