"""The name-free view a small policy acts through, in every domain.

``CompactView`` is the protocol the tiny backend reads: goal clauses, tool descriptors, the history
as token lists, the values a candidate may point at and the candidates themselves (a tool position
plus one pointer per parameter), each paired with the surface call that executes it. Tokens come
from one closed vocabulary (``STRUCTURAL``) and episode-local symbols (``T``/``F``/``E``/``V``
slots, numbers ``#n``), so a re-skinned world renders identically and a name can never be memorised.

toolworld builds its view from its runtime (``toolworld.compact``); any domain whose environment
lists its legal calls gets one from ``axisrl.domains.callview``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, Protocol

HISTORY_K = 4
"""Past steps a view shows by default."""

STRUCTURAL = (
    "<pad>",
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
"""Every token of a view that is not a symbol. The tiny policy embeds each; a token outside it reads
as ``<unk>``. A domain describes its tools, goals and observations in these words."""

SYMBOL_KINDS = "TFEV"
"""Symbol kinds: a thing acted on (T), a selector or slot (F), an addressable object (E), a value (V)."""
SLOT_SPACE = 256
"""Slots per symbol kind (the tiny policy's embedding rows per kind)."""


class DecisionPoint(NamedTuple):
    """What a view offers at one decision: ``values`` (``[token, type]``), ``typed`` (the internal
    form of each value, to build calls) and ``candidates`` (``[tool index, pointer per parameter]``)."""

    values: list[list[str]]
    typed: list[Any]
    candidates: list[list[int]]


class CompactView(Protocol):
    """One episode's view, kept up to date one step at a time (``push``), forked with its env.

    ``tools``: per tool position ``[T or -, access, return kind, semantics, (param kind, slot, req|opt)...]``;
    ``steps``: per past step ``[call tokens, (key, value) pairs...]``; ``blocks``: per tool position
    its candidate rows, replaced (never modified) when they change, so the same object means the same
    rows; ``base_values``: how many of ``current().values`` persist past this decision."""

    goal: list[list[str]]
    tools: list[list[str]]
    steps: list[list[list[str]]]
    blocks: list[list[list[int]] | None]

    @property
    def base_values(self) -> int: ...

    def current(self) -> DecisionPoint: ...

    def candidates(self) -> list[list[int]]: ...

    def call(self, k: int) -> dict[str, Any]: ...

    def push(self, call: Mapping[str, Any], observation: Mapping[str, Any]) -> None: ...

    def fork(self, env: Any) -> CompactView: ...

    def primitive(self, position: int) -> str: ...


ViewFactory = Callable[[Mapping[str, Any], Mapping[str, Any], int, Any], CompactView]
"""``view(spec, task, episode_seed, env)``: a domain's compact view of one episode at its start
(``env``: the episode's environment, reset)."""
