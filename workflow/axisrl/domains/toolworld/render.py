"""Two renderings of one environment: chat + OpenAI tools for LLMs, and a compact anonymised view.

``render_chat`` gives the messages and function schemas an LLM sees (tau2/BFCL contract: tools
as JSON Schema, JSON observations, ``finish(answer)`` ends the episode).

``render_compact`` gives a tiny policy a name-free token view. Every world-specific symbol
(table, field, tool, entity id, string value) becomes an episode-local slot token (``T3``,
``F17``, ``E40``, ``V9``) through permutations drawn from ``episode_seed``; slot order depends
only on structure and content, never on names, so a re-skinned world renders identically and
memorising a name cannot pay off. Tool descriptors show the bound table, read/write, return
type, declared semantics and typed parameters, but not the primitive. Actions are candidates:
a tool index plus pointers into ``values`` (what the goal and the history make visible), each
paired with the surface call that executes it.
"""

from __future__ import annotations

import bisect
import copy
import itertools
import json
import random
import re
import sys
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from axisrl.domains.toolworld.canon import derive_seed
from axisrl.domains.toolworld.runtime import FINISH, OPS, CallError, Field, Goal, Param, Runtime, Tool, compile_spec
from axisrl.domains.toolworld.world import Spec

# ------------------------------------------------------------------------------------------ chat

POLICY = ("Policy: ids are never given in requests; find them with the tools. Change only what the request "
          "asks for and leave every other record as it is. If the request is a question, call "
          f"{FINISH} with the answer (just the value); otherwise call {FINISH} when the change is done.")

PURPOSE = {
    "lookup": "Find the id of the {table} with the given {key}.",
    "get": "Read the full {table} record with the given id.",
    "list": "List the id and {key} of every {table}.",
    "filter": "Ids of the {table} records whose field compares to the value (eq, lt, gt; lt/gt on integers).",
    "aggregate": "Count the {table} records whose field equals the value; with a total field, also sum it.",
    "create": "Create a {table}; returns its new id.",
    "delete": "Delete the {table} with the given id.",
    "link": "Set the {field} of a {table} to the id of a {target}.",
    "transition": "Change the {field} of a {table}.",
}


def observation_json(observation: Mapping[str, Any]) -> str:
    """The tool-result string an LLM sees: compact JSON with sorted keys."""
    return json.dumps(observation, sort_keys=True, separators=(",", ":"))


def _id_pattern(rt: Runtime, table: str) -> str:
    t = rt.tables[table]
    digits = "0-9" if rt.radix == 10 else ("0-9A-F" if t.id_format.endswith("X") else "0-9a-f")
    width = int(t.id_format[1:-1])
    return f"^{re.escape(t.prefix)}[{digits}]{{{width},}}$"


def _param_schema(rt: Runtime, tool: Tool, p: Param) -> dict[str, Any]:
    table = rt.tables[tool.table]
    if p.kind == "id":
        return {"type": "string", "pattern": _id_pattern(rt, p.table),
                "description": f"id of a {rt.tables[p.table].name}, e.g. {rt.render_id(p.table, 7)}"}
    if p.kind == "key":
        return {"type": "string", "description": f"the {p.name} of the {table.name}"}
    if p.kind == "int":
        return {"type": "integer", "description": f"the {p.name}"}
    if p.kind == "enum":
        return {"type": "string", "enum": list(table.by_sym[p.field].words)}
    if p.kind == "sel":
        return {"type": "string", "enum": [table.by_sym[c].name for c in p.choices]}
    if p.kind == "op":
        return {"type": "string", "enum": list(OPS)}
    return {"type": ["string", "integer"], "description": "a value of the chosen field"}


def _describe_tool(rt: Runtime, tool: Tool) -> str:
    table = rt.tables[tool.table]
    if tool.prim == "update":
        fields = [f.name for f in table.of_type("int", "enum") if tool.field in (None, f.sym)]
        how = ("adds the given amount to integer fields and sets the others" if rt.update_mode == "increment"
               else "sets the given fields")
        return f"Update a {table.name} ({', '.join(fields)}): {how}."
    field = table.by_sym.get(tool.field or rt.status_field)
    target = rt.tables[field.target].name if field and field.target else ""
    text = PURPOSE[tool.prim].format(table=table.name, key=table.by_sym["f0"].name, field=field and field.name,
                                     target=target)
    if tool.prim == "delete":
        if rt.soft_delete:
            text += f" (Archives it: sets {table.by_sym[table.flag].name} to true; archived records are hidden.)"
        elif rt.referrers[tool.table]:
            text += (" Records that refer to it are deleted too." if rt.cascade
                     else " References to it are cleared.")
    if tool.prim == "transition":
        words = field.words
        text += (" Allowed changes: " + ", ".join(f"{words[a]} -> {words[b]}" for a, b in sorted(rt.edges)) + "."
                 if rt.guard else " Any value may be set.")
    return text


