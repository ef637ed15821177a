"""Advantage estimators and losses as small pure functions, named and selected the way verl's
``core_algos.py`` names them so that CPU runs and verl runs stay comparable.

Everything works on padded ``[episodes, steps]`` tensors with a ``mask`` of the valid steps
(decisions taken before the episode ended); a "token" here is one decision step.
"""

from __future__ import annotations

import torch

LOSS_AGG_MODES = ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm")


def compute_grpo_outcome_advantage(
    scores: torch.Tensor, index: torch.Tensor, mask: torch.Tensor, norm_adv_by_std_in_grpo: bool, epsilon: float = 1e-6
) -> torch.Tensor:
    """GRPO: each episode's outcome score minus its group mean (Dr. GRPO), divided by the group's
    unbiased std + ``epsilon`` if ``norm_adv_by_std_in_grpo`` (original GRPO), broadcast to every
    valid step. ``scores``: [B]; ``index``: [B] group id. A singleton group has mean 0 and std 1,
    as in verl."""
    groups, inverse, counts = torch.unique(index, return_inverse=True, return_counts=True)
    sums = torch.zeros(len(groups), dtype=scores.dtype).index_add_(0, inverse, scores)
    means = sums / counts
    squares = torch.zeros(len(groups), dtype=scores.dtype).index_add_(0, inverse, (scores - means[inverse]) ** 2)
    stds = torch.sqrt(squares / (counts - 1).clamp(min=1))
    single = counts == 1
    means = torch.where(single, torch.zeros_like(means), means)
    stds = torch.where(single, torch.ones_like(stds), stds)
    advantage = scores - means[inverse]
    if norm_adv_by_std_in_grpo:
        advantage = advantage / (stds[inverse] + epsilon)
    return advantage[:, None] * mask


def compute_gae_advantage_return(
    rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float, lam: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation over each episode's valid steps (the step after the last
    valid one is terminal, value 0). Returns (advantages, returns = advantages + values)."""
    values = values * mask
    advantages = torch.zeros_like(values)
    last = torch.zeros(values.shape[0], dtype=values.dtype)
    for t in reversed(range(values.shape[1])):
        next_values = values[:, t + 1] if t + 1 < values.shape[1] else torch.zeros_like(last)
        delta = rewards[:, t] + gamma * next_values - values[:, t]
        last = (delta + gamma * lam * last) * mask[:, t]
        advantages[:, t] = last
    return advantages, advantages + values


def agg_loss(loss_mat: torch.Tensor, mask: torch.Tensor, loss_agg_mode: str) -> torch.Tensor:
    """verl's aggregations: ``token-mean`` (DAPO: mean over every valid step of the batch),
    ``seq-mean-token-sum``, ``seq-mean-token-mean`` (original GRPO) and ``seq-mean-token-sum-norm``
    (Dr. GRPO: sum over the batch divided by the padded horizon ``mask.shape[-1]``, a constant)."""
    masked = loss_mat * mask
    if loss_agg_mode == "token-mean":
        return masked.sum() / mask.sum().clamp(min=1)
    if loss_agg_mode == "seq-mean-token-sum":
        return masked.sum(-1).mean()
    if loss_agg_mode == "seq-mean-token-mean":
        return (masked.sum(-1) / mask.sum(-1).clamp(min=1)).mean()
    if loss_agg_mode == "seq-mean-token-sum-norm":
        return masked.sum() / mask.shape[-1]
    raise ValueError(f"unknown loss_agg_mode {loss_agg_mode!r}; expected one of {LOSS_AGG_MODES}")


def chunk_share(loss_agg_mode: str, batch_mask: torch.Tensor, chunk_mask: torch.Tensor) -> float:
    """The weight of ``agg_loss`` over a chunk of a batch's episodes (valid-step masks [B, H] of the
    batch and of the chunk) such that the weighted chunk losses of a partition of the batch sum to
    the batch's loss: the chunk's share of the batch normaliser. ``token-mean``: its valid steps
    over the batch's; ``seq-mean-*``: its episodes over the batch's; ``seq-mean-token-sum-norm``: 1
    (the horizon, the same constant for every chunk)."""
    if loss_agg_mode == "token-mean":
        return float(chunk_mask.sum() / batch_mask.sum())
    if loss_agg_mode in ("seq-mean-token-sum", "seq-mean-token-mean"):
        return len(chunk_mask) / len(batch_mask)
    if loss_agg_mode == "seq-mean-token-sum-norm":
        return 1.0
    raise ValueError(f"unknown loss_agg_mode {loss_agg_mode!r}; expected one of {LOSS_AGG_MODES}")


def compute_policy_loss(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_ratio_low: float,
    clip_ratio_high: float,
    loss_agg_mode: str,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The clipped surrogate with an asymmetric range ``[1 - low, 1 + high]`` (DAPO clip-higher).
    Returns (aggregated loss, fraction of valid steps where the clip was active)."""
    ratio = torch.exp(torch.clamp(log_prob - old_log_prob, -20.0, 20.0))
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip_ratio_low, 1.0 + clip_ratio_high)
    loss = agg_loss(torch.maximum(unclipped, clipped), mask, loss_agg_mode)
    clip_fraction = ((clipped > unclipped).float() * mask).sum() / mask.sum().clamp(min=1)
    return loss, clip_fraction


def kl_penalty_k3(log_prob: torch.Tensor, ref_log_prob: torch.Tensor) -> torch.Tensor:
    """Schulman's k3 estimator of KL(pi || pi_ref): ``exp(ref - logp) - (ref - logp) - 1`` >= 0,
    clamped as in verl's ``low_var_kl``."""
    kl = torch.clamp(ref_log_prob - log_prob, -20.0, 20.0)
    return torch.clamp(torch.exp(kl) - kl - 1.0, -10.0, 10.0)
