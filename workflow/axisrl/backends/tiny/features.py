"""From many decisions to one batch: the tiny policy's input tensors.

The policy reads only what ``render_compact`` shows: goal clauses, tool descriptors, the last
steps of the history, the visible values and the candidate actions, as one episode's integer
features (``encoding``) over the token vocabulary (``vocab``). ``collate_episodes`` stacks the
per-episode parts of many episodes into an ``EpisodeBatch`` and ``collate`` stacks their decisions
into a ``Batch`` with global row indices, so that one forward scores every candidate of every
decision.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from axisrl.backends.tiny.encoding import Decision, EpisodeFeatures
from axisrl.backends.tiny.vocab import MAX_STEP_FEATURE, N_STRUCT, SECTIONS


@dataclass
class EpisodeBatch:
    """Episode-level rows: symbols known at the start, goal occurrences, tools and parameters.
    Token indices ``< N_STRUCT`` are structural, the others point at this batch's symbol rows."""

    sym_kind: torch.Tensor
    sym_slot: torch.Tensor
    goal_sym: torch.Tensor
    goal_sym_role: torch.Tensor
    goal_clause: torch.Tensor
    goal_role: torch.Tensor
    goal_tok: torch.Tensor
    clause_episode: torch.Tensor
    tool_struct: torch.Tensor
    tool_table: torch.Tensor
    tool_prim: torch.Tensor
    param_tool: torch.Tensor
    param_pos: torch.Tensor
    param_kind: torch.Tensor
    param_req: torch.Tensor
    param_slot: torch.Tensor
    episodes: Sequence[EpisodeFeatures]
    n_static: np.ndarray
    sym_base: np.ndarray
    tool_base: np.ndarray
    param_base: np.ndarray


@dataclass
class Batch:
    """Decision-level rows (symbols, history occurrences and steps, values, candidates,
    arguments) over an ``EpisodeBatch``; token indices past ``N_STRUCT`` point at decision symbols."""

    episodes: EpisodeBatch
    dec_episode: torch.Tensor
    dec_step: torch.Tensor
    sym_kind: torch.Tensor
    sym_slot: torch.Tensor
    sym_static: torch.Tensor
    """The symbol's row in ``episodes`` if it was known at the start, else one past the last row."""
    occ_tok: torch.Tensor
    occ_partner: torch.Tensor
    occ_feature: torch.Tensor
    occ_step: torch.Tensor
    step_decision: torch.Tensor
    step_tool: torch.Tensor
    """The called tool's row in ``episodes``, or one past the last row for a call that did not parse."""
    step_age: torch.Tensor
    val_tok: torch.Tensor
    val_type: torch.Tensor
    val_type_tok: torch.Tensor
    cand_decision: torch.Tensor
    cand_tool: torch.Tensor
    arg_cand: torch.Tensor
    arg_param: torch.Tensor
    arg_val: torch.Tensor
    recall_cand: torch.Tensor
    recall_step: torch.Tensor
    """(candidate, history step) pairs where the step called the candidate's tool."""
    cand_start: np.ndarray
    """First candidate row of each decision (candidates of a decision are contiguous)."""
    cand_count: np.ndarray


def _flat(lists: Sequence[list[int]]) -> np.ndarray:
    return np.fromiter(itertools.chain.from_iterable(lists), dtype=np.int64)


def _lengths(lists: Sequence[Sequence]) -> np.ndarray:
    return np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))


def _offsets(lengths: np.ndarray) -> np.ndarray:
    return np.concatenate(([0], np.cumsum(lengths)))[: len(lengths)].astype(np.int64)


def _shift_tokens(tokens: np.ndarray, symbol_offsets: np.ndarray) -> np.ndarray:
    """Token codes -> batch rows: structural ids stay, symbols move to their batch row."""
    return np.where(tokens >= N_STRUCT, tokens + symbol_offsets, tokens)


def _tensor(array: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(array, dtype=np.int64))


