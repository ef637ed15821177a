"""One episode's features: the integer view of a ``CompactView``, extended as it advances.

A symbol is numbered by first appearance within its episode, so what the policy can learn about it
is its kind, its slot (drawn afresh per episode, so it names nothing) and the roles it plays in the
goal and the history. An ``EpisodeFeatures`` encodes the goal and tools once, each history step
once, and ``decision()`` returns the arrays of the current decision point (``features`` stacks
many of them into one batch).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from operator import is_not
from typing import NamedTuple

import numpy as np

from axisrl.backends.tiny.vocab import GOAL_HEADS, GOAL_POSITIONS, N_STRUCT, PRIMITIVES, STRUCT_ID, UNK, classify
from axisrl.domains.compact import HISTORY_K, CompactView


def _primitive_id(primitive: str) -> int:
    """A toolworld primitive's id: the leak ablation's feature, which exists for toolworld's tools only."""
    if primitive not in PRIMITIVES:
        raise ValueError(f"leak_primitive_role shows toolworld's primitives; {primitive!r} is not one")
    return PRIMITIVES.index(primitive)


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
    """The integer view of one ``CompactView``, extended as the episode advances."""

    def __init__(self, compact: CompactView, leak_primitive_role: bool) -> None:
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
            self.tool_prim.append(_primitive_id(compact.primitive(position)) if leak_primitive_role else 0)
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

    def fork(self, compact: CompactView) -> EpisodeFeatures:
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
        base = compact.base_values
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