def tool_schemas(spec: Spec) -> list[dict[str, Any]]:
    """OpenAI function-calling tool list, the world's tools plus ``finish``."""
    rt = compile_spec(spec)
    tools = []
    for tool in rt.tools:
        tools.append({"type": "function", "function": {
            "name": tool.name,
            "description": _describe_tool(rt, tool),
            "parameters": {"type": "object",
                           "properties": {p.name: _param_schema(rt, tool, p) for p in tool.params},
                           "required": [p.name for p in tool.params if p.required],
                           "additionalProperties": False}}})
    tools.append({"type": "function", "function": {
        "name": FINISH,
        "description": "End the episode. Give the answer if the request asked a question.",
        "parameters": {"type": "object", "properties": {"answer": {"type": "string"}}, "required": [],
                       "additionalProperties": False}}})
    return tools


def _describe_field(rt: Runtime, f: Field) -> str:
    if f.type == "key":
        return f"{f.name} (unique name)"
    if f.type == "int":
        return f"{f.name} (integer)"
    if f.type in ("enum", "status"):
        return f"{f.name} (one of {', '.join(f.words)})"
    if f.type == "ref":
        return f"{f.name} (id of a {rt.tables[f.target].name}, or null)"
    return f"{f.name} (true once archived)"


def render_chat(spec: Spec, task: Mapping[str, Any]) -> dict[str, Any]:
    """``{"messages": [system, user], "tools": [...]}`` for one task."""
    rt = compile_spec(spec)
    lines = [f"You operate a records system with {len(rt.tables)} tables. Every record is identified by its "
             f"{rt.id_name} (e.g. {rt.render_id(next(iter(rt.tables)), 7)})."]
    for table in rt.tables.values():
        lines.append(f"- {table.name}: " + "; ".join(_describe_field(rt, f) for f in table.fields))
    lines.append(POLICY)
    return {"messages": [{"role": "system", "content": "\n".join(lines)},
                         {"role": "user", "content": task["instruction"]}],
            "tools": tool_schemas(spec)}


# --------------------------------------------------------------------------------------- compact

SLOT_SPACE = {"T": 8, "F": 32, "E": 64, "V": 128}
"""Minimum slot range per symbol kind; slots are drawn from it without replacement."""
HISTORY_K = 4
RETURN_KIND = {"lookup": "id", "create": "id", "get": "row", "update": "row", "link": "row", "transition": "row",
               "list": "list", "filter": "ids", "delete": "ack", "aggregate": "agg"}


class _Slots:
    """Episode-local symbol -> slot token maps. Symbols are ordered by structure and content only."""

    def __init__(self, rt: Runtime, episode_seed: int) -> None:
        layout = _layout(rt)
        tables, fields, entities, values = layout.tables, layout.fields, layout.entities, layout.values
        perms = {kind: _Permutation(derive_seed(episode_seed, "compact", kind),
                                    max(SLOT_SPACE[kind], len(symbols) + 16))
                 for kind, symbols in (("T", tables), ("F", fields), ("E", entities), ("V", values))}
        self.table = self._assign("T", tables, perms["T"])
        self.field = self._assign("F", fields, perms["F"])
        self.entity = self._assign("E", entities, perms["E"])
        self.value = self._assign("V", values, perms["V"])
        self.extra_entity = _Spare("E", perms["E"], len(entities))
        self.extra_value = _Spare("V", perms["V"], len(values))
        self.tool_order = _shuffled(derive_seed(episode_seed, "compact", "tools"), len(rt.tools) + 1)
        self.maps = {"T": self.table, "F": self.field, "V": self.value}

    @staticmethod
    def _assign(kind: str, symbols: list[Any], perm: _Permutation) -> dict[Any, str]:
        return {s: f"{kind}{slot}" for s, slot in zip(symbols, perm.prefix(len(symbols)))}

    def fill(self, template: Sequence[str | tuple[str, str, Any]]) -> list[str]:
        """A token template with ``(prefix, "T"|"F"|"V", symbol)`` for each slot token."""
        maps = self.maps
        return [part if isinstance(part, str) else part[0] + maps[part[1]][part[2]] for part in template]