def collate_episodes(episodes: Sequence[EpisodeFeatures]) -> EpisodeBatch:
    """One batch of the episode-level rows of ``episodes``."""
    n = len(episodes)
    n_static = np.fromiter((e.n_static for e in episodes), dtype=np.int64, count=n)
    sym_base = _offsets(n_static)
    goal_len = _lengths([e.goal_tok for e in episodes])
    goal_tok = _shift_tokens(_flat([e.goal_tok for e in episodes]), np.repeat(sym_base, goal_len))
    goal_role = _flat([e.goal_role for e in episodes])
    is_sym = goal_tok >= N_STRUCT
    n_clauses = np.fromiter((max(e.goal_clause, default=-1) + 1 for e in episodes), dtype=np.int64, count=n)
    n_tools = _lengths([e.tool_table for e in episodes])
    tool_base = _offsets(n_tools)
    n_params = _lengths([e.param_tool for e in episodes])
    return EpisodeBatch(
        sym_kind=_tensor(_flat([e.sym_kind[: e.n_static] for e in episodes])),
        sym_slot=_tensor(_flat([e.sym_slot[: e.n_static] for e in episodes])),
        goal_sym=_tensor(goal_tok[is_sym] - N_STRUCT),
        goal_sym_role=_tensor(goal_role[is_sym]),
        goal_clause=_tensor(_flat([e.goal_clause for e in episodes]) + np.repeat(_offsets(n_clauses), goal_len)),
        goal_role=_tensor(goal_role),
        goal_tok=_tensor(goal_tok),
        clause_episode=_tensor(np.repeat(np.arange(n), n_clauses)),
        tool_struct=_tensor(_flat([s for e in episodes for s in e.tool_struct]).reshape(-1, 3)),
        tool_table=_tensor(_shift_tokens(_flat([e.tool_table for e in episodes]), np.repeat(sym_base, n_tools))),
        tool_prim=_tensor(_flat([e.tool_prim for e in episodes])),
        param_tool=_tensor(_flat([e.param_tool for e in episodes]) + np.repeat(tool_base, n_params)),
        param_pos=_tensor(_flat([e.param_pos for e in episodes])),
        param_kind=_tensor(_flat([e.param_kind for e in episodes])),
        param_req=_tensor(_flat([e.param_req for e in episodes])),
        param_slot=_tensor(_shift_tokens(_flat([e.param_slot for e in episodes]), np.repeat(sym_base, n_params))),
        episodes=episodes,
        n_static=n_static,
        sym_base=sym_base,
        tool_base=tool_base,
        param_base=_offsets(n_params),
    )


