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
from collections.abc import Iterator
from typing import NamedTuple

import torch
from torch import nn
from torch.nn import functional as F

from axisrl.backends.tiny.features import Batch, EpisodeBatch
from axisrl.backends.tiny.vocab import (
    MAX_STEP_FEATURE,
    N_GOAL_ROLES,
    N_HISTORY_FEATURES,
    N_SLOTS,
    N_STRUCT,
    PRIMITIVES,
    SYMBOL_KINDS,
)
from axisrl.domains.compact import HISTORY_K

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

    def _symbols(self, kind: torch.Tensor, slot: torch.Tensor) -> torch.Tensor:
        return embed(self.sym_kind, kind) + embed(self.sym_slot, kind * N_SLOTS + slot)

    def encode_episodes(self, b: EpisodeBatch) -> EncodedEpisodes:
        """Everything fixed within an episode, computed once per episode: the goal-role sum of each
        symbol known at the start, the goal, the tools (plus a zero row for "no tool"), and the
        parameter and tool projections that candidates reuse."""
        d, struct = self.width, self.struct.weight
        roles = torch.zeros(len(b.sym_kind), d).index_add(
            0, b.goal_sym, embed(self.goal_role_of_symbol, b.goal_sym_role)
        )
        tokens = torch.cat([struct, self._symbols(b.sym_kind, b.sym_slot) + roles])

        clauses = torch.zeros(len(b.clause_episode), d).index_add(
            0, b.goal_clause, embed(self.goal_role_in_clause, b.goal_role) + rows(tokens, b.goal_tok)
        )
        clauses = torch.relu(self._linear(self.clause, clauses))
        goal_rows = torch.zeros(len(b.episodes), d).index_add(0, b.clause_episode, clauses)

        params = (
            rows(struct, b.param_kind)
            + rows(struct, b.param_req)
            + rows(tokens, b.param_slot)
            + embed(self.param_pos, b.param_pos.clamp(max=MAX_PARAMS - 1))
        )
        params = torch.relu(self._linear(self.param, params))
        tools = struct[b.tool_struct].sum(1) + rows(tokens, b.tool_table)
        tools = tools.index_add(0, b.param_tool, params)
        if self.prim is not None:
            tools = tools + embed(self.prim, b.tool_prim)
        tools = torch.relu(self._linear(self.tool, tools))
        return EncodedEpisodes(
            roles,
            goal_rows,
            torch.cat([tools, torch.zeros(1, d)]),
            self._linear(self.arg_param, params),
            self._linear(self.cand_tool, tools),
        )

    def forward(self, b: Batch, episodes: EncodedEpisodes | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(logit per candidate row, value per decision or None); ``episodes`` may be passed in
        from an earlier ``encode_episodes`` of ``b.episodes``."""
        d, struct = self.width, self.struct.weight
        roles, goal, tools, param_args, tool_cands = self.encode_episodes(b.episodes) if episodes is None else episodes

        # symbols: kind + slot + goal roles (a zero row for symbols first seen after the start),
        # then every history occurrence (with its partner token) added to its symbol
        roles = torch.cat([roles, torch.zeros(1, d)])
        symbols = self._symbols(b.sym_kind, b.sym_slot) + rows(roles, b.sym_static)
        base = torch.cat([struct, symbols])
        occ = (
            embed(self.history_feature, b.occ_feature)
            + rows(base, b.occ_tok)
            + self._linear(self.partner, rows(base, b.occ_partner))
        )
        is_symbol = b.occ_tok >= N_STRUCT
        symbols = symbols.index_add(0, b.occ_tok[is_symbol] - N_STRUCT, occ[is_symbol])
        tokens = torch.cat([struct, symbols])

        # context: goal, recent steps (called tool + occurrences + age), step count
        steps = (
            torch.zeros(len(b.step_tool), d).index_add(0, b.occ_step, occ)
            + rows(tools, b.step_tool)
            + embed(self.step_age, b.step_age)
        )
        steps = torch.relu(self._linear(self.step, steps))
        history = torch.zeros(len(b.dec_episode), d).index_add(0, b.step_decision, steps)
        context = torch.cat([rows(goal, b.dec_episode), history, embed(self.step_count, b.dec_step)], -1)
        context = torch.relu(self._linear(self.context, context))

        # candidates: tool + its arguments (parameter, pointed value) + the recent calls of its tool
        values = rows(tokens, b.val_tok) + rows(struct, b.val_type) + rows(base, b.val_type_tok)
        values = torch.relu(self._linear(self.value, values))
        args = torch.relu(rows(param_args, b.arg_param) + rows(self._linear(self.arg_value, values), b.arg_val))
        recalls = rows(self._linear(self.recall, steps), b.recall_step)
        cands = rows(tool_cands, b.cand_tool).index_add(0, b.arg_cand, args).index_add(0, b.recall_cand, recalls)

        # logit = MLP([cand; ctx; cand * ctx]), its first layer split by input block
        ctx = rows(context, b.cand_decision)
        hidden = (
            self._linear(self.score_cand, cands)
            + rows(self._linear(self.score_ctx, context), b.cand_decision)
            + self._linear(self.score_prod, cands * ctx)
        )
        logits = self._linear(self.logit, torch.relu(hidden)).squeeze(-1)
        if self.critic is None:
            return logits, None
        self.flops += _count(len(context), d, d) + _count(len(context), d, 1)
        return logits, self.critic(context).squeeze(-1)


def rows(table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    return table.index_select(0, index)


def embed(layer: nn.Embedding, index: torch.Tensor) -> torch.Tensor:
    """``layer(index)`` without ``Module.__call__``'s dispatch (the same op: no padding index,
    norm or hooks are used on these layers)."""
    return F.embedding(index, layer.weight)


def segment_log_softmax(logits: torch.Tensor, segment: torch.Tensor, n_segments: int) -> torch.Tensor:
    """Log-softmax over each decision's candidates (``segment``: the decision of each row)."""
    top = torch.full((n_segments,), -torch.inf).scatter_reduce(0, segment, logits.detach(), "amax")
    total = torch.zeros(n_segments).index_add(0, segment, torch.exp(logits - top[segment]))
    return logits - (top + torch.log(total))[segment]


def segment_entropy(log_probs: torch.Tensor, segment: torch.Tensor, n_segments: int) -> torch.Tensor:
    return -torch.zeros(n_segments).index_add(0, segment, torch.exp(log_probs) * log_probs)
