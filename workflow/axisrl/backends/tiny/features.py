"""From the compact view (``view``) to integer arrays, and from many decisions to one batch.

The policy reads only what ``render_compact`` shows: goal clauses, tool descriptors, the last
steps of the history, the visible values and the candidate actions. Tokens are split into a
closed *structural* vocabulary (``eq``, ``ret:row``, ``req`` ...) and episode-local *symbols*
(slot tokens ``T3``/``F17``/``E40``/``V9`` and numbers ``#18``). A symbol is numbered by first
appearance within its episode, so what the policy can learn about it is its kind, its slot (drawn
afresh per episode, so it names nothing) and the roles it plays in the goal and the history.

An ``EpisodeFeatures`` follows one ``CompactEpisode``: the goal and tools are encoded once, each
history step once, and ``decision()`` returns the arrays of the current decision point.
``collate_episodes`` stacks the per-episode parts of many episodes into an ``EpisodeBatch`` and
``collate`` stacks their decisions into a ``Batch`` with global row indices, so that one forward
scores every candidate of every decision.
"""

from __future__ import annotations

import copy
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from operator import is_not
from typing import NamedTuple

import numpy as np
import torch

from axisrl.backends.tiny.view import HISTORY_K, CompactEpisode

PAD = "<pad>"
STRUCTURAL = (
    PAD,
    "<unk>",
    # goal clause heads, comparison ops and literal values
    "exists",
    "absent",
    "eq",
    "ref",
    "ask",
    "ask_find",
    "ask_count",
    "ask_aggregate",
    "lt",
    "gt",
    "null",
    "true",
    "false",
    "-",
    # tool descriptors: access, return kind, declared semantics, parameter kinds, required or not
    "R",
    "W",
    "ret:id",
    "ret:row",
    "ret:list",
    "ret:ids",
    "ret:ack",
    "ret:agg",
    "ret:-",
    "sem:-",
    "sem:add",
    "sem:set",
    "sem:soft",
    "sem:cascade",
    "sem:hard",
    "sem:guard",
    "sem:free",
    "sem:end",
    "id",
    "key",
    "int",
    "enum",
    "sel",
    "op",
    "val",
    "answer",
    "req",
    "opt",
    # history observation keys and value types
    "count",
    "sum",
    "deleted",
    "err",
    "done",
    "field",
    "ent",
)
STRUCT_ID = {token: k for k, token in enumerate(STRUCTURAL)}
N_STRUCT = len(STRUCTURAL)
UNK = STRUCT_ID["<unk>"]
GOAL_HEADS = ("exists", "absent", "eq", "ref", "ask", "ask_find", "ask_count", "ask_aggregate")
GOAL_POSITIONS = 8
N_GOAL_ROLES = (len(GOAL_HEADS) + 1) * GOAL_POSITIONS
SYMBOL_KINDS = ("T", "F", "E", "V", "#")
N_SLOTS = 256
"""Slot embeddings per symbol kind; slot numbers beyond it wrap around."""
SECTIONS = ("arg", "key", "value")
N_HISTORY_FEATURES = HISTORY_K * len(SECTIONS)
PRIMITIVES = (
    "lookup",
    "get",
    "list",
    "filter",
    "aggregate",
    "create",
    "update",
    "delete",
    "link",
    "transition",
    "finish",
)
MAX_STEP_FEATURE = 16
"""Step counts with their own embedding; later steps share the last."""

_SYMBOL = re.compile(r"([TFEV])\+?(\d+)|#(-?\d+)|A(\d+|\?)")
_TOKENS: dict[str, tuple[int, int]] = {}
"""token -> (symbol kind, slot) or (-1, structural id) or (-2, tool position / -1); memoised."""


def classify(token: str) -> tuple[int, int]:
    hit = _TOKENS.get(token)
    if hit is not None:
        return hit
    match = _SYMBOL.fullmatch(token)
    if match is None:
        hit = (-1, STRUCT_ID.get(token, UNK))
    elif match.group(1):
        hit = (SYMBOL_KINDS.index(match.group(1)), int(match.group(2)) % N_SLOTS)
    elif match.group(3) is not None:
        hit = (SYMBOL_KINDS.index("#"), 0)  # numbers keep their identity within the episode, nothing more
    else:
        hit = (-2, -1 if match.group(4) == "?" else int(match.group(4)))
    if len(_TOKENS) < 1 << 16:
        _TOKENS[token] = hit
    return hit


class ValueCodes(NamedTuple):
    """One visible value's codes: its token, its type (structural id) and the slot its type names, if any."""

    tok: int
    type: int
    type_tok: int


