"""Eager torch without its compiler stack: deterministic mode and Adam by routes that do not import it.

Every train job is a fresh process that compiles nothing, yet two public torch entry points import
``torch._inductor`` or ``torch._dynamo`` on first use: ``torch.use_deterministic_algorithms`` (to set a
compiler flag) and ``torch.optim.Optimizer``. Those imports are a fixed cost paid by every job for
nothing, so the trainer reaches the same eager code directly. What they cost as measured is in
``bench/README.md`` ("Tiny trainer: why the fast-torch helpers and the chunk size").
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch.optim.adam import adam


def deterministic_eager_ops() -> None:
    """``torch.use_deterministic_algorithms(True)`` for eager ops only, without the import of
    ``torch._inductor`` that the public setter makes to set the compiler's copy of the flag.

    Also switches off torch's NaN-filling of every new tensor in that mode: a debugging aid that
    catches reads of uninitialised memory, costing an extra memory pass per op output and
    changing no result. Falls back to the public setter where torch lacks the private one."""
    setter = getattr(torch._C, "_set_deterministic_algorithms", None)
    if setter is None:
        torch.use_deterministic_algorithms(True)
    else:
        setter(True)
    torch.utils.deterministic.fill_uninitialized_memory = False


class Adam:
    """``torch.optim.Adam(fused=True)``'s update through torch's functional ``adam``, bit-identical
    to it on CPU (a test checks), without the ``Optimizer`` base class, which imports
    ``torch._dynamo`` on first use. Fused: one kernel over all parameters instead of a loop over
    the policy's tensors. Defaults as torch's: betas (0.9, 0.999), eps 1e-8, no weight decay."""

    def __init__(self, params: Iterable[torch.nn.Parameter], lr: float) -> None:
        self.params = list(params)
        self.lr = lr
        self.exp_avgs = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in self.params]
        self.exp_avg_sqs = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in self.params]
        self.steps = [torch.tensor(0.0) for _ in self.params]

    @torch.no_grad()
    def step(self) -> None:
        """One Adam step on the parameters that have a gradient (as ``torch.optim.Adam`` skips the rest)."""
        live = [k for k, p in enumerate(self.params) if p.grad is not None]
        adam(
            [self.params[k] for k in live],
            [self.params[k].grad for k in live],
            [self.exp_avgs[k] for k in live],
            [self.exp_avg_sqs[k] for k in live],
            [],
            [self.steps[k] for k in live],
            fused=True,
            amsgrad=False,
            beta1=0.9,
            beta2=0.999,
            lr=self.lr,
            weight_decay=0.0,
            eps=1e-8,
            maximize=False,
        )

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None
