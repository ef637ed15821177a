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

import json
import random
import re
from collections.abc import Mapping, Sequence
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
        tables = list(rt.tables)
        fields = [(t, f.sym) for t in tables for f in rt.tables[t].fields]
        entities = [(t, i) for t in tables for i in rt.initial[t]]
        values: list[Any] = [row["f0"] for t in tables for row in rt.initial[t].values()]
        values += [(t, f.sym, k) for t in tables for f in rt.tables[t].of_type("enum", "status")
                   for k in range(f.size)]
        self.table = self._assign("T", tables, episode_seed)
        self.field = self._assign("F", fields, episode_seed)
        self.entity = self._assign("E", entities, episode_seed)
        self.value = self._assign("V", values, episode_seed)
        self.extra_entity = self._spare("E", len(entities), episode_seed)
        self.extra_value = self._spare("V", len(values), episode_seed)
        self.tool_order = list(range(len(rt.tools) + 1))
        random.Random(derive_seed(episode_seed, "compact", "tools")).shuffle(self.tool_order)

    @staticmethod
    def _permutation(kind: str, n: int, seed: int) -> list[int]:
        size = max(SLOT_SPACE[kind], n)
        return random.Random(derive_seed(seed, "compact", kind)).sample(range(size), size)

    def _assign(self, kind: str, symbols: list[Any], seed: int) -> dict[Any, str]:
        perm = self._permutation(kind, len(symbols) + 16, seed)
        return {s: f"{kind}{perm[k]}" for k, s in enumerate(symbols)}

    def _spare(self, kind: str, used: int, seed: int) -> list[str]:
        """Slots left for symbols first seen in the goal or history (e.g. created rows)."""
        perm = self._permutation(kind, used + 16, seed)
        return [f"{kind}{s}" for s in perm[used:]]


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


def _tool_descriptor(view: _View, tool: Tool) -> list[str]:
    rt = view.rt
    semantics = {"update": "sem:add" if rt.update_mode == "increment" else "sem:set",
                 "delete": "sem:soft" if rt.soft_delete else ("sem:cascade" if rt.cascade else "sem:hard"),
                 "transition": "sem:guard" if rt.guard else "sem:free"}.get(tool.prim, "sem:-")
    tokens = [view.t(tool.table), "W" if tool.writes else "R", f"ret:{RETURN_KIND[tool.prim]}", semantics]
    for p in tool.params:
        slot = "-"
        if p.kind == "id":
            slot = view.t(p.table)
        elif p.field is not None:
            slot = view.f(tool.table, p.field)
        elif p.kind == "key":
            slot = view.f(tool.table, "f0")
        tokens += [p.kind, slot, "req" if p.required else "opt"]
    return tokens


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


def _pointer_index(view: _View) -> dict[tuple, list[tuple[int, Any]]]:
    """Pointer targets grouped by what a parameter can take: (pointer, internal value) pairs."""
    index: dict[tuple, list[tuple[int, Any]]] = {}
    for k, (kind, payload) in enumerate(view.typed):
        if kind == "entity":
            group: tuple = ("id", payload[0])
        elif kind == "key":
            group = ("key", payload[0])
        elif kind == "op":
            group = ("op",)
        elif kind == "field":
            group = ("sel", payload[0])
        elif k not in view.writable:
            continue
        elif kind == "int":
            group = ("int",)
        else:
            group = ("enum", payload[0], payload[1])
        index.setdefault(group, []).append((k, payload[-1] if kind in ("entity", "key", "field", "enum")
                                            else payload))
    return index


def _choices(rt: Runtime, index: dict[tuple, list[tuple[int, Any]]], tool: Tool, p: Param,
             chosen: dict[str, Any]) -> list[tuple[int, Any]]:
    """(pointer, internal value) options for one parameter, given the parameters chosen so far."""
    t = tool.table
    if p.kind == "id":
        return index.get(("id", p.table), [])
    if p.kind == "key":
        return index.get(("key", t), [])
    if p.kind == "op":
        return index.get(("op",), [])
    if p.kind == "sel":
        return [(k, f) for k, f in index.get(("sel", t), []) if f in p.choices]
    field = chosen["field"] if p.kind == "val" else p.field
    if rt.tables[t].by_sym[field].type == "int":
        return index.get(("int",), [])
    return index.get(("enum", t, field), [])