@dataclass(frozen=True, slots=True)
class CandidateBlock:
    """The candidates of one tool at one decision: how many, and one entry per filled argument
    (candidate row within the block, parameter row within the episode, pointed value). Arrays,
    since a block is reused by every decision until its tool's candidates change."""

    count: int
    args: np.ndarray
    """(3, filled arguments): candidate row within the block, parameter row, pointed value."""


@dataclass(frozen=True, slots=True)
class Candidates:
    """The blocks of one decision (one per tool position, in order) stacked, so that ``collate``
    concatenates a few arrays per decision rather than per block. A decision reuses the previous
    one's while none of the episode's blocks changed (most steps change a few tools, if any)."""

    count: int
    block_count: np.ndarray
    """Candidates per tool position."""
    block_args: np.ndarray
    """Filled arguments per tool position."""
    args: np.ndarray
    """(3, filled arguments): candidate row within its block, parameter row, pointed value."""

    @classmethod
    def stack(cls, blocks: Sequence[CandidateBlock]) -> Candidates:
        counts = [block.count for block in blocks]
        return cls(
            sum(counts),
            np.array(counts, dtype=np.int64),
            np.array([block.args.shape[1] for block in blocks], dtype=np.int64),
            np.concatenate([block.args for block in blocks], axis=1),
        )


@dataclass(frozen=True, slots=True)
class HistoryStep:
    """One past step: the called tool's position (-1 if the call did not parse) and its
    (token, partner, section) occurrences."""

    tool: int
    toks: list[int]
    partners: list[int]
    sections: list[int]


@dataclass(slots=True)
class Decision:
    """One decision point of one episode; token codes are structural ids or ``N_STRUCT + symbol``."""

    n_symbols: int
    sym_kind: list[int]
    sym_slot: list[int]
    """The episode's symbol lists when this decision was taken (only ever appended to, so their
    first ``n_symbols`` entries stay this decision's even as the episode goes on or forks)."""
    step: int
    recent: list[HistoryStep]
    """The last ``HISTORY_K`` steps, oldest first; ``collate`` flattens their occurrences."""
    val_tok: list[int]
    val_type: list[int]
    val_type_tok: list[int]
    candidates: Candidates


