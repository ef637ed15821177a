"""The parts a compiled spec is made of, and the call and answer conventions every layer shares.

Tables, fields, tools and their parameters are named by symbols (``t0``, ``f1``, ...) and carry
the world's surface names beside them; a goal is the compiled form of a task's goal JSON. The
conventions (``finish`` ends an episode, arguments may be a JSON string, answers are compared
exactly or normalised) hold for every domain, so they live apart from the toolworld runtime.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from axisrl.domains.toolworld.world import FLAG_FIELD

State = dict[str, dict[int, dict[str, Any]]]
Call = tuple["Tool", dict[str, Any]]
OPS = ("eq", "lt", "gt")
READ_PRIMITIVES = frozenset({"lookup", "get", "list", "filter", "aggregate"})
FINISH = "finish"


class CallError(Exception):
    """A rejected call; ``code`` is name-free (the probe hashes it), ``message`` uses world names."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class Field:
    sym: str
    type: str
    name: str
    size: int = 0
    target: str | None = None
    words: tuple[str, ...] = ()


@dataclass(eq=False, slots=True)
class Table:
    sym: str
    name: str
    fields: tuple[Field, ...]
    by_sym: dict[str, Field]
    prefix: str
    """Rendered ID prefix including the separator."""
    id_format: str
    """``format()`` spec of the numeric part, e.g. ``"05X"``."""

    def of_type(self, *types: str) -> tuple[Field, ...]:
        return tuple(f for f in self.fields if f.type in types)

    @property
    def flag(self) -> str | None:
        return FLAG_FIELD if FLAG_FIELD in self.by_sym else None


@dataclass(frozen=True, slots=True)
class Param:
    """One tool parameter. ``kind``: id | key | int | enum | sel | op | val.

    ``id`` takes an id of ``table``; ``int``/``enum`` take a value of ``field``; ``sel`` names one
    of ``choices`` (field symbols); ``val`` takes a value of the field that ``sel`` chose.
    """

    sym: str
    name: str
    kind: str
    required: bool
    table: str | None = None
    field: str | None = None
    choices: tuple[str, ...] = ()


@dataclass(eq=False, slots=True)
class Tool:
    sym: str
    prim: str
    table: str
    field: str | None
    name: str
    params: tuple[Param, ...]
    by_name: dict[str, Param] = field(default_factory=dict)

    @property
    def writes(self) -> bool:
        return self.prim not in READ_PRIMITIVES


@dataclass(frozen=True, slots=True)
class Goal:
    """A compiled goal: ``checks`` on the final state, the allowed footprint, the answer type."""

    checks: tuple[dict[str, Any], ...]
    footprint: frozenset[tuple[str, str]]
    answer_type: str | None
    query: dict[str, Any] | None

    @classmethod
    def parse(cls, goal: Mapping[str, Any] | str) -> Goal:
        """A goal as JSON text is parsed once per process (a task's env, every view of it and
        every episode of it parse the same text; a Goal is read, never modified)."""
        if isinstance(goal, str):
            return _goal_of_text(goal)
        return cls(
            tuple(goal["checks"]), frozenset((t, k) for t, k in goal["footprint"]), goal["answer_type"], goal["query"]
        )


@functools.lru_cache(maxsize=16384)
def _goal_of_text(text: str) -> Goal:
    return Goal.parse(json.loads(text))


_NUMBER = re.compile(r"[-+]?\d+(\.\d+)?")


def normalize_answer(text: str) -> str:
    """Case, surrounding punctuation/quotes, inner whitespace and number spelling ignored."""
    text = " ".join(text.casefold().split()).strip(" .,;:!?'\"`")
    if _NUMBER.fullmatch(text):
        number = float(text)
        return str(int(number)) if number.is_integer() else repr(number)
    return text


def answer_matches(given: Any, expected: str, mode: str) -> bool:
    """``exact``: the same string up to surrounding whitespace; ``normalized``: see normalize_answer.
    A non-string answer (an agent may send 17) is compared as its JSON text."""
    if given is None:
        return False
    text = given if isinstance(given, str) else json.dumps(given)
    if mode == "exact":
        return text.strip() == expected
    return normalize_answer(text) == normalize_answer(expected)


def parse_arguments(arguments: Any) -> Mapping[str, Any]:
    """A call's arguments as a mapping; OpenAI-style JSON strings are accepted."""
    if arguments is None:
        return {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            raise CallError("bad_call", "arguments are not valid JSON") from None
    if not isinstance(arguments, Mapping):
        raise CallError("bad_call", "arguments must be an object")
    return arguments


def call_memo_key(call: Any) -> tuple | None:
    """A hashable key for a call whose arguments are a dict of plain strings and integers (bools
    and floats are left out: ``True == 1 == 1.0`` would merge calls that decode differently)."""
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        return None
    arguments = call.get("arguments")
    if not isinstance(arguments, dict):
        return None
    for value in arguments.values():
        if type(value) is not str and type(value) is not int:
            return None
    return call["name"], *arguments.items()


def copy_state(state: State) -> State:
    return {t: dict(rows) for t, rows in state.items()}
