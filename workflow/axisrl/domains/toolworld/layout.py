"""What every compact view of one runtime shares, and how a tool's candidate actions are enumerated.

A ``Layout`` holds the symbol orders behind the slot permutations, the values every view starts
with, the tool descriptor templates and one ``ToolPlan`` per tool. A candidate is a tool plus one
pointer into the view's values per filled parameter; ``Pointers`` files the values by what a
parameter can take, so a plan only re-enumerates when a group it draws from grows.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from axisrl.domains.toolworld.model import OPS, Param, Tool
from axisrl.domains.toolworld.runtime import Runtime

RETURN_KIND = {
    "lookup": "id",
    "create": "id",
    "get": "row",
    "update": "row",
    "link": "row",
    "transition": "row",
    "list": "list",
    "filter": "ids",
    "delete": "ack",
    "aggregate": "agg",
}
"""What each primitive returns, as its descriptor shows it."""
FINISH_DESCRIPTOR = ["-", "R", "ret:-", "sem:end", "answer", "-", "opt"]
"""``finish``'s descriptor: no table, reads, ends the episode, one optional answer."""


def _descriptor_template(rt: Runtime, tool: Tool) -> list[str | tuple[str, str, Any]]:
    semantics = {
        "update": "sem:add" if rt.update_mode == "increment" else "sem:set",
        "delete": "sem:soft" if rt.soft_delete else ("sem:cascade" if rt.cascade else "sem:hard"),
        "transition": "sem:guard" if rt.guard else "sem:free",
    }.get(tool.prim, "sem:-")
    template: list[str | tuple[str, str, Any]] = [
        ("", "T", tool.table),
        "W" if tool.writes else "R",
        f"ret:{RETURN_KIND[tool.prim]}",
        semantics,
    ]
    for p in tool.params:
        slot: str | tuple[str, str, Any] = "-"
        if p.kind == "id":
            slot = ("", "T", p.table)
        elif p.field is not None:
            slot = ("", "F", (tool.table, p.field))
        elif p.kind == "key":
            slot = ("", "F", (tool.table, "f0"))
        template += [p.kind, slot, "req" if p.required else "opt"]
    return template


class Pointers:
    """Pointers into ``values`` grouped by what a parameter can take, plus the ones a ``finish``
    answer can take. Entries of ``values`` are only ever appended, so each is filed once."""

    def __init__(self) -> None:
        self.groups: dict[tuple, list[int]] = {}
        self.answers: list[int] = []
        self.grown: set[tuple] = set()
        """Groups that gained entries since the caller last cleared this set."""
        self.filed = 0

    def fork(self) -> Pointers:
        other = copy.copy(self)
        other.groups = {group: list(members) for group, members in self.groups.items()}
        other.answers, other.grown = list(self.answers), set(self.grown)
        return other

    def file(self, typed: list[tuple[str, Any]], writable: set[int]) -> None:
        groups = self.groups
        for k in range(self.filed, len(typed)):
            kind, payload = typed[k]
            if kind in ("int", "key", "enum"):
                self.answers.append(k)
            if kind == "entity":
                group: tuple = ("id", payload[0])
            elif kind == "key":
                group = ("key", payload[0])
            elif kind == "op":
                group = ("op",)
            elif kind == "field":
                group = ("sel", payload[0])
            elif k not in writable:
                continue
            elif kind == "int":
                group = ("int",)
            else:
                group = ("enum", payload[0], payload[1])
            if group in groups:
                groups[group].append(k)
            else:
                groups[group] = [k]
            self.grown.add(group)
        self.filed = len(typed)


def _value_group(rt: Runtime, table: str, field: str) -> tuple:
    return ("int",) if rt.tables[table].by_sym[field].type == "int" else ("enum", table, field)


def _param_source(rt: Runtime, tool: Tool, p: Param) -> tuple:
    """Where a parameter's options come from: ``("group", key)``, ``("sel", key, choices)`` or
    ``("val",)`` (a value of whichever field the ``sel`` parameter ``field`` chose)."""
    t = tool.table
    if p.kind == "id":
        return ("group", ("id", p.table))
    if p.kind == "key":
        return ("group", ("key", t))
    if p.kind == "op":
        return ("group", ("op",))
    if p.kind == "sel":
        return ("sel", ("sel", t), p.choices)
    if p.kind == "val":
        return ("val",)
    return ("group", _value_group(rt, t, p.field))