def collate(episodes: EpisodeBatch, decisions: Sequence[Decision], rows: Sequence[int]) -> Batch:
    """One batch of ``decisions``; ``rows[i]``: the row in ``episodes`` of decision i's episode.
    Only values some candidate points at are kept (the others cannot change a logit)."""
    n = len(decisions)
    ep = np.asarray(rows, dtype=np.int64)
    n_sym = np.fromiter((d.n_symbols for d in decisions), dtype=np.int64, count=n)
    dsym_base = _offsets(n_sym)
    sym_kind = _flat([d.sym_kind[: d.n_symbols] for d in decisions])
    sym_slot = _flat([d.sym_slot[: d.n_symbols] for d in decisions])
    local = np.arange(len(sym_kind)) - np.repeat(dsym_base, n_sym)
    sym_static = np.where(
        local < np.repeat(episodes.n_static[ep], n_sym),  # or the row after the last
        local + np.repeat(episodes.sym_base[ep], n_sym),
        len(episodes.sym_kind),
    )

    # history: the recent steps of every decision, oldest first; a step's age counts back from the newest
    recent = [d.recent for d in decisions]
    n_steps = _lengths(recent)
    steps = list(itertools.chain.from_iterable(recent))
    step_dec = np.repeat(np.arange(n), n_steps)
    step_index = np.arange(len(steps))
    step_age = (n_steps - 1 + _offsets(n_steps))[step_dec] - step_index
    position = np.fromiter((step.tool for step in steps), dtype=np.int64, count=len(steps))
    step_tool = np.where(position >= 0, position + episodes.tool_base[ep[step_dec]], len(episodes.tool_table))
    occ_step = np.repeat(step_index, _lengths([step.toks for step in steps]))
    occ_sym_base = dsym_base[step_dec[occ_step]]

    # candidates, block by block (a block: the candidates of one tool position of one decision)
    candidates = [d.candidates for d in decisions]
    block_cands = np.concatenate([c.block_count for c in candidates])
    block_start = _offsets(block_cands)
    n_blocks = _lengths([c.block_count for c in candidates])
    block_base = _offsets(n_blocks)
    block_dec = np.repeat(np.arange(n), n_blocks)
    block_tool = np.arange(len(block_cands)) - block_base[block_dec] + episodes.tool_base[ep[block_dec]]
    # every candidate of a tool that a recent step called, paired with that step
    called = np.flatnonzero(position >= 0)
    called_block = block_base[step_dec[called]] + position[called]
    repeats = block_cands[called_block]
    recall_step = np.repeat(called, repeats)
    recall_cand = np.repeat(block_start[called_block] - _offsets(repeats), repeats) + np.arange(repeats.sum())
    cand_count = np.fromiter((c.count for c in candidates), dtype=np.int64, count=n)
    cand_start = _offsets(cand_count)
    cand_dec = np.repeat(np.arange(n), cand_count)
    args = np.concatenate([c.args for c in candidates], axis=1)
    arg_block = np.repeat(np.arange(len(block_cands)), np.concatenate([c.block_args for c in candidates]))
    arg_dec = block_dec[arg_block]
    val_len = _lengths([d.val_tok for d in decisions])
    arg_val = args[2] + _offsets(val_len)[arg_dec]
    pointed = np.zeros(int(val_len.sum()), dtype=bool)
    pointed[arg_val] = True
    used = np.flatnonzero(pointed)
    arg_val = (np.cumsum(pointed) - 1)[arg_val]  # rank among the used values
    val_dec = np.repeat(np.arange(n), val_len)[used]
    return Batch(
        episodes=episodes,
        dec_episode=_tensor(ep),
        dec_step=_tensor(
            np.minimum(np.fromiter((d.step for d in decisions), dtype=np.int64, count=n), MAX_STEP_FEATURE - 1)
        ),
        sym_kind=_tensor(sym_kind),
        sym_slot=_tensor(sym_slot),
        sym_static=_tensor(sym_static),
        occ_tok=_tensor(_shift_tokens(_flat([step.toks for step in steps]), occ_sym_base)),
        occ_partner=_tensor(_shift_tokens(_flat([step.partners for step in steps]), occ_sym_base)),
        occ_feature=_tensor(step_age[occ_step] * len(SECTIONS) + _flat([step.sections for step in steps])),
        occ_step=_tensor(occ_step),
        step_decision=_tensor(step_dec),
        step_tool=_tensor(step_tool),
        step_age=_tensor(step_age),
        val_tok=_tensor(_shift_tokens(_flat([d.val_tok for d in decisions])[used], dsym_base[val_dec])),
        val_type=_tensor(_flat([d.val_type for d in decisions])[used]),
        val_type_tok=_tensor(_shift_tokens(_flat([d.val_type_tok for d in decisions])[used], dsym_base[val_dec])),
        cand_decision=_tensor(cand_dec),
        cand_tool=_tensor(np.repeat(block_tool, block_cands)),
        arg_cand=_tensor(block_start[arg_block] + args[0]),
        arg_param=_tensor(args[1] + episodes.param_base[ep[arg_dec]]),
        arg_val=_tensor(arg_val),
        recall_cand=_tensor(recall_cand),
        recall_step=_tensor(recall_step),
        cand_start=cand_start,
        cand_count=cand_count,
    )
