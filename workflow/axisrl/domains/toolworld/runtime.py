"""The compiled form of a spec: executes tool calls and checks goals on plain-dict states.

Two layers. The *internal* layer works on symbols and integer ids: a state is
``{table_sym: {id: row}}`` with ``row = {field_sym: value}`` (enum values as indices, refs as
target ids). Rows are never mutated in place (a write replaces the row dict), so copying a state
is a shallow copy of its tables; task generation and the signature probe run here, name-free.
The *surface* layer translates the world's names, words and ID strings to and from that layer;
the env, the renderers and the reference solutions speak it. The tools' signatures (parameters
and surface names) are compiled in ``tools``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from axisrl.domains.toolworld.model import (
    OPS,
    Call,
    CallError,
    Field,
    Goal,
    Param,
    State,
    Table,
    Tool,
    answer_matches,
    call_memo_key,
    parse_arguments,
)
from axisrl.domains.toolworld.tools import compile_tool
from axisrl.domains.toolworld.world import FLAG_FIELD, Spec


class Runtime:
    """A spec compiled for execution. Treat it (and the spec it came from) as immutable."""

    def __init__(self, spec: Spec) -> None:
        lex = spec["lexicon"]
        fmt = spec["id_format"]
        self.spec = spec
        self.id_name: str = lex["param:id"]
        self.max_steps: int = spec["max_steps"]
        self.update_mode: str = spec["semantics"]["update_mode"]
        self.soft_delete: bool = spec["semantics"]["delete_mode"] == "soft"
        self.guard: bool = spec["semantics"]["guard"]
        self.cascade: bool = spec["semantics"]["cascade"]
        self.collateral: bool = spec["verifier"]["collateral"]
        self.answer_mode: str = spec["verifier"]["answer_mode"]
        self.radix: int = fmt["radix"]
        digits = f"0{fmt['width']}{'d' if fmt['radix'] == 10 else ('X' if fmt['upper'] else 'x')}"

        self.tables: dict[str, Table] = {}
        for t in spec["tables"]:
            sym = t["sym"]
            fields = tuple(
                Field(
                    f["sym"],
                    f["type"],
                    lex[f"{sym}.{f['sym']}"],
                    f.get("size", 0),
                    f.get("target"),
                    tuple(lex[f"{sym}.{f['sym']}.v{k}"] for k in range(f.get("size", 0))),
                )
                for f in t["fields"]
            )
            self.tables[sym] = Table(
                sym, lex[sym], fields, {f.sym: f for f in fields}, fmt["prefix"][sym] + fmt["separator"], digits
            )
        machine = spec["machine"]
        self.machine_table: str = machine["table"]
        self.status_field: str = machine["field"]
        self.initial_status: int = machine["initial"]
        self.edges: frozenset[tuple[int, int]] = frozenset((a, b) for a, b in machine["edges"])
        self.referrers: dict[str, list[tuple[str, str]]] = {t: [] for t in self.tables}
        for table in self.tables.values():
            for f in table.of_type("ref"):
                self.referrers[f.target].append((table.sym, f.sym))

        self.tools: list[Tool] = [
            compile_tool(tool, self.tables[tool["table"]], lex, self.status_field) for tool in spec["tools"]
        ]
        self.tool_by_name: dict[str, Tool] = {tool.name: tool for tool in self.tools}
        self.tool_by_sym: dict[str, Tool] = {tool.sym: tool for tool in self.tools}
        self.initial: State = {t: {i: row for i, row in rows} for t, rows in spec["state"].items()}
        self._ids: dict[tuple[str, str], int | None] = {}
        self._calls: dict[tuple, Call] = {}
        """Memos of ``parse_id`` and of ``decode_call``'s successes: an episode's calls and ids
        repeat across steps, forks and the rollouts of a group, and each is decoded twice (by
        the env and by a view of the episode's history)."""

    def vocabulary(self) -> list[str]:
        """Every surface name an agent sees: tables, fields, enum values, tools, parameters."""
        words = {self.id_name}
        for table in self.tables.values():
            words.add(table.name)
            for f in table.fields:
                words.add(f.name)
                words.update(f.words)
        for tool in self.tools:
            words.add(tool.name)
            words.update(p.name for p in tool.params)
        return sorted(words)

    # ------------------------------------------------------------------------------- surface

    def render_id(self, table: str, ident: int) -> str:
        t = self.tables[table]
        return t.prefix + format(ident, t.id_format)

    def parse_id(self, table: str, text: Any) -> int | None:
        if not isinstance(text, str):
            return None
        key = (table, text)
        if key in self._ids:
            return self._ids[key]
        ident = self._parse_id(table, text)
        if len(self._ids) < _MEMO_SIZE:
            self._ids[key] = ident
        return ident

    def _parse_id(self, table: str, text: str) -> int | None:
        t = self.tables[table]
        if not text.startswith(t.prefix):
            return None
        try:
            ident = int(text[len(t.prefix) :], self.radix)
        except ValueError:
            return None
        return ident if ident >= 0 and self.render_id(table, ident) == text else None

    def surface_value(self, table: str, field_sym: str, value: Any) -> Any:
        f = self.tables[table].by_sym[field_sym]
        if f.type in ("enum", "status"):
            return f.words[value]
        if f.type == "ref":
            return None if value is None else self.render_id(f.target, value)
        return value

    def surface_row(self, table: str, ident: int, row: Mapping[str, Any]) -> dict[str, Any]:
        t = self.tables[table]
        out: dict[str, Any] = {self.id_name: self.render_id(table, ident)}
        for f in t.fields:
            value = row[f.sym]
            if f.type in ("enum", "status"):
                value = f.words[value]
            elif f.type == "ref" and value is not None:
                value = self.render_id(f.target, value)
            out[f.name] = value
        return out

    def encode_result(self, result: tuple) -> dict[str, Any]:
        """An internal result as the JSON observation an agent sees."""
        kind, table = result[0], result[1]
        if kind == "id":
            return {"result": {self.id_name: self.render_id(table, result[2])}}
        if kind == "row":
            return {"result": self.surface_row(table, result[2], result[3])}
        if kind == "list":
            key = self.tables[table].by_sym["f0"].name
            return {"result": [{self.id_name: self.render_id(table, i), key: k} for i, k in result[2]]}
        if kind == "ids":
            return {"result": [self.render_id(table, i) for i in result[2]]}
        if kind == "deleted":
            return {"result": {self.id_name: self.render_id(table, result[2]), "deleted": True}}
        count, total = result[2], result[3]
        return {"result": {"count": count} if total is None else {"count": count, "sum": total}}

    def encode_call(self, tool: Tool, args: Mapping[str, Any]) -> dict[str, Any]:
        """An internal call as the ``{"name", "arguments"}`` dict an agent would send."""
        out: dict[str, Any] = {}
        table = self.tables[tool.table]
        for p in tool.params:
            if p.sym not in args:
                continue
            value = args[p.sym]
            if p.kind == "id":
                value = self.render_id(p.table, value)
            elif p.kind == "enum":
                value = table.by_sym[p.field].words[value]
            elif p.kind == "sel":
                value = table.by_sym[value].name
            elif p.kind == "val":
                value = self.surface_value(tool.table, args["field"], value)
            out[p.name] = value
        return {"name": tool.name, "arguments": out}

    def decode_call(self, call: Any) -> Call:
        """Validate an agent's call and translate it to the internal layer (raises CallError).
        The returned args may be shared with earlier callers: read them, never modify them."""
        key = call_memo_key(call)
        decoded = self._calls.get(key) if key is not None else None
        if decoded is None:
            decoded = self._decode_call(call)
            if key is not None and len(self._calls) < _MEMO_SIZE:
                self._calls[key] = decoded
        return decoded

    def _decode_call(self, call: Any) -> Call:
        if not isinstance(call, Mapping) or not isinstance(call.get("name"), str):
            raise CallError("bad_call", 'a call must be {"name": <tool>, "arguments": {...}}')
        tool = self.tool_by_name.get(call["name"])
        if tool is None:
            raise CallError("unknown_tool", f"unknown tool {call['name']!r}")
        arguments = parse_arguments(call.get("arguments"))
        for name in arguments:
            if name not in tool.by_name:
                raise CallError("bad_argument", f"unknown argument {name!r} for {tool.name}")
        table = self.tables[tool.table]
        args: dict[str, Any] = {}
        for p in tool.params:
            if p.name not in arguments:
                if p.required:
                    raise CallError("bad_argument", f"missing argument {p.name!r} for {tool.name}")
                continue
            if p.kind != "val":
                args[p.sym] = self._decode_value(tool, table, p, arguments[p.name])
        for p in tool.params:
            if p.kind == "val":
                selected = table.by_sym[args["field"]]
                args[p.sym] = self._decode_value(
                    tool,
                    table,
                    Param(p.sym, p.name, "int" if selected.type == "int" else "enum", True, field=selected.sym),
                    arguments[p.name],
                )
        return tool, args

    def _decode_value(self, tool: Tool, table: Table, p: Param, value: Any) -> Any:
        def bad(expected: str) -> CallError:
            return CallError("bad_argument", f"argument {p.name!r} of {tool.name} must be {expected}, got {value!r}")

        if p.kind == "id":
            ident = self.parse_id(p.table, value)
            if ident is None:
                raise bad(f"an id of a {self.tables[p.table].name} such as {self.render_id(p.table, 7)!r}")
            return ident
        if p.kind == "key":
            if not isinstance(value, str) or not value.strip():
                raise bad("a non-empty string")
            return value
        if p.kind == "int":
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            if not isinstance(value, int) or isinstance(value, bool):
                raise bad("an integer")
            return value
        if p.kind == "enum":
            words = table.by_sym[p.field].words
            if value not in words:
                raise bad(f"one of {list(words)}")
            return words.index(value)
        if p.kind == "sel":
            names = {table.by_sym[c].name: c for c in p.choices}
            if value not in names:
                raise bad(f"one of {sorted(names)}")
            return names[value]
        if value not in OPS:
            raise bad(f"one of {list(OPS)}")
        return value

    # ------------------------------------------------------------------------------- internal

    def _not_found(self, table: str, ident: int) -> CallError:
        return CallError("not_found", f"no {self.tables[table].name} with id {self.render_id(table, ident)!r}")

    def _live(self, state: State, table: str, ident: int) -> dict[str, Any]:
        row = state[table].get(ident)
        if row is None or row.get(FLAG_FIELD):
            raise self._not_found(table, ident)
        return row

    def execute(self, state: State, tool: Tool, args: Mapping[str, Any]) -> tuple:
        """Run one internal call, mutating ``state``'s table dicts (never its rows); raises CallError.

        Results: ("id", t, id) | ("row", t, id, row) | ("list", t, [(id, key)]) | ("ids", t, [id])
        | ("deleted", t, id) | ("agg", t, count, sum or None).
        """
        prim, t = tool.prim, tool.table
        rows = state[t]
        if prim == "lookup":
            key = args["key"]
            for i, row in rows.items():
                if row["f0"] == key and not row.get(FLAG_FIELD):
                    return ("id", t, i)
            raise CallError("not_found", f"no {self.tables[t].name} with {self.tables[t].by_sym['f0'].name} {key!r}")
        if prim == "get":
            row = rows.get(args["id"])
            if row is None:
                raise self._not_found(t, args["id"])
            return ("row", t, args["id"], row)
        if prim == "list":
            return ("list", t, [(i, row["f0"]) for i, row in rows.items() if not row.get(FLAG_FIELD)])
        if prim == "filter":
            f, op, value = args["field"], args["op"], args["value"]
            if op != "eq" and self.tables[t].by_sym[f].type != "int":
                raise CallError("bad_argument", f"{op!r} needs an integer field")
            if op == "eq":
                hits = [i for i, row in rows.items() if row[f] == value and not row.get(FLAG_FIELD)]
            elif op == "lt":
                hits = [i for i, row in rows.items() if row[f] < value and not row.get(FLAG_FIELD)]
            else:
                hits = [i for i, row in rows.items() if row[f] > value and not row.get(FLAG_FIELD)]
            return ("ids", t, hits)
        if prim == "aggregate":
            f, value, total = args["field"], args["value"], args.get("total")
            hits = [row for row in rows.values() if row[f] == value and not row.get(FLAG_FIELD)]
            return ("agg", t, len(hits), None if total is None else sum(row[total] for row in hits))
        if prim == "create":
            return self._create(rows, t, args)
        if prim == "update":
            row = self._live(state, t, args["id"])
            new = dict(row)
            changed = False
            for f in self.tables[t].of_type("int", "enum"):
                if f.sym in args:
                    changed = True
                    if f.type == "int" and self.update_mode == "increment":
                        new[f.sym] = row[f.sym] + args[f.sym]
                    else:
                        new[f.sym] = args[f.sym]
            if not changed:
                raise CallError("bad_argument", f"{tool.name} needs at least one field to change")
            rows[args["id"]] = new
            return ("row", t, args["id"], new)
        if prim == "delete":
            return self._delete(state, t, args["id"])
        if prim == "link":
            row = self._live(state, t, args["id"])
            ref = self.tables[t].by_sym[tool.field]
            self._live(state, ref.target, args[ref.sym])
            new = {**row, ref.sym: args[ref.sym]}
            rows[args["id"]] = new
            return ("row", t, args["id"], new)
        # transition
        row = self._live(state, t, args["id"])
        current, target = row[self.status_field], args["to"]
        if self.guard and (current, target) not in self.edges:
            words = self.tables[t].by_sym[self.status_field].words
            raise CallError("guard", f"{self.tables[t].name} cannot move from {words[current]!r} to {words[target]!r}")
        new = {**row, self.status_field: target}
        rows[args["id"]] = new
        return ("row", t, args["id"], new)

    def _create(self, rows: dict[int, dict[str, Any]], t: str, args: Mapping[str, Any]) -> tuple:
        table = self.tables[t]
        key = args["key"]
        if any(row["f0"] == key for row in rows.values()):
            raise CallError("duplicate", f"a {table.name} with {table.by_sym['f0'].name} {key!r} already exists")
        row: dict[str, Any] = {}
        for f in table.fields:
            if f.type == "key":
                row[f.sym] = key
            elif f.type in ("int", "enum"):
                row[f.sym] = args[f.sym]
            elif f.type == "status":
                row[f.sym] = self.initial_status
            elif f.type == "flag":
                row[f.sym] = False
            else:
                row[f.sym] = None
        ident = max(rows, default=0) + 1
        rows[ident] = row
        return ("id", t, ident)

    def _delete(self, state: State, t: str, ident: int) -> tuple:
        row = self._live(state, t, ident)
        if self.soft_delete:
            state[t][ident] = {**row, FLAG_FIELD: True}
            return ("deleted", t, ident)
        del state[t][ident]
        pending = [(t, ident)]
        while pending:
            target, gone = pending.pop()
            for source, ref in self.referrers[target]:
                rows = state[source]
                for i in [i for i, r in rows.items() if r[ref] == gone]:
                    if i not in rows:
                        continue
                    if self.cascade:
                        del rows[i]
                        pending.append((source, i))
                    else:
                        rows[i] = {**rows[i], ref: None}
        return ("deleted", t, ident)

    # ------------------------------------------------------------------------------- verify

    @staticmethod
    def find(state: State, table: str, key: str) -> tuple[int, dict[str, Any]] | None:
        for i, row in state[table].items():
            if row["f0"] == key:
                return i, row
        return None

    @staticmethod
    def changed_rows(initial: State, final: State) -> set[tuple[str, str]]:
        """Rows (table, natural key) that were created, deleted or changed."""
        changed = set()
        for t, before in initial.items():
            after = final[t]
            for i, row in before.items():
                other = after.get(i)
                if other is row:
                    continue
                if other is None:
                    changed.add((t, row["f0"]))
                elif other != row:
                    changed.update(((t, row["f0"]), (t, other["f0"])))
            for i, row in after.items():
                if i not in before:
                    changed.add((t, row["f0"]))
        return changed

    def check(
        self, goal: Goal, expected_answer: str | None, initial: State, final: State, answer: Any
    ) -> tuple[int, int]:
        """(subgoals met, subgoals total): every check, the collateral check if on, the answer."""
        met = 0
        for c in goal.checks:
            found = self.find(final, c["table"], c["key"])
            op = c["op"]
            if op == "row_absent":
                met += found is None
            elif found is None:
                continue
            elif op == "row_exists":
                met += 1
            elif op == "field_eq":
                met += found[1][c["field"]] == c["value"]
            else:  # ref_eq: the ref points at the row with natural key ``value`` (or is empty)
                ident = found[1][c["field"]]
                target = self.tables[c["table"]].by_sym[c["field"]].target
                row = None if ident is None else final[target].get(ident)
                met += (None if row is None else row["f0"]) == c["value"]
        total = len(goal.checks)
        if self.collateral:
            total += 1
            met += self.changed_rows(initial, final) <= goal.footprint
        if goal.answer_type is not None:
            total += 1
            met += expected_answer is not None and answer_matches(answer, expected_answer, self.answer_mode)
        return met, total


_MEMO_SIZE = 4096
"""Entries per memo of one runtime."""

_CACHE: dict[int, tuple[Spec, Runtime]] = {}
_CACHE_SIZE = 1024
"""Compiled specs kept: enough for every environment of a study pool, so none is recompiled per episode."""


def compile_spec(spec: Spec) -> Runtime:
    """A (cached) Runtime for ``spec``. The cache holds the spec object, so its id stays unique."""
    hit = _CACHE.get(id(spec))
    if hit is not None and hit[0] is spec:
        return hit[1]
    runtime = Runtime(spec)
    if len(_CACHE) >= _CACHE_SIZE:
        del _CACHE[next(iter(_CACHE))]
    _CACHE[id(spec)] = (spec, runtime)
    return runtime
