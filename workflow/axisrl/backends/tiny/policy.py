"""ToolPointer: a permutation-equivariant pointer policy over toolworld's candidate actions.

No tool ids and no tool positions: a tool is its descriptor (table slot, access, return kind,
declared semantics, typed parameters), a candidate is its tool plus the values its arguments
point at, and a symbol is its kind, its per-episode slot and the roles it plays in the goal and
the recent history. So the same weights score the tools of a world never seen in training.

    symbols     kind + slot + sum of goal roles                  (per episode)
    goal        sum over clauses of MLP(sum of role + token)     (per episode)
    tools       MLP(access, return, semantics, table, sum of MLP(parameter kind, slot, req))
    history     last steps: MLP(called tool + its argument, observation key and value tokens);
                each symbol also absorbs its history occurrences (and their partners)
    context     MLP([goal; history; step count])
    values      MLP(token + type)
    candidate   tool + sum of MLP(parameter, pointed value) + the recent steps that called its tool
    logit       MLP([candidate; context; candidate * context]); softmax over the decision's candidates

Every matrix product is counted as it runs (``2 * rows * fan_in * fan_out``), so a run's FLOPs
come from the rows it actually processed.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from axisrl.backends.tiny.features import Batch, EpisodeBatch, SeedRows
from axisrl.backends.tiny.vocab import (
    MAX_STEP_FEATURE,
    N_GOAL_ROLES,
    N_HISTORY_FEATURES,
    N_SLOTS,
    N_STRUCT,
    PRIMITIVES,
    SYMBOL_KINDS,
)
from axisrl.domains.toolworld.compact import HISTORY_K

MAX_PARAMS = 8
"""Parameter positions with their own embedding; later ones share the last."""


_MATMULS: Counter[Matmul] | None = None
"""Where ``record_matmuls`` collects the counted products, while it runs."""


class Matmul(NamedTuple):
    """One counted matrix product's shape: ``rows x fan_in`` times ``fan_in x fan_out``, and how
    many products it is counted as (1 scoring without gradients; 3 with them: the forward and the
    two products of its backward, as ``train_flops`` counts a training forward)."""

    rows: int
    fan_in: int
    fan_out: int
    times: int


@contextlib.contextmanager
def record_matmuls() -> Iterator[Counter[Matmul]]:
    """Collect the shape of every matrix product the policies count while this runs (for
    ``bench/bench_train.py``'s floor: the counted FLOPs as plain products of the run's own shapes)."""
    global _MATMULS
    _MATMULS = Counter()
    try:
        yield _MATMULS
    finally:
        _MATMULS = None


def _count(rows: int, fan_in: int, fan_out: int) -> int:
    """The FLOPs of one product (``2 * rows * fan_in * fan_out``), recorded if ``record_matmuls`` runs."""
    if _MATMULS is not None:
        _MATMULS[Matmul(rows, fan_in, fan_out, 3 if torch.is_grad_enabled() else 1)] += 1
    return 2 * rows * fan_in * fan_out


class EncodedEpisodes(NamedTuple):
    """``ToolPointer.encode_episodes``: what stays fixed within each episode of an ``EpisodeBatch``."""

    roles: torch.Tensor
    """Goal-role sum of each symbol known at the start."""
    goal: torch.Tensor
    tools: torch.Tensor
    """One row per tool, plus a zero row for "no tool"."""
    param_args: torch.Tensor
    """Parameter projections that candidate arguments reuse."""
    tool_cands: torch.Tensor
    """Tool projections that candidates reuse."""


class ToolPointer(nn.Module):
    def __init__(self, width: int, leak_primitive_role: bool = False, value_head: bool = False) -> None:
        super().__init__()
        d = self.width = width
        self.leak_primitive_role, self.value_head = leak_primitive_role, value_head
        self.struct = nn.Embedding(N_STRUCT, d, padding_idx=0)
        self.sym_kind = nn.Embedding(len(SYMBOL_KINDS), d)
        self.sym_slot = nn.Embedding(len(SYMBOL_KINDS) * N_SLOTS, d)
        self.goal_role_of_symbol = nn.Embedding(N_GOAL_ROLES, d)
        self.goal_role_in_clause = nn.Embedding(N_GOAL_ROLES, d)
        self.clause = nn.Linear(d, d)
        self.param_pos = nn.Embedding(MAX_PARAMS, d)
        self.param = nn.Linear(d, d)
        self.prim = nn.Embedding(len(PRIMITIVES), d) if leak_primitive_role else None
        self.tool = nn.Linear(d, d)
        self.history_feature = nn.Embedding(N_HISTORY_FEATURES, d)
        self.partner = nn.Linear(d, d, bias=False)
        self.step_age = nn.Embedding(HISTORY_K, d)
        self.step = nn.Linear(d, d)
        self.step_count = nn.Embedding(MAX_STEP_FEATURE, d)
        self.context = nn.Linear(3 * d, d)
        self.value = nn.Linear(d, d)
        self.arg_param = nn.Linear(d, d)
        self.arg_value = nn.Linear(d, d, bias=False)
        self.cand_tool = nn.Linear(d, d)
        self.recall = nn.Linear(d, d)
        self.score_cand = nn.Linear(d, d)
        self.score_ctx = nn.Linear(d, d, bias=False)
        self.score_prod = nn.Linear(d, d, bias=False)
        self.logit = nn.Linear(d, 1)
        self.critic = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, 1)) if value_head else None
        self.flops = 0
        """Multiply-add FLOPs of every matrix product since the counter was last reset."""

    def config(self) -> dict:
        return {"width": self.width, "leak_primitive_role": self.leak_primitive_role, "value_head": self.value_head}

    def _linear(self, layer: nn.Linear, x: torch.Tensor) -> torch.Tensor:
        """``layer(x)`` without ``Module.__call__``'s dispatch (the same op: no hooks are used)."""
        self.flops += _count(x.shape[0], layer.in_features, layer.out_features)
        return F.linear(x, layer.weight, layer.bias)

    def encode_episodes(self, b: EpisodeBatch) -> EncodedEpisodes:
        """Everything fixed within an episode, computed once per episode: the goal-role sum of each
        symbol known at the start, the goal, the tools (plus a zero row for "no tool"), and the
        parameter and tool projections that candidates reuse."""
        return encode_episodes(_One(self), b)

    def forward(self, b: Batch, episodes: EncodedEpisodes | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(logit per candidate row, value per decision or None); ``episodes`` may be passed in
        from an earlier ``encode_episodes`` of ``b.episodes``."""
        return score(_One(self), b, episodes)


class _One:
    """One policy's weights as ``encode_episodes`` and ``score`` read them: plain tables and linears."""

    def __init__(self, policy: ToolPointer) -> None:
        self.policy, self.width, self.struct = policy, policy.width, policy.struct.weight
        self.has_prim, self.has_critic = policy.prim is not None, policy.critic is not None

    def linear(self, name: str, x: torch.Tensor, seeds: SeedRows | None) -> torch.Tensor:
        return self.policy._linear(getattr(self.policy, name), x)

    def embed(self, name: str, index: torch.Tensor, seeds: SeedRows | None) -> torch.Tensor:
        return F.embedding(index, getattr(self.policy, name).weight)

    def tokens(self, index: torch.Tensor, seeds: SeedRows | None) -> torch.Tensor:
        """A token code (structural id or ``N_STRUCT +`` symbol row) as a row of ``cat([struct, symbols])``."""
        return index

    def structural(self, index: torch.Tensor, seeds: SeedRows | None) -> torch.Tensor:
        """A structural id as a row of ``struct``."""
        return index

    def critic(self, context: torch.Tensor, seeds: SeedRows | None) -> torch.Tensor:
        self.policy.flops += _count(len(context), self.width, self.width) + _count(len(context), self.width, 1)
        return self.policy.critic(context).squeeze(-1)


EMBEDDINGS = (
    "sym_kind",
    "sym_slot",
    "goal_role_of_symbol",
    "goal_role_in_clause",
    "param_pos",
    "prim",
    "history_feature",
    "step_age",
    "step_count",
)
"""The embedding tables that ``PolicyStack`` stacks (``struct`` is stacked apart: tokens index it)."""


class PolicyStack:
    """The policies of a job's seeds scored together, in lockstep: one forward scores every row of
    every seed, each row with its own seed's weights. Embedding tables are stacked along the seed
    (a row's index shifted by its seed), a linear layer runs once per seed on that seed's slice of
    rows (rows are seed-contiguous), so every row is computed exactly as its seed's policy alone
    computes it, with the same matrix shapes: a seed's results are bit-identical to playing it
    alone, while the per-op cost of the forward is paid once for all seeds.

    Stacks the policies' current weights: ``refresh()`` after they change. A ``trainable`` stack
    stacks them in the autograd graph, so that its outputs' gradients reach every policy (for one
    forward and one backward: build a new one for the next). ``flops``: FLOPs per seed so far."""

    def __init__(self, policies: Sequence[ToolPointer], trainable: bool = False) -> None:
        first = policies[0]
        if any(policy.config() != first.config() for policy in policies):
            raise ValueError(f"a policy stack needs one architecture, got {[policy.config() for policy in policies]}")
        self.policies = list(policies)
        self.n_seeds = len(policies)
        self.width = first.width
        self.has_prim, self.has_critic = first.prim is not None, first.critic is not None
        self.flops = [0] * self.n_seeds
        self.trainable = trainable
        self.refresh()

    def refresh(self) -> None:
        """Stack the policies' current weights."""
        with torch.set_grad_enabled(self.trainable):
            self.struct = torch.cat([policy.struct.weight for policy in self.policies])
            self.tables = {
                name: (torch.cat([getattr(policy, name).weight for policy in self.policies]), layer.num_embeddings)
                for name in EMBEDDINGS
                if (layer := getattr(self.policies[0], name)) is not None
            }

    def linear(self, name: str, x: torch.Tensor, seeds: SeedRows) -> torch.Tensor:
        """Each seed's layer on its rows: the product ``F.linear`` computes, written in place into
        one output without gradients (a concatenation would copy every output once more), or
        concatenated with them."""
        layers = [getattr(policy, name) for policy in self.policies]
        grad = torch.is_grad_enabled()
        out = None if grad else x.new_empty(len(x), layers[0].out_features)
        parts, first = [], 0
        for s, (layer, part) in enumerate(zip(layers, x.split(seeds.counts))):
            rows = len(part)
            if rows:
                self.flops[s] += _count(rows, layer.in_features, layer.out_features)
            if grad:
                parts.append(F.linear(part, layer.weight, layer.bias))
            elif rows and layer.bias is None:
                torch.mm(part, layer.weight.t(), out=out[first : first + rows])
            elif rows:
                torch.addmm(layer.bias, part, layer.weight.t(), out=out[first : first + rows])
            first += rows
        return torch.cat(parts) if grad else out

    def embed(self, name: str, index: torch.Tensor, seeds: SeedRows) -> torch.Tensor:
        table, size = self.tables[name]
        return F.embedding(torch.add(index, seeds.seed, alpha=size), table)

    def tokens(self, index: torch.Tensor, seeds: SeedRows) -> torch.Tensor:
        """Structural ids move to their seed's block of the stacked ``struct``, symbols past all blocks."""
        return torch.where(
            index < N_STRUCT, torch.add(index, seeds.seed, alpha=N_STRUCT), index + (self.n_seeds - 1) * N_STRUCT
        )

    def structural(self, index: torch.Tensor, seeds: SeedRows) -> torch.Tensor:
        seed = seeds.seed if index.dim() == 1 else seeds.seed[:, None]
        return torch.add(index, seed, alpha=N_STRUCT)

    def critic(self, context: torch.Tensor, seeds: SeedRows) -> torch.Tensor:
        d, parts = self.width, []
        for s, (policy, part) in enumerate(zip(self.policies, context.split(seeds.counts))):
            self.flops[s] += _count(len(part), d, d) + _count(len(part), d, 1)
            parts.append(policy.critic(part).squeeze(-1))
        return torch.cat(parts)

    def encode_episodes(self, b: EpisodeBatch) -> EncodedEpisodes:
        return encode_episodes(self, b)

    def __call__(self, b: Batch, episodes: EncodedEpisodes | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        return score(self, b, episodes)


Weights = _One | PolicyStack
"""What ``encode_episodes`` and ``score`` read weights from: one policy's, or a stack's."""


def encode_episodes(w: Weights, b: EpisodeBatch) -> EncodedEpisodes:
    """``ToolPointer.encode_episodes`` for one policy's weights or a ``PolicyStack``'s (``w``)."""
    d, struct, seeds = w.width, w.struct, b.seeds
    sym, goal, clause, tool, param, goal_sym = (None,) * 6 if seeds is None else seeds
    roles = torch.zeros(len(b.sym_kind), d).index_add(
        0, b.goal_sym, w.embed("goal_role_of_symbol", b.goal_sym_role, goal_sym)
    )
    tokens = torch.cat([struct, _symbols(w, b.sym_kind, b.sym_slot, sym) + roles])

    clauses = torch.zeros(len(b.clause_episode), d).index_add(
        0,
        b.goal_clause,
        w.embed("goal_role_in_clause", b.goal_role, goal) + rows(tokens, w.tokens(b.goal_tok, goal)),
    )
    clauses = torch.relu(w.linear("clause", clauses, clause))
    goal_rows = torch.zeros(len(b.episodes), d).index_add(0, b.clause_episode, clauses)

    params = (
        rows(struct, w.structural(b.param_kind, param))
        + rows(struct, w.structural(b.param_req, param))
        + rows(tokens, w.tokens(b.param_slot, param))
        + w.embed("param_pos", b.param_pos.clamp(max=MAX_PARAMS - 1), param)
    )
    params = torch.relu(w.linear("param", params, param))
    tools = struct[w.structural(b.tool_struct, tool)].sum(1) + rows(tokens, w.tokens(b.tool_table, tool))
    tools = tools.index_add(0, b.param_tool, params)
    if w.has_prim:
        tools = tools + w.embed("prim", b.tool_prim, tool)
    tools = torch.relu(w.linear("tool", tools, tool))
    return EncodedEpisodes(
        roles,
        goal_rows,
        torch.cat([tools, torch.zeros(1, d)]),
        w.linear("arg_param", params, param),
        w.linear("cand_tool", tools, tool),
    )


def _symbols(w: Weights, kind: torch.Tensor, slot: torch.Tensor, seeds: SeedRows | None) -> torch.Tensor:
    return w.embed("sym_kind", kind, seeds) + w.embed("sym_slot", kind * N_SLOTS + slot, seeds)


def score(w: Weights, b: Batch, episodes: EncodedEpisodes | None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``ToolPointer.forward`` for one policy's weights or a ``PolicyStack``'s (``w``): the same
    operations, a stack's rows carrying their seed (``Batch.seeds``)."""
    d, struct, seeds = w.width, w.struct, b.seeds
    roles, goal, tools, param_args, tool_cands = encode_episodes(w, b.episodes) if episodes is None else episodes
    sym, occ_s, step_s, dec, val, cand = (None,) * 6 if seeds is None else seeds

    # symbols: kind + slot + goal roles (a zero row for symbols first seen after the start),
    # then every history occurrence (with its partner token) added to its symbol
    roles = torch.cat([roles, torch.zeros(1, d)])
    symbols = _symbols(w, b.sym_kind, b.sym_slot, sym) + rows(roles, b.sym_static)
    base = torch.cat([struct, symbols])
    occ = (
        w.embed("history_feature", b.occ_feature, occ_s)
        + rows(base, w.tokens(b.occ_tok, occ_s))
        + w.linear("partner", rows(base, w.tokens(b.occ_partner, occ_s)), occ_s)
    )
    is_symbol = b.occ_tok >= N_STRUCT
    symbols = symbols.index_add(0, b.occ_tok[is_symbol] - N_STRUCT, occ[is_symbol])
    tokens = torch.cat([struct, symbols])

    # context: goal, recent steps (called tool + occurrences + age), step count
    steps = (
        torch.zeros(len(b.step_tool), d).index_add(0, b.occ_step, occ)
        + rows(tools, b.step_tool)
        + w.embed("step_age", b.step_age, step_s)
    )
    steps = torch.relu(w.linear("step", steps, step_s))
    history = torch.zeros(len(b.dec_episode), d).index_add(0, b.step_decision, steps)
    context = torch.cat([rows(goal, b.dec_episode), history, w.embed("step_count", b.dec_step, dec)], -1)
    context = torch.relu(w.linear("context", context, dec))

    # candidates: tool + its arguments (parameter, pointed value) + the recent calls of its tool
    values = (
        rows(tokens, w.tokens(b.val_tok, val))
        + rows(struct, w.structural(b.val_type, val))
        + rows(base, w.tokens(b.val_type_tok, val))
    )
    values = torch.relu(w.linear("value", values, val))
    args = torch.relu(rows(param_args, b.arg_param) + rows(w.linear("arg_value", values, val), b.arg_val))
    recalls = rows(w.linear("recall", steps, step_s), b.recall_step)
    cands = rows(tool_cands, b.cand_tool).index_add(0, b.arg_cand, args).index_add(0, b.recall_cand, recalls)

    # logit = MLP([cand; ctx; cand * ctx]), its first layer split by input block
    ctx = rows(context, b.cand_decision)
    hidden = (
        w.linear("score_cand", cands, cand)
        + rows(w.linear("score_ctx", context, dec), b.cand_decision)
        + w.linear("score_prod", cands * ctx, cand)
    )
    logits = w.linear("logit", torch.relu(hidden), cand).squeeze(-1)
    return logits, w.critic(context, dec) if w.has_critic else None


def rows(table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    return table.index_select(0, index)


def embed(layer: nn.Embedding, index: torch.Tensor) -> torch.Tensor:
    """``layer(index)`` without ``Module.__call__``'s dispatch (the same op: no padding index,
    norm or hooks are used on these layers)."""
    return F.embedding(index, layer.weight)


class SeedScores(NamedTuple):
    """One seed's decisions of a lockstep batch, re-indexed as the seed's own batch would hold them."""

    logits: torch.Tensor
    """The seed's candidate rows' scores (a slice of the batch's)."""
    segment: torch.Tensor
    """The seed's decision of each of its candidate rows."""
    starts: np.ndarray
    """The first of each decision's candidate rows among the seed's."""
    counts: np.ndarray


def seed_scores(logits: torch.Tensor, b: Batch, first: int, n_decisions: int) -> SeedScores:
    """The scores of decisions ``first .. first + n_decisions`` of ``b`` (one seed's, which are
    contiguous), so that what is computed from them per seed is computed on that seed's rows alone."""
    starts, counts = b.cand_start[first : first + n_decisions], b.cand_count[first : first + n_decisions]
    first_cand = int(starts[0])
    seed_logits = logits[first_cand : first_cand + int(counts.sum())]
    segment = b.cand_decision[first_cand : first_cand + len(seed_logits)]
    if first:
        starts, segment = starts - first_cand, segment - first
    return SeedScores(seed_logits, segment, starts, counts)


def segment_log_softmax(logits: torch.Tensor, segment: torch.Tensor, n_segments: int) -> torch.Tensor:
    """Log-softmax over each decision's candidates (``segment``: the decision of each row)."""
    top = torch.full((n_segments,), -torch.inf).scatter_reduce(0, segment, logits.detach(), "amax")
    total = torch.zeros(n_segments).index_add(0, segment, torch.exp(logits - top[segment]))
    return logits - (top + torch.log(total))[segment]


def segment_entropy(log_probs: torch.Tensor, segment: torch.Tensor, n_segments: int) -> torch.Tensor:
    return -torch.zeros(n_segments).index_add(0, segment, torch.exp(log_probs) * log_probs)