def _candidates(view: _View, tools: list[Tool | None]) -> tuple[list[list[int]], list[dict[str, Any]]]:
    rt = view.rt
    pointers = _pointer_index(view)
    candidates: list[list[int]] = []
    calls: list[dict[str, Any]] = []
    for index, tool in enumerate(tools):
        if tool is None:  # finish: no answer, or any visible value
            candidates.append([index, -1])
            calls.append({"name": FINISH, "arguments": {}})
            for k, (kind, payload) in enumerate(view.typed):
                if kind in ("int", "key", "enum"):
                    text = (str(payload) if kind == "int" else payload[1] if kind == "key"
                            else rt.tables[payload[0]].by_sym[payload[1]].words[payload[2]])
                    candidates.append([index, k])
                    calls.append({"name": FINISH, "arguments": {"answer": text}})
            continue
        required = [p for p in tool.params if p.required]
        optional = [p for p in tool.params if not p.required]
        variants: list[list[Param]] = [required + [p] for p in optional]
        if tool.prim != "update" or tool.field is not None:
            variants.insert(0, required)
        for params in variants:
            partial: list[tuple[list[int], dict[str, Any]]] = [([], {})]
            for p in params:
                partial = [(ptrs + [k], {**args, p.sym: value}) for ptrs, args in partial
                           for k, value in _choices(rt, pointers, tool, p, args)]
            for ptrs, args in partial:
                pointer = dict(zip((p.sym for p in params), ptrs))
                candidates.append([index] + [pointer.get(p.sym, -1) for p in tool.params])
                calls.append(rt.encode_call(tool, args))
    return candidates, calls


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
    rt = compile_spec(spec)
    slots = _slots(rt, episode_seed)
    view = _View(rt, slots)
    for op in OPS:
        view.offer("op", op, op, "op")
    for t, table in rt.tables.items():
        for f in table.of_type("int", "enum", "status"):
            view.offer("field", (t, f.sym), view.f(t, f.sym), "field")
    status = rt.tables[rt.machine_table].by_sym[rt.status_field]
    for k in range(status.size):  # a guarded transition may pass through states the goal never names
        token = view.val(rt.machine_table, status.sym, k)
        view.writable.add(view.offer("enum", (rt.machine_table, status.sym, k), token,
                                     f"enum:{view.f(rt.machine_table, status.sym)}"))

    ordered: list[Tool | None] = [rt.tools[k] if k < len(rt.tools) else None for k in slots.tool_order]
    tool_index = {(tool.sym if tool else FINISH): k for k, tool in enumerate(ordered)}
    parsed_goal = Goal.parse(task["goal"])
    goal = _goal_tokens(view, parsed_goal)
    view.writable.update(range(len(view.values)))
    steps = [_history_step(view, call, obs, tool_index) for call, obs in history]
    if rt.update_mode == "increment":  # an increment must copy (goal value - observed value)
        for c in parsed_goal.checks:
            row = view.observed.get((c["table"], c["key"]))
            if c["op"] == "field_eq" and c.get("type") == "int" and row is not None:
                delta = c["value"] - row[c["field"]]
                view.writable.add(view.offer("int", delta, f"#{delta}", "int"))
    tools = [_tool_descriptor(view, tool) if tool else ["-", "R", "ret:-", "sem:end", "answer", "-", "opt"]
             for tool in ordered]
    candidates, calls = _candidates(view, ordered)
    return {"goal": goal, "tools": tools, "history": steps[-last_k:] if last_k else [], "values": view.values,
            "candidates": candidates, "calls": calls}