class EpisodeFeatures:
    """The integer view of one ``CompactEpisode``, extended as the episode advances."""

    def __init__(self, compact: CompactEpisode, leak_primitive_role: bool) -> None:
        self.compact = compact
        self.codes: dict[str, int] = dict(STRUCT_ID)
        """Token -> its code: every structural token, and each symbol seen so far."""
        self.sym_kind: list[int] = []
        self.sym_slot: list[int] = []
        code = self.code
        self.goal_clause: list[int] = []
        self.goal_role: list[int] = []
        self.goal_tok: list[int] = []
        for c, clause in enumerate(compact.goal):
            head = GOAL_HEADS.index(clause[0]) if clause[0] in GOAL_HEADS else len(GOAL_HEADS)
            for p, token in enumerate(clause[:GOAL_POSITIONS]):
                self.goal_clause.append(c)
                self.goal_role.append(head * GOAL_POSITIONS + p)
                self.goal_tok.append(code(token))
        self.tool_struct: list[list[int]] = []
        self.tool_table: list[int] = []
        self.tool_prim: list[int] = []
        self.param_tool: list[int] = []
        self.param_pos: list[int] = []
        self.param_kind: list[int] = []
        self.param_req: list[int] = []
        self.param_slot: list[int] = []
        self.param_start: list[int] = []
        for position, descriptor in enumerate(compact.tools):
            self.tool_table.append(code(descriptor[0]))
            self.tool_struct.append([code(token) for token in descriptor[1:4]])
            tool = compact.ordered[position]
            self.tool_prim.append(PRIMITIVES.index(tool.prim if tool else "finish") if leak_primitive_role else 0)
            self.param_start.append(len(self.param_tool))
            for j in range((len(descriptor) - 4) // 3):
                kind, slot, required = descriptor[4 + 3 * j : 7 + 3 * j]
                self.param_tool.append(position)
                self.param_pos.append(j)
                self.param_kind.append(code(kind))
                self.param_slot.append(code(slot))
                self.param_req.append(code(required))
        self.n_static = len(self.sym_kind)
        self.steps: list[HistoryStep] = []
        self.step_cache: dict[tuple[tuple[str, ...], ...], HistoryStep] = {}
        self.block_rows: list[list[list[int]] | None] = [None] * len(compact.tools)
        self.blocks: list[CandidateBlock | None] = [None] * len(compact.tools)
        """Per tool position, the compact view's candidate rows and their block: rows are replaced,
        never modified, when they change, so the same list means the same block."""
        self.candidates: Candidates | None = None
        """The stacked ``blocks``, valid while every entry of ``block_rows`` is the view's."""
        self.val_tok: list[int] = []
        self.val_type: list[int] = []
        self.val_type_tok: list[int] = []

    def fork(self, compact: CompactEpisode) -> EpisodeFeatures:
        """A copy following ``compact`` (a fork of this one's episode); the goal and tool arrays,
        fixed for the episode, are shared."""
        other = copy.copy(self)
        other.compact = compact
        other.codes, other.step_cache = dict(self.codes), dict(self.step_cache)
        other.block_rows, other.blocks = list(self.block_rows), list(self.blocks)
        other.sym_kind, other.sym_slot, other.steps = list(self.sym_kind), list(self.sym_slot), list(self.steps)
        other.val_tok, other.val_type, other.val_type_tok = (
            list(self.val_tok),
            list(self.val_type),
            list(self.val_type_tok),
        )
        return other

    def code(self, token: str) -> int:
        """Structural id, or ``N_STRUCT +`` the episode-local number of a symbol (new ones appended)."""
        code = self.codes.get(token)
        if code is not None:
            return code
        kind, value = classify(token)
        if kind == -1:
            return value
        if kind == -2:
            return UNK
        code = self.codes[token] = N_STRUCT + len(self.sym_kind)
        self.sym_kind.append(kind)
        self.sym_slot.append(value)
        return code

    def _value(self, token: str, type_token: str) -> ValueCodes:
        kind, _, slot = type_token.partition(":")
        return ValueCodes(self.code(token), STRUCT_ID.get(kind, UNK), self.code(slot) if slot else 0)

    def _step(self, tokens: list[list[str]]) -> HistoryStep:
        key = tuple(map(tuple, tokens))
        step = self.step_cache.get(key)
        if step is None:  # agents repeat themselves: the same step, the same codes
            step = self.step_cache[key] = self._encode_step(tokens)
        return step

    def _encode_step(self, tokens: list[list[str]]) -> HistoryStep:
        """An argument's partner is the call's outcome (its first observation key, ``err`` on an
        error), so a value remembers how the calls it was passed to went."""
        call, *pairs = tokens
        kind, position = classify(call[0])
        code = self.code
        toks = [code(token) for token in call[1:]]
        partners = [code(pairs[0][0]) if pairs else 0] * len(toks)
        sections = [0] * len(toks) + [1, 2] * len(pairs)
        for key, value in pairs:
            k, v = code(key), code(value)
            toks += (k, v)
            partners += (v, k)
        return HistoryStep(position if kind == -2 else -1, toks, partners, sections)

    def _block(self, position: int, rows: list[list[int]]) -> CandidateBlock:
        arg_cand, arg_param, arg_val = [], [], []
        start = self.param_start[position]
        for c, (_, *pointers) in enumerate(rows):
            for j, pointer in enumerate(pointers):
                if pointer >= 0:
                    arg_cand.append(c)
                    arg_param.append(start + j)
                    arg_val.append(pointer)
        return CandidateBlock(len(rows), np.array([arg_cand, arg_param, arg_val], dtype=np.int64).reshape(3, -1))

    def decision(self) -> Decision:
        compact, steps = self.compact, self.steps
        while len(steps) < len(compact.steps):
            steps.append(self._step(compact.steps[len(steps)]))
        values, _, _ = compact.current()
        base = len(compact.state.values)
        while len(self.val_tok) < base:
            tok, typ, type_tok = self._value(*values[len(self.val_tok)])
            self.val_tok.append(tok)
            self.val_type.append(typ)
            self.val_type_tok.append(type_tok)
        val_tok, val_type, val_type_tok = self.val_tok, self.val_type, self.val_type_tok
        if len(values) > base:  # values derived for this decision only
            extra = [self._value(*value) for value in values[base:]]
            val_tok = val_tok + [e.tok for e in extra]
            val_type = val_type + [e.type for e in extra]
            val_type_tok = val_type_tok + [e.type_tok for e in extra]

        rows = compact.blocks
        if self.candidates is None or any(map(is_not, rows, self.block_rows)):
            for position, (new, old) in enumerate(zip(rows, self.block_rows)):
                if new is not old:
                    self.block_rows[position], self.blocks[position] = new, self._block(position, new)
            self.candidates = Candidates.stack(self.blocks)
        return Decision(
            len(self.sym_kind),
            self.sym_kind,
            self.sym_slot,
            len(steps),
            steps[-HISTORY_K:],
            val_tok,
            val_type,
            val_type_tok,
            self.candidates,
        )


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