@dataclass(frozen=True, slots=True)
class ToolPlan:
    """How one tool's candidates are enumerated.

    ``variants``: the parameter subsets a candidate fills (the required ones, plus each optional
    one alone), each as (option source per filled parameter, position of each tool parameter in
    it, or None when the subset is all parameters in order, and the pointer group of each filled
    parameter when every one draws from a group alone, or None). ``groups``: every pointer group
    the options are drawn from; the candidates change only when one of them grows."""

    variants: tuple[tuple[tuple[tuple, ...], tuple[int, ...] | None, tuple[tuple, ...] | None], ...]
    groups: tuple[tuple, ...]

    @classmethod
    def of(cls, rt: Runtime, tool: Tool) -> ToolPlan:
        params = tool.params
        required = [p for p in params if p.required]
        subsets: list[list[Param]] = [required + [p] for p in params if not p.required]
        if tool.prim != "update" or tool.field is not None:
            subsets.insert(0, required)
        variants, groups = [], []
        for chosen in subsets:
            positions = tuple(next((k for k, q in enumerate(chosen) if q is p), -1) for p in params)
            sources = tuple(_param_source(rt, tool, p) for p in chosen)
            keys = tuple(source[1] for source in sources) if all(source[0] == "group" for source in sources) else None
            variants.append((sources, None if positions == tuple(range(len(params))) else positions, keys))
            for source in sources:
                if source[0] != "val":
                    groups.append(source[1])
                if source[0] == "sel":
                    groups += [_value_group(rt, tool.table, f) for f in source[2]]
        return cls(tuple(variants), tuple(dict.fromkeys(groups)))

    def candidates(
        self, rt: Runtime, table: str, position: int, typed: list[tuple[str, Any]], groups: dict[tuple, list[int]]
    ) -> list[list[int]]:
        rows: list[list[int]] = []
        for sources, positions, keys in self.variants:
            options: Iterable[tuple[int, ...]] = (
                itertools.product(*[groups.get(key, ()) for key in keys])
                if keys is not None
                else _options(rt, table, sources, typed, groups)
            )
            if positions is None:
                rows += [[position, *ptrs] for ptrs in options]
            else:
                rows += [[position, *(ptrs[s] if s >= 0 else -1 for s in positions)] for ptrs in options]
        return rows


def _options(
    rt: Runtime, table: str, sources: tuple[tuple, ...], typed: list[tuple[str, Any]], groups: dict[tuple, list[int]]
) -> list[tuple[int, ...]]:
    """Every pointer tuple for one parameter subset with a ``sel`` (a ``val`` follows the field
    its ``sel`` chose); a subset of plain groups is their product (``ToolPlan.candidates``)."""
    partial: list[tuple[tuple[int, ...], str | None]] = [((), None)]
    for source in sources:
        if source[0] == "group":
            ks = groups.get(source[1], ())
            partial = [(ptrs + (k,), field) for ptrs, field in partial for k in ks]
        elif source[0] == "sel":
            options = [(k, typed[k][1][-1]) for k in groups.get(source[1], ())]
            options = [(k, f) for k, f in options if f in source[2]]
            partial = [(ptrs + (k,), f if field is None else field) for ptrs, field in partial for k, f in options]
        else:
            partial = [
                (ptrs + (k,), field) for ptrs, field in partial for k in groups.get(_value_group(rt, table, field), ())
            ]
    return [ptrs for ptrs, _ in partial]


class Layout:
    """What every episode of one runtime shares, with slot tokens left as templates: the symbol
    orders behind the slot permutations, the values every view starts with (ops, field
    selectors, state-machine values), the tool descriptors and the candidate plans."""

    def __init__(self, rt: Runtime) -> None:
        tables = self.tables = list(rt.tables)
        self.fields = [(t, f.sym) for t in tables for f in rt.tables[t].fields]
        self.entities = [(t, i) for t in tables for i in rt.initial[t]]
        self.values: list[Any] = [row["f0"] for t in tables for row in rt.initial[t].values()]
        self.values += [
            (t, f.sym, k) for t in tables for f in rt.tables[t].of_type("enum", "status") for k in range(f.size)
        ]
        base: list[tuple[str, Any, str | tuple, str | tuple]] = [("op", op, op, "op") for op in OPS]
        base += [
            ("field", (t, f.sym), ("", "F", (t, f.sym)), "field")
            for t, table in rt.tables.items()
            for f in table.of_type("int", "enum", "status")
        ]
        self.writable = set(range(len(base), len(base) + rt.tables[rt.machine_table].by_sym[rt.status_field].size))
        machine, status = rt.machine_table, rt.status_field
        base += [
            ("enum", (machine, status, k), ("", "V", (machine, status, k)), ("enum:", "F", (machine, status)))
            for k in range(rt.tables[machine].by_sym[status].size)
        ]
        self.typed = [(kind, payload) for kind, payload, _, _ in base]
        self.base_values = [part for _, _, token, type_token in base for part in (token, type_token)]
        self.descriptors = {tool.sym: _descriptor_template(rt, tool) for tool in rt.tools}
        self.plans = {tool.sym: ToolPlan.of(rt, tool) for tool in rt.tools}


_LAYOUT_CACHE: dict[int, tuple[Runtime, Layout]] = {}


def layout_of(rt: Runtime) -> Layout:
    """The layout of one runtime, cached: every episode of an environment shares it."""
    hit = _LAYOUT_CACHE.get(id(rt))
    if hit is not None and hit[0] is rt:
        return hit[1]
    if len(_LAYOUT_CACHE) >= 1024:
        del _LAYOUT_CACHE[next(iter(_LAYOUT_CACHE))]
    layout = Layout(rt)
    _LAYOUT_CACHE[id(rt)] = (rt, layout)
    return layout