class _Words:
    """The 32-bit outputs of ``random.Random(seed)`` in order; ``getrandbits(32 * n)`` packs the
    next n outputs least significant first, so they are drawn in bulk."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.words: list[int] = []
        self.position = 0

    def below(self, bounds: Sequence[int]) -> list[int]:
        """``[Random._randbelow(n) for n in bounds]``: the top ``n.bit_length()`` bits of the next
        output, redrawn until below ``n`` (at most half the draws are rejected on average)."""
        words, position, out = self.words, self.position, []
        for n in bounds:
            shift = 32 - n.bit_length()
            while True:
                if position == len(words):
                    count = 3 * (len(bounds) - len(out)) // 2 + 8
                    block = array("I", self.rng.getrandbits(32 * count).to_bytes(4 * count, "little"))
                    if sys.byteorder == "big":
                        block.byteswap()
                    words.extend(block)
                r = words[position] >> shift
                position += 1
                if r < n:
                    break
            out.append(r)
        self.position = position
        return out


class _Permutation:
    """``random.Random(seed).sample(range(size), size)``, bit for bit, drawn only as far as it is read."""

    def __init__(self, seed: int, size: int) -> None:
        self.words = _Words(seed)
        self.pool = list(range(size))
        self.drawn: list[int] = []

    def __len__(self) -> int:
        return len(self.pool)

    def prefix(self, n: int) -> list[int]:
        pool, drawn, size = self.pool, self.drawn, len(self.pool)
        if n > len(drawn):
            bounds = range(size - len(drawn), size - n, -1)
            for remaining, j in zip(bounds, self.words.below(bounds)):
                drawn.append(pool[j])
                pool[j] = pool[remaining - 1]
        return drawn[:n]


class _Spare:
    """Slots left for symbols first seen in the goal or history (e.g. created rows), as tokens."""

    def __init__(self, kind: str, perm: _Permutation, used: int) -> None:
        self.kind, self.perm, self.used = kind, perm, used

    def __len__(self) -> int:
        return len(self.perm) - self.used

    def __getitem__(self, k: int) -> str:
        return f"{self.kind}{self.perm.prefix(self.used + k + 1)[-1]}"


def _shuffled(seed: int, n: int) -> list[int]:
    """``x = list(range(n)); random.Random(seed).shuffle(x)``, bit for bit."""
    order = list(range(n))
    for i, j in zip(range(n - 1, 0, -1), _Words(seed).below(range(n, 1, -1))):
        order[i], order[j] = order[j], order[i]
    return order


_SLOT_CACHE: dict[tuple[int, int], tuple[Runtime, _Slots]] = {}


def _slots(rt: Runtime, episode_seed: int) -> _Slots:
    hit = _SLOT_CACHE.get((id(rt), episode_seed))
    if hit is not None and hit[0] is rt:
        return hit[1]
    if len(_SLOT_CACHE) >= 1024:
        del _SLOT_CACHE[next(iter(_SLOT_CACHE))]
    slots = _Slots(rt, episode_seed)
    _SLOT_CACHE[(id(rt), episode_seed)] = (rt, slots)
    return slots


class _View:
    """Builds one compact view; holds the per-call symbol additions (new entities and strings)."""

    def __init__(self, rt: Runtime, slots: _Slots) -> None:
        self.rt, self.slots = rt, slots
        self.entities: dict[tuple[str, int], str] = {}
        self.strings: dict[str, str] = {}
        self.values: list[list[str]] = []
        self.typed: list[tuple[str, Any]] = []
        """Internal (type, payload) per entry of ``values``, to build candidate calls."""
        self.index: dict[tuple[str, str], int] = {}
        self.writable: set[int] = set()
        """Entries a write or filter argument may copy: goal values, status values, derived deltas."""
        self.observed: dict[tuple[str, str], dict[str, Any]] = {}
        """The latest row seen in the history per (table, natural key)."""

    def fork(self) -> _View:
        """An independent copy: its containers are copied, their entries (never modified) shared."""
        other = copy.copy(self)
        other.entities, other.strings, other.index = dict(self.entities), dict(self.strings), dict(self.index)
        other.values, other.typed = list(self.values), list(self.typed)
        other.writable, other.observed = set(self.writable), dict(self.observed)
        return other

    # symbols ---------------------------------------------------------------------------------

    def e(self, table: str, ident: int) -> str:
        slot = self.slots.entity.get((table, ident)) or self.entities.get((table, ident))
        if slot is None:
            pool = self.slots.extra_entity
            slot = pool[len(self.entities)] if len(self.entities) < len(pool) else f"E+{len(self.entities)}"
            self.entities[(table, ident)] = slot
        return slot

    def key(self, text: str) -> str:
        slot = self.slots.value.get(text) or self.strings.get(text)
        if slot is None:
            pool = self.slots.extra_value
            slot = pool[len(self.strings)] if len(self.strings) < len(pool) else f"V+{len(self.strings)}"
            self.strings[text] = slot
        return slot

    def val(self, table: str, field: str, value: Any) -> str:
        """The token of an internal field value."""
        kind = self.rt.tables[table].by_sym[field].type
        if kind in ("enum", "status"):
            return self.slots.value[(table, field, value)]
        if kind == "ref":
            return "null" if value is None else self.e(self.rt.tables[table].by_sym[field].target, value)
        if kind == "key":
            return self.key(value)
        if kind == "flag":
            return "true" if value else "false"
        return f"#{value}"

    def f(self, table: str, field: str) -> str:
        return self.slots.field[(table, field)]

    def t(self, table: str) -> str:
        return self.slots.table[table]

    # pointer values ----------------------------------------------------------------------------

    def offer(self, kind: str, payload: Any, token: str, type_token: str) -> int:
        if (token, type_token) not in self.index:
            self.index[(token, type_token)] = len(self.values)
            self.values.append([token, type_token])
            self.typed.append((kind, payload))
        return self.index[(token, type_token)]

    def offer_value(self, table: str, field: str, value: Any) -> None:
        kind = self.rt.tables[table].by_sym[field].type
        if kind == "int":
            self.offer("int", value, f"#{value}", "int")
        elif kind in ("enum", "status"):
            self.offer("enum", (table, field, value), self.val(table, field, value), f"enum:{self.f(table, field)}")
        elif kind == "key":
            self.offer("key", (table, value), self.key(value), f"key:{self.t(table)}")
        elif kind == "ref" and value is not None:
            target = self.rt.tables[table].by_sym[field].target
            self.offer("entity", (target, value), self.e(target, value), f"ent:{self.t(target)}")


def _goal_tokens(view: _View, goal: Goal) -> list[list[str]]:
    clauses = []
    for c in goal.checks:
        t, key = c["table"], c["key"]
        view.offer_value(t, "f0", key)
        head = [view.t(t), view.key(key)]
        if c["op"] in ("row_exists", "row_absent"):
            clauses.append([c["op"].split("_")[1], *head])
        elif c["op"] == "field_eq":
            view.offer_value(t, c["field"], c["value"])
            clauses.append(["eq", *head, view.f(t, c["field"]), view.val(t, c["field"], c["value"])])
        else:
            target = view.rt.tables[t].by_sym[c["field"]].target
            if c["value"] is not None:
                view.offer_value(target, "f0", c["value"])
            clauses.append(["ref", *head, view.f(t, c["field"]),
                            "null" if c["value"] is None else view.key(c["value"])])
    q = goal.query
    if q is not None:
        t = q["table"]
        if q["kind"] in ("field", "hop"):
            view.offer_value(t, "f0", q["key"])
            path = [view.f(t, q["path"][0])]
            if q["kind"] == "hop":
                path.append(view.f(view.rt.tables[t].by_sym[q["path"][0]].target, q["path"][1]))
            clauses.append(["ask", view.t(t), view.key(q["key"]), *path])
        else:
            view.offer_value(t, q["field"], q["value"])
            op = q.get("op", "eq")
            clause = [f"ask_{q['kind']}", view.t(t), view.f(t, q["field"]), op, view.val(t, q["field"], q["value"])]
            if q.get("total"):
                clause.append(view.f(t, q["total"]))
            clauses.append(clause)
    return clauses


def _descriptor_template(rt: Runtime, tool: Tool) -> list[str | tuple[str, str, Any]]:
    semantics = {"update": "sem:add" if rt.update_mode == "increment" else "sem:set",
                 "delete": "sem:soft" if rt.soft_delete else ("sem:cascade" if rt.cascade else "sem:hard"),
                 "transition": "sem:guard" if rt.guard else "sem:free"}.get(tool.prim, "sem:-")
    template: list[str | tuple[str, str, Any]] = [("", "T", tool.table), "W" if tool.writes else "R",
                                                  f"ret:{RETURN_KIND[tool.prim]}", semantics]
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


def _parse_row(rt: Runtime, table: str, obj: Any) -> tuple[int, dict[str, Any]] | None:
    if not isinstance(obj, Mapping):
        return None
    ident = rt.parse_id(table, obj.get(rt.id_name))
    if ident is None:
        return None
    row = {}
    for f in rt.tables[table].fields:
        value = obj.get(f.name)
        if f.type in ("enum", "status"):
            value = f.words.index(value) if value in f.words else None
        elif f.type == "ref":
            value = None if value is None else rt.parse_id(f.target, value)
        row[f.sym] = value
    return ident, row


def _history_step(view: _View, call: Any, observation: Mapping[str, Any], tool_index: dict[str, int]
                  ) -> list[list[str]]:
    """``[call tokens, observation pairs...]`` for one past step; registers visible values."""
    rt = view.rt
    name = call.get("name") if isinstance(call, Mapping) else None
    if name == FINISH:
        return [[f"A{tool_index[FINISH]}"], ["done", "-"]]
    try:
        tool, args = rt.decode_call(call)
    except CallError:
        return [["A?"], ["err", "-"]]
    t = tool.table
    call_tokens = [f"A{tool_index[tool.sym]}"]
    for p in tool.params:
        if p.sym not in args:
            call_tokens.append("-")
        elif p.kind == "id":
            call_tokens.append(view.e(p.table, args[p.sym]))
        elif p.kind == "sel":
            call_tokens.append(view.f(t, args[p.sym]))
        elif p.kind == "op":
            call_tokens.append(args[p.sym])
        elif p.kind == "val":
            call_tokens.append(view.val(t, args["field"], args[p.sym]))
        elif p.kind == "key":
            call_tokens.append(view.key(args[p.sym]))
        else:
            call_tokens.append(view.val(t, p.field, args[p.sym]))
    if "error" in observation:
        return [call_tokens, ["err", "-"]]
    result = observation.get("result")
    pairs: list[list[str]] = []
    kind = RETURN_KIND[tool.prim]

    def entity(text: Any, table: str = t) -> None:
        ident = rt.parse_id(table, text)
        if ident is not None:
            view.offer("entity", (table, ident), view.e(table, ident), f"ent:{view.t(table)}")
            pairs.append(["id", view.e(table, ident)])

    if kind == "id" and isinstance(result, Mapping):
        entity(result.get(rt.id_name))
    elif kind == "ack" and isinstance(result, Mapping):
        entity(result.get(rt.id_name))
        pairs.append(["deleted", "true"])
    elif kind == "row":
        parsed = _parse_row(rt, t, result)
        if parsed is not None:
            ident, row = parsed
            view.observed[(t, row["f0"])] = row
            entity(result[rt.id_name])
            for f in rt.tables[t].fields:
                if row[f.sym] is not None or f.type == "ref":
                    view.offer_value(t, f.sym, row[f.sym])
                    pairs.append([view.f(t, f.sym), view.val(t, f.sym, row[f.sym])])
    elif kind in ("list", "ids") and isinstance(result, list):
        for item in result:
            if kind == "ids":
                entity(item)
            elif isinstance(item, Mapping):
                entity(item.get(rt.id_name))
                key = item.get(rt.tables[t].by_sym["f0"].name)
                if isinstance(key, str):
                    view.offer_value(t, "f0", key)
                    pairs.append([view.f(t, "f0"), view.key(key)])
        view.offer("int", len(result), f"#{len(result)}", "int")
        pairs.append(["count", f"#{len(result)}"])
    elif kind == "agg" and isinstance(result, Mapping):
        for name in ("count", "sum"):
            if isinstance(result.get(name), int):
                view.offer("int", result[name], f"#{result[name]}", "int")
                pairs.append([name, f"#{result[name]}"])
    return [call_tokens, *pairs]


class _Pointers:
    """Pointers into ``values`` grouped by what a parameter can take, plus the ones a ``finish``
    answer can take. Entries of ``values`` are only ever appended, so each is filed once."""

    def __init__(self) -> None:
        self.groups: dict[tuple, list[int]] = {}
        self.answers: list[int] = []
        self.grown: set[tuple] = set()
        """Groups that gained entries since the caller last cleared this set."""
        self.filed = 0

    def fork(self) -> _Pointers:
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
class _ToolPlan:
    """How one tool's candidates are enumerated.

    ``variants``: the parameter subsets a candidate fills (the required ones, plus each optional
    one alone), each as (option source per filled parameter, position of each tool parameter in
    it, or None when the subset is all parameters in order, and the pointer group of each filled
    parameter when every one draws from a group alone, or None). ``groups``: every pointer group
    the options are drawn from; the candidates change only when one of them grows."""

    variants: tuple[tuple[tuple[tuple, ...], tuple[int, ...] | None, tuple[tuple, ...] | None], ...]
    groups: tuple[tuple, ...]

    @classmethod
    def of(cls, rt: Runtime, tool: Tool) -> _ToolPlan:
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

    def candidates(self, rt: Runtime, table: str, position: int, typed: list[tuple[str, Any]],
                   groups: dict[tuple, list[int]]) -> list[list[int]]:
        rows: list[list[int]] = []
        for sources, positions, keys in self.variants:
            options: Iterable[tuple[int, ...]] = (
                itertools.product(*[groups.get(key, ()) for key in keys]) if keys is not None
                else _options(rt, table, sources, typed, groups))
            if positions is None:
                rows += [[position, *ptrs] for ptrs in options]
            else:
                rows += [[position, *(ptrs[s] if s >= 0 else -1 for s in positions)] for ptrs in options]
        return rows


def _options(rt: Runtime, table: str, sources: tuple[tuple, ...], typed: list[tuple[str, Any]],
             groups: dict[tuple, list[int]]) -> list[tuple[int, ...]]:
    """Every pointer tuple for one parameter subset with a ``sel`` (a ``val`` follows the field
    its ``sel`` chose); a subset of plain groups is their product (``_ToolPlan.candidates``)."""
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
            partial = [(ptrs + (k,), field) for ptrs, field in partial
                       for k in groups.get(_value_group(rt, table, field), ())]
    return [ptrs for ptrs, _ in partial]


class _Layout:
    """What every episode of one runtime shares, with slot tokens left as templates: the symbol
    orders behind the slot permutations, the values every view starts with (ops, field
    selectors, state-machine values), the tool descriptors and the candidate plans."""

    def __init__(self, rt: Runtime) -> None:
        tables = self.tables = list(rt.tables)
        self.fields = [(t, f.sym) for t in tables for f in rt.tables[t].fields]
        self.entities = [(t, i) for t in tables for i in rt.initial[t]]
        self.values: list[Any] = [row["f0"] for t in tables for row in rt.initial[t].values()]
        self.values += [(t, f.sym, k) for t in tables for f in rt.tables[t].of_type("enum", "status")
                        for k in range(f.size)]
        base: list[tuple[str, Any, str | tuple, str | tuple]] = [("op", op, op, "op") for op in OPS]
        base += [("field", (t, f.sym), ("", "F", (t, f.sym)), "field")
                 for t, table in rt.tables.items() for f in table.of_type("int", "enum", "status")]
        self.writable = set(range(len(base), len(base) + rt.tables[rt.machine_table].by_sym[rt.status_field].size))
        machine, status = rt.machine_table, rt.status_field
        base += [("enum", (machine, status, k), ("", "V", (machine, status, k)), ("enum:", "F", (machine, status)))
                 for k in range(rt.tables[machine].by_sym[status].size)]
        self.typed = [(kind, payload) for kind, payload, _, _ in base]
        self.base_values = [part for _, _, token, type_token in base for part in (token, type_token)]
        self.descriptors = {tool.sym: _descriptor_template(rt, tool) for tool in rt.tools}
        self.plans = {tool.sym: _ToolPlan.of(rt, tool) for tool in rt.tools}


_LAYOUT_CACHE: dict[int, tuple[Runtime, _Layout]] = {}


def _layout(rt: Runtime) -> _Layout:
    hit = _LAYOUT_CACHE.get(id(rt))
    if hit is not None and hit[0] is rt:
        return hit[1]
    if len(_LAYOUT_CACHE) >= 1024:
        del _LAYOUT_CACHE[next(iter(_LAYOUT_CACHE))]
    layout = _Layout(rt)
    _LAYOUT_CACHE[id(rt)] = (rt, layout)
    return layout


FINISH_DESCRIPTOR = ["-", "R", "ret:-", "sem:end", "answer", "-", "opt"]


class CompactEpisode:
    """The compact view of one episode, kept up to date one step at a time.

    ``render_compact`` re-reads the whole history at every decision; a policy that acts step by
    step pushes each (call, observation) here instead and pays only for what changed: a tool's
    candidates are re-enumerated only when a pointer group they draw from grew, and a candidate's
    surface call is built only when asked for (``call(k)``). ``view()`` is exactly
    ``render_compact(spec, task, history, episode_seed)``. Returned lists are shared with the
    episode's caches: read them, never modify them."""

    def __init__(self, spec: Spec, task: Mapping[str, Any], episode_seed: int) -> None:
        rt = compile_spec(spec)
        layout = _layout(rt)
        slots = _slots(rt, episode_seed)
        view = _View(rt, slots)
        flat = slots.fill(layout.base_values)  # the ops, field selectors and state-machine values
        view.values = [flat[k:k + 2] for k in range(0, len(flat), 2)]
        view.typed = list(layout.typed)
        view.index = {(token, type_token): k for k, (token, type_token) in enumerate(view.values)}
        view.writable = set(layout.writable)  # a guarded transition may pass through states the goal never names
        self.rt, self.state, self.plans = rt, view, layout.plans
        self.ordered: list[Tool | None] = [rt.tools[k] if k < len(rt.tools) else None for k in slots.tool_order]
        self.tool_index = {(tool.sym if tool else FINISH): k for k, tool in enumerate(self.ordered)}
        self.watchers: dict[tuple, list[int]] = {}
        """Pointer group -> the positions of the tools whose candidates draw from it."""
        for position, tool in enumerate(self.ordered):
            for group in self.plans[tool.sym].groups if tool else ():
                self.watchers.setdefault(group, []).append(position)
        self.parsed_goal = Goal.parse(task["goal"])
        self.goal = _goal_tokens(view, self.parsed_goal)
        view.writable.update(range(len(view.values)))
        self.tools = [slots.fill(layout.descriptors[tool.sym]) if tool else list(FINISH_DESCRIPTOR)
                      for tool in self.ordered]
        self.steps: list[list[list[str]]] = []
        self.pointers = _Pointers()
        self.blocks: list[list[list[int]] | None] = [None] * len(self.ordered)
        """Per tool position, its candidate rows; a block is replaced, never modified, when it changes
        (and only then: the same object means the same rows)."""
        self._answers: list[int] | None = None
        self._derived: tuple[int, ...] = ()
        self._current: tuple[list[list[str]], list[tuple[str, Any]], list[list[int]]] | None = None

    def fork(self) -> CompactEpisode:
        """An independent copy at this decision point: an episode branching into several
        continuations (the rollouts of one GRPO group) pays for its shared prefix once."""
        other = copy.copy(self)
        other.state, other.pointers = self.state.fork(), self.pointers.fork()
        other.steps, other.blocks = list(self.steps), list(self.blocks)
        return other

    def push(self, call: Mapping[str, Any], observation: Mapping[str, Any]) -> None:
        """Add one executed step (the call as sent and the observation it returned)."""
        self.steps.append(_history_step(self.state, call, observation, self.tool_index))
        self._current = None

    def _deltas(self) -> list[tuple[int, str]]:
        """Increment semantics: (goal value - observed value, token) per int goal check on a row read."""
        if self.rt.update_mode != "increment":
            return []
        out = []
        for c in self.parsed_goal.checks:
            row = self.state.observed.get((c["table"], c["key"]))
            if c["op"] == "field_eq" and c.get("type") == "int" and row is not None:
                delta = c["value"] - row[c["field"]]
                out.append((delta, f"#{delta}"))
        return out

    def current(self) -> tuple[list[list[str]], list[tuple[str, Any]], list[list[int]]]:
        """(values, internal typed values, candidates) at this decision point."""
        if self._current is not None:
            return self._current
        view, pointers = self.state, self.pointers
        pointers.file(view.typed, view.writable)
        grown, pointers.grown = pointers.grown, set()
        values, typed, groups, answers = view.values, view.typed, pointers.groups, pointers.answers
        deltas = self._deltas()
        derived: tuple[int, ...] = ()
        if deltas:  # derived values exist only in this view: extend copies, never the base
            values, typed, answers = list(values), list(typed), list(answers)
            ints = list(groups.get(("int",), []))
            for delta, token in deltas:
                k = view.index.get((token, "int"))
                if k is None:
                    k = next((j for j in range(len(view.values), len(values)) if values[j][0] == token), None)
                if k is None:
                    k = len(values)
                    values.append([token, "int"])
                    typed.append(("int", delta))
                    answers.append(k)
                if k not in ints:
                    bisect.insort(ints, k)
                    derived += (k,)
            groups = {**groups, ("int",): ints}
        if derived != self._derived:
            grown.add(("int",))
            self._derived = derived
        if self._answers is None:  # the first view: every tool's candidates
            stale: set[int] | range = range(len(self.ordered))
        else:
            stale = {position for group in grown for position in self.watchers.get(group, ())}
        blocks = self.blocks
        for position in stale:
            tool = self.ordered[position]
            if tool is not None:
                rows = self.plans[tool.sym].candidates(self.rt, tool.table, position, typed, groups)
                if rows != blocks[position]:  # an unchanged block stays the same object (see ``blocks``)
                    blocks[position] = rows
        if answers != self._answers:  # finish: no answer, or any visible value
            self._answers = list(answers)
            position = self.tool_index[FINISH]
            self.blocks[position] = [[position, -1]] + [[position, k] for k in answers]
        self._current = values, typed, list(itertools.chain.from_iterable(self.blocks))
        return self._current

    def candidates(self) -> list[list[int]]:
        return self.current()[2]

    def call(self, k: int) -> dict[str, Any]:
        """The surface call that executes candidate ``k``."""
        _, typed, candidates = self.current()
        position, *pointers = candidates[k]
        tool = self.ordered[position]
        if tool is None:
            if pointers[0] < 0:
                return {"name": FINISH, "arguments": {}}
            kind, payload = typed[pointers[0]]
            text = (str(payload) if kind == "int" else payload[1] if kind == "key"
                    else self.rt.tables[payload[0]].by_sym[payload[1]].words[payload[2]])
            return {"name": FINISH, "arguments": {"answer": text}}
        args = {}
        for p, k_value in zip(tool.params, pointers):
            if k_value >= 0:
                kind, payload = typed[k_value]
                args[p.sym] = payload[-1] if kind in ("entity", "key", "field", "enum") else payload
        return self.rt.encode_call(tool, args)

    def view(self, last_k: int = HISTORY_K) -> dict[str, Any]:
        values, _, candidates = self.current()
        return {"goal": self.goal, "tools": self.tools, "history": self.steps[-last_k:] if last_k else [],
                "values": values, "candidates": candidates, "calls": [self.call(k) for k in range(len(candidates))]}


