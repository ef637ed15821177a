"""``CallView``: the compact view (``axisrl.domains.compact.CompactView``) of any domain whose
environment lists its legal calls (``candidates()``: the exact calls ``step`` accepts).

The domain says how its tools, goals and observations read in the shared vocabulary (a
``Lexicon``); the view anonymises every world-specific string through a ``Namer`` drawn from the
episode seed, so a re-skinned world renders identically.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from axisrl.domains.canon import derive_seed
from axisrl.domains.compact import SLOT_SPACE, SYMBOL_KINDS, DecisionPoint, ViewFactory
from axisrl.domains.toolworld.model import FINISH
from axisrl.domains.toolworld.slots import Permutation, shuffled


@dataclass(frozen=True)
class ToolShape:
    """One tool as a ``Lexicon`` describes it: its surface ``name``, its ``descriptor`` (access,
    return kind, semantics: ``STRUCTURAL`` words), its parameters (surface argument name, parameter
    kind: ``id`` objects, ``sel`` selectors, ``key`` values, ``int`` numbers, ``val`` either,
    ``answer``) and the verb it plays (``primitive``, read by diagnostics)."""

    name: str
    descriptor: tuple[str, str, str]
    params: tuple[tuple[str, str], ...]
    primitive: str


FINISH_SHAPE = ToolShape(FINISH, ("R", "ret:-", "sem:end"), (("answer", "answer"),), "finish")
PARAM_SYMBOL = {"id": "E", "sel": "F", "key": "V", "val": "V", "answer": "V", "int": "V", "enum": "V"}
"""The symbol kind an argument of each parameter kind is named with (numbers are ``#n`` in any)."""


class Namer:
    """Episode-local symbol tokens for world-specific strings: a symbol's slot is drawn from a
    permutation seeded by the episode, in order of first appearance, so the same world renders
    with fresh slots per episode and a re-skinned one with the same tokens."""

    def __init__(self, episode_seed: int) -> None:
        self.perms = {
            kind: Permutation(derive_seed(episode_seed, "callview", kind), SLOT_SPACE) for kind in SYMBOL_KINDS
        }
        self.names: dict[tuple[str, str], str] = {}
        self.used = dict.fromkeys(SYMBOL_KINDS, 0)

    def fork(self) -> Namer:
        other = copy.copy(self)
        other.names, other.used = dict(self.names), dict(self.used)
        return other

    def __call__(self, text: Any, kind: str) -> str:
        """The token of ``text``: ``#n`` for an integer (or a string that is one), else its ``kind`` symbol."""
        if isinstance(text, bool):
            return "true" if text else "false"
        if isinstance(text, int) or (isinstance(text, str) and text.lstrip("-").isdigit() and len(text) < 12):
            return f"#{int(text)}"
        key = (kind, str(text))
        token = self.names.get(key)
        if token is None:
            used = self.used[kind]
            slot = self.perms[kind].prefix(used + 1)[-1] if used < SLOT_SPACE else used
            token = self.names[key] = f"{kind}{slot}"
            self.used[kind] = used + 1
        return token


class Lexicon(Protocol):
    """How a domain's episodes read in the shared vocabulary (see ``CallView``)."""

    def tools(self, env: Any) -> Sequence[ToolShape]:
        """The episode's tools, ``finish`` included (``FINISH_SHAPE``)."""
        ...

    def goal(self, env: Any, task: Mapping[str, Any], name: Namer) -> list[list[str]]:
        """The task's goal as clauses, each opening with a head (``eq``, ``exists``, ``ask`` ...)."""
        ...

    def observation(
        self, env: Any, call: Mapping[str, Any], observation: Mapping[str, Any], name: Namer
    ) -> list[list[str]]:
        """What one step's observation shows, as ``[key, value]`` token pairs."""
        ...


class CallView:
    """The compact view of an episode whose environment lists its legal calls.

    Tools sit in an episode-shuffled order; a candidate is the position of its call's tool and, per
    parameter, a pointer into ``values`` (each argument named by the ``Namer``, typed by its
    parameter kind) or -1. A history step is the call's tokens and the lexicon's pairs for its
    observation. Candidate rows are re-read from the environment at each decision; a tool's block
    keeps its object while its rows are unchanged (the tiny encoding caches by identity)."""

    def __init__(self, lexicon: Lexicon, task: Mapping[str, Any], episode_seed: int, env: Any) -> None:
        self.lexicon, self.env = lexicon, env
        self.name = Namer(episode_seed)
        shapes = list(lexicon.tools(env))
        order = shuffled(derive_seed(episode_seed, "callview", "tools"), len(shapes))
        self.shapes = [shapes[k] for k in order]
        self.position = {shape.name: k for k, shape in enumerate(self.shapes)}
        self.goal = lexicon.goal(env, task, self.name)
        self.tools = [
            ["-", *shape.descriptor, *(t for _, kind in shape.params for t in (kind, "-", "opt"))]
            for shape in self.shapes
        ]
        self.steps: list[list[list[str]]] = []
        self.values: list[list[str]] = []
        self.typed: list[Any] = []
        self.index: dict[tuple[str, str], int] = {}
        self.blocks: list[list[list[int]] | None] = [None] * len(self.shapes)
        self._calls: list[dict[str, Any]] = []
        self._current: DecisionPoint | None = None

    @classmethod
    def factory(cls, lexicon: Lexicon) -> ViewFactory:
        """A domain's ``compact_view``: ``factory(lexicon)(spec, task, episode_seed, env)``."""
        return lambda spec, task, episode_seed, env: cls(lexicon, task, episode_seed, env)

    @property
    def base_values(self) -> int:
        return len(self.values)

    def fork(self, env: Any) -> CallView:
        other = copy.copy(self)
        other.env, other.name = env, self.name.fork()
        other.steps, other.values, other.typed = list(self.steps), list(self.values), list(self.typed)
        other.index, other.blocks = dict(self.index), list(self.blocks)
        if self._current is not None:  # the same decision, over the fork's own value lists
            other._current = self._current._replace(values=other.values, typed=other.typed)
        return other

    def _value(self, kind: str, argument: Any) -> int:
        token = self.name(argument, PARAM_SYMBOL.get(kind, "V"))
        type_token = "int" if token.startswith("#") else kind
        k = self.index.get((token, type_token))
        if k is None:
            k = self.index[(token, type_token)] = len(self.values)
            self.values.append([token, type_token])
            self.typed.append(argument)
        return k

    def current(self) -> DecisionPoint:
        if self._current is not None:
            return self._current
        calls = self.env.candidates()
        rows: list[list[list[int]]] = [[] for _ in self.shapes]
        by_position: list[list[dict[str, Any]]] = [[] for _ in self.shapes]
        for call in calls:
            position = self.position.get(call["name"])
            if position is None:
                raise ValueError(f"candidate {call['name']!r} is not among the lexicon's tools")
            arguments = call.get("arguments") or {}
            row = [position]
            for argument, kind in self.shapes[position].params:
                row.append(self._value(kind, arguments[argument]) if argument in arguments else -1)
            rows[position].append(row)
            by_position[position].append(call)
        for position, block in enumerate(rows):
            if block != self.blocks[position]:
                self.blocks[position] = block
        self._calls = [call for calls_of_tool in by_position for call in calls_of_tool]
        candidates = [row for block in self.blocks for row in block or ()]
        self._current = DecisionPoint(self.values, self.typed, candidates)
        return self._current

    def candidates(self) -> list[list[int]]:
        return self.current().candidates

    def call(self, k: int) -> dict[str, Any]:
        self.current()
        return self._calls[k]

    def push(self, call: Mapping[str, Any], observation: Mapping[str, Any]) -> None:
        position = self.position.get(call.get("name")) if isinstance(call, Mapping) else None
        if position is None:
            self.steps.append([["A?"], ["err", "-"]])
        else:
            arguments = call.get("arguments") or {}
            tokens = [f"A{position}"]
            for argument, kind in self.shapes[position].params:
                value = arguments.get(argument)
                tokens.append("-" if value is None else self.name(value, PARAM_SYMBOL.get(kind, "V")))
            if "error" in observation:
                pairs = [["err", "-"]]
            elif call.get("name") == FINISH:
                pairs = [["done", "-"]]
            else:
                pairs = self.lexicon.observation(self.env, call, observation, self.name)
            self.steps.append([tokens, *pairs])
        self._current = None

    def primitive(self, position: int) -> str:
        return self.shapes[position].primitive
