"""tiny backend losses and estimators against values worked out by hand."""

from __future__ import annotations

import math

import pytest
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


def close(actual: torch.Tensor, expected) -> None:
    torch.testing.assert_close(actual, torch.as_tensor(expected, dtype=actual.dtype), rtol=1e-5, atol=1e-6)


def test_grpo_advantage_subtracts_the_group_mean_and_optionally_divides_by_its_std():
    scores = torch.tensor([1.0, 0.0, 1.0, 1.0])
    group = torch.tensor([0, 0, 1, 1])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    close(
        compute_grpo_outcome_advantage(scores, group, mask, norm_adv_by_std_in_grpo=False),
        [[0.5, 0.5, 0.0], [-0.5, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]],
    )
    # group 0: unbiased std of (1, 0) is sqrt(0.5); group 1 has std 0, so its advantages stay 0
    a = 0.5 / (math.sqrt(0.5) + 1e-6)
    close(
        compute_grpo_outcome_advantage(scores, group, mask, norm_adv_by_std_in_grpo=True),
        [[a, a, 0.0], [-a, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]],
    )


def test_a_singleton_group_has_mean_zero_and_std_one():
    scores = torch.tensor([2.0, 0.25, 0.75])
    group = torch.tensor([7, 3, 3])
    mask = torch.ones(3, 2)
    close(
        compute_grpo_outcome_advantage(scores, group, mask, norm_adv_by_std_in_grpo=False),
        [[2.0, 2.0], [-0.25, -0.25], [0.25, 0.25]],
    )
    std = math.sqrt(2 * 0.25**2)
    close(
        compute_grpo_outcome_advantage(scores, group, mask, norm_adv_by_std_in_grpo=True),
        [[2.0 / (1 + 1e-6)] * 2, [-0.25 / (std + 1e-6)] * 2, [0.25 / (std + 1e-6)] * 2],
    )


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("token-mean", (1 + 2 + 4) / 3),  # every valid step of the batch weighs the same
        ("seq-mean-token-sum", ((1 + 2) + 4) / 2),  # per-episode sums, averaged
        ("seq-mean-token-mean", (1.5 + 4) / 2),  # per-episode means, averaged
        ("seq-mean-token-sum-norm", (1 + 2 + 4) / 4),  # the batch sum over the padded horizon (4)
    ],
)
def test_each_loss_aggregation(mode, expected):
    loss = torch.tensor([[1.0, 2.0, 3.0, 9.0], [4.0, 5.0, 6.0, 9.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    close(agg_loss(loss, mask, mode), expected)


def test_unknown_aggregation_is_rejected():
    with pytest.raises(ValueError, match="loss_agg_mode"):
        agg_loss(torch.ones(1, 1), torch.ones(1, 1), "sum")


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_chunk_shares_of_the_normaliser_sum_chunk_losses_to_the_batch_loss(mode):
    """Any partition of a batch's episodes into chunks: each chunk's loss, weighted by its share of
    the batch normaliser, adds up to the loss of the whole batch."""
    loss = torch.tensor([[1.0, 2.0, 3.0, 9.0], [4.0, 5.0, 6.0, 9.0], [7.0, 8.0, 9.0, 9.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0]])
    for chunks in ([[0, 1, 2]], [[0], [1, 2]], [[0, 2], [1]], [[0], [1], [2]]):
        total = sum(
            chunk_share(mode, mask, mask[torch.tensor(rows)]) * agg_loss(loss[rows], mask[rows], mode)
            for rows in chunks
        )
        close(total, agg_loss(loss, mask, mode))
    with pytest.raises(ValueError, match="loss_agg_mode"):
        chunk_share("sum", mask, mask[:1])


def test_clipped_surrogate_uses_the_asymmetric_range():
    # ratios 1.5, 0.5, 0.5, 1.5 against advantages +1, -1, +1, -1; range [0.8, 1.28]
    old = torch.zeros(1, 4)
    new = torch.log(torch.tensor([[1.5, 0.5, 0.5, 1.5]]))
    adv = torch.tensor([[1.0, -1.0, 1.0, -1.0]])
    loss, clip_fraction = compute_policy_loss(old, new, adv, torch.ones(1, 4), 0.2, 0.28, "token-mean")
    # per step max(-A r, -A clip(r)): -1.28 (clipped), 0.8 (clipped), -0.5, 1.5
    close(loss, (-1.28 + 0.8 - 0.5 + 1.5) / 4)
    close(clip_fraction, 0.5)


def test_surrogate_gradient_is_zero_where_the_clip_is_active():
    new = torch.log(torch.tensor([[1.5, 1.1]])).requires_grad_()
    loss, _ = compute_policy_loss(torch.zeros(1, 2), new, torch.ones(1, 2), torch.ones(1, 2), 0.2, 0.28, "token-mean")
    loss.backward()
    close(new.grad, [[0.0, -1.1 / 2]])  # d(-r)/dlogp = -r, halved by the mean


def test_gae_with_gamma_one_and_padding():
    rewards = torch.tensor([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    values = torch.tensor([[0.5, 0.6, 0.7], [0.2, 0.4, 9.9]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    advantages, returns = compute_gae_advantage_return(rewards, values, mask, gamma=1.0, lam=0.95)
    # row 0: deltas 0.1, 0.1, 0.3 -> A2 = 0.3, A1 = 0.1 + 0.95 * 0.3, A0 = 0.1 + 0.95 * A1
    a1 = 0.1 + 0.95 * 0.3
    # row 1: the padded value 9.9 is ignored; deltas 0.2, 0.6
    close(advantages, [[0.1 + 0.95 * a1, a1, 0.3], [0.2 + 0.95 * 0.6, 0.6, 0.0]])
    close(returns, [[0.6 + 0.95 * a1, 0.6 + a1, 1.0], [0.4 + 0.95 * 0.6, 1.0, 0.0]])


def test_gae_discounts_with_gamma():
    advantages, _ = compute_gae_advantage_return(
        torch.tensor([[0.0, 1.0]]), torch.zeros(1, 2), torch.ones(1, 2), gamma=0.5, lam=1.0
    )
    close(advantages, [[0.5, 1.0]])


def test_k3_kl_estimator():
    log_prob, ref = torch.log(torch.tensor([0.5, 0.3])), torch.log(torch.tensor([0.25, 0.3]))
    close(kl_penalty_k3(log_prob, ref), [0.5 - math.log(0.5) - 1, 0.0])