def render_compact(spec: Spec, task: Mapping[str, Any], history: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]],
                   episode_seed: int, last_k: int = HISTORY_K) -> dict[str, Any]:
    """The anonymised view of one decision point (``history``: the (call, observation) pairs so far).

    Returns plain lists:

    * ``goal``: clauses, e.g. ``["eq", T, V(key), F, "#18"]``, ``["absent", T, V]``, or for a read
      task the question without its answer, e.g. ``["ask", T, V(key), F]``;
    * ``tools``: per tool, in an episode-shuffled order with ``finish`` among them:
      ``[T, "R"|"W", "ret:<kind>", "sem:<declared semantics>", (param kind, slot, "req"|"opt")...]``.
      The declared-semantics token keeps semantics-only (S1) variants observable; the primitive
      itself is not shown;
    * ``history``: the last ``last_k`` steps, each ``[call tokens, (slot, value) pairs...]``;
    * ``values``: ``[token, type]`` pointer targets visible in the goal, the history, the schema
      (field selectors, ops, state-machine values) and, under increment semantics, goal minus
      observed value;
    * ``candidates``: ``[tool index, pointer into values or -1 per parameter]``;
    * ``calls``: the surface call that executes each candidate (same order).
    """
    episode = CompactEpisode(spec, task, episode_seed)
    for call, observation in history:
        episode.push(call, observation)
    return episode.view(last_k)
