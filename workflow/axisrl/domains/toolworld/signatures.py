"""Name-free environment signatures, the behavioural probe, and token sets for pool statistics.

Tables are put in a canonical order by a Weisfeiler-Lehman-style structural key (field types,
bound tools, then two rounds of the keys of ref targets and sources), ties broken by generation
index (which a re-skin keeps, so the order stays name-free); fields likewise within a table.
The key leaves out enum domain sizes, so extending an enum changes sig_schema but not sig_api.
Names are then replaced by role indices (``r1``, ``r1.2``) and each signature is the sha256 of
a canonical JSON form:

* ``sig_api``: the multiset of (primitive, table role, parameter types, return type);
* ``sig_schema``: tables, field types, refs, enum domain sizes, state-machine shape;
* ``sig_sem``: the (return, state diff) trace of a fixed probe script run on a canonical state,
  so it sees transition semantics that the API and schema cannot (overwrite vs increment, ...);
* ``sig_ver``: the verifier settings; ``skin``: lexicon + ID format, the only thing a re-skin changes.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from axisrl.domains.canon import short_hash
from axisrl.domains.toolworld.model import CallError, Field, Param, State, Table, Tool, copy_state
from axisrl.domains.toolworld.runtime import Runtime, compile_spec
from axisrl.domains.toolworld.world import Spec

RETURNS = {
    "lookup": "id",
    "get": "row",
    "list": "list",
    "filter": "ids",
    "aggregate": "agg",
    "create": "id",
    "update": "row",
    "delete": "ack",
    "link": "row",
    "transition": "row",
}
WL_ROUNDS = 2
PROBE_ROWS = 3


@dataclass(frozen=True, slots=True)
class Roles:
    """Canonical order: table symbols by role, and per table its field symbols by role."""

    tables: tuple[str, ...]
    fields: dict[str, tuple[str, ...]]
    status_labels: tuple[int, ...]
    """Status value index for each canonical status label (BFS order from the initial state)."""

    def table(self, sym: str) -> str:
        return f"r{self.tables.index(sym)}"

    def field(self, table: str, sym: str) -> str:
        return f"{self.table(table)}.{self.fields[table].index(sym)}"


def _param_type(rt: Runtime, roles: Roles, tool: Tool, param: Param) -> str:
    """A parameter's type in the API signature. Enum domain sizes belong to the schema, so
    extending an enum is a schema edit (S2), not an API edit (S3)."""
    optional = "" if param.required else "?"
    if param.kind == "id":
        return "id" if param.table == tool.table else f"id:{roles.table(param.table)}"
    if param.kind == "sel":
        table = rt.tables[tool.table]
        return f"sel[{','.join(sorted(table.by_sym[c].type for c in param.choices))}]{optional}"
    return param.kind + optional


def _field_type(field: Field) -> str:
    return f"{field.type}{field.size}" if field.size else field.type


def _status_labels(rt: Runtime) -> tuple[int, ...]:
    """Status values in BFS order from the initial state (unreachable ones last), a name-free order."""
    size = rt.tables[rt.machine_table].by_sym[rt.status_field].size
    order, queue = [rt.initial_status], deque([rt.initial_status])
    while queue:
        state = queue.popleft()
        for a, b in sorted(rt.edges):
            if a == state and b not in order:
                order.append(b)
                queue.append(b)
    return tuple(order + [s for s in range(size) if s not in order])


def canonical_roles(rt: Runtime) -> Roles:
    """The WL-style canonical order of tables and fields (see the module docstring)."""
    tools_by_table: dict[str, list[Tool]] = {t: [] for t in rt.tables}
    for tool in rt.tools:
        tools_by_table[tool.table].append(tool)

    def touches(table: Table, field: Field) -> list[str]:
        return sorted(
            tool.prim
            for tool in tools_by_table[table.sym]
            if tool.field == field.sym or (tool.prim == "transition" and field.type == "status")
        )

    def local_label(table: Table) -> str:
        fields = sorted([f.type, touches(table, f)] for f in table.fields)
        tools = sorted(
            [tool.prim, tool.field is None, [p.kind + ("" if p.required else "?") for p in tool.params]]
            for tool in tools_by_table[table.sym]
        )
        return short_hash([fields, tools, table.sym == rt.machine_table])

    labels = {t: local_label(table) for t, table in rt.tables.items()}
    for _ in range(WL_ROUNDS):
        labels = {
            t: short_hash(
                [
                    labels[t],
                    sorted(labels[f.target] for f in table.of_type("ref")),
                    sorted(labels[s] for s, _ in rt.referrers[t]),
                ]
            )
            for t, table in rt.tables.items()
        }
    position = {t: k for k, t in enumerate(rt.tables)}
    tables = tuple(sorted(rt.tables, key=lambda t: (labels[t], position[t])))

    fields = {}
    for t, table in rt.tables.items():

        def key(item: tuple[int, Field], table: Table = table) -> tuple:
            k, f = item
            target = tables.index(f.target) if f.target else -1
            return (f.type != "key", f.type, target, touches(table, f), k)

        fields[t] = tuple(f.sym for _, f in sorted(enumerate(table.fields), key=key))
    return Roles(tables, fields, _status_labels(rt))


def _api_entries(rt: Runtime, roles: Roles) -> list[list[Any]]:
    entries = []
    for tool in rt.tools:
        params = sorted(_param_type(rt, roles, tool, p) for p in tool.params)
        entries.append([tool.prim, roles.table(tool.table), params, RETURNS[tool.prim]])
    return sorted(entries)


def _schema(rt: Runtime, roles: Roles) -> dict[str, Any]:
    tables = []
    for t in roles.tables:
        table = rt.tables[t]
        tables.append(
            [
                [_field_type(f), roles.table(f.target) if f.target else None]
                for f in (table.by_sym[s] for s in roles.fields[t])
            ]
        )
    label = {s: k for k, s in enumerate(roles.status_labels)}
    return {
        "tables": tables,
        "machine": {
            "table": roles.table(rt.machine_table),
            "field": roles.field(rt.machine_table, rt.status_field),
            "size": len(roles.status_labels),
            "edges": sorted([label[a], label[b]] for a, b in rt.edges),
        },
    }


# ------------------------------------------------------------------------------------- probe


def _probe_state(rt: Runtime, roles: Roles) -> State:
    """``PROBE_ROWS`` rows per table with ids 1.., values fixed by role indices only."""
    state: State = {}
    for t in rt.tables:
        ti, table = roles.tables.index(t), rt.tables[t]
        rows = {}
        for n in range(PROBE_ROWS):
            row: dict[str, Any] = {}
            for j, sym in enumerate(roles.fields[t]):
                f = table.by_sym[sym]
                row[sym] = {
                    "key": f"k{ti}.{n}",
                    "int": 10 * (n + 1) + j,
                    "enum": (n + j) % f.size if f.size else 0,
                    "status": roles.status_labels[n % len(roles.status_labels)],
                    "ref": (n + 1) % PROBE_ROWS + 1,
                    "flag": False,
                }[f.type]
            rows[n + 1] = row
        state[t] = rows
    return state


def _probe_calls(rt: Runtime, roles: Roles, tool: Tool, state: State) -> list[dict[str, Any]]:
    """The fixed, canonical argument list for one tool."""
    table = rt.tables[tool.table]
    ordered = [table.by_sym[s] for s in roles.fields[tool.table]]
    row = state[tool.table].get(1) or {f.sym: 0 for f in ordered}
    if tool.prim == "lookup":
        return [{"key": f"k{roles.tables.index(tool.table)}.0"}, {"key": "missing"}]
    if tool.prim == "get":
        return [{"id": 1}, {"id": 99}]
    if tool.prim == "list":
        return [{}]
    if tool.prim == "filter":
        calls = []
        for f in ordered:
            if f.type in ("int", "enum", "status"):
                ops = ("eq", "lt", "gt") if f.type == "int" else ("eq",)
                calls += [{"field": f.sym, "op": op, "value": row[f.sym]} for op in ops]
        return calls
    if tool.prim == "aggregate":
        where = [f for f in ordered if f.type in ("int", "enum", "status")]
        calls = [{"field": f.sym, "value": row[f.sym]} for f in where]
        calls += [
            {"field": where[0].sym, "value": row[where[0].sym], "total": f.sym} for f in ordered if f.type == "int"
        ]
        return calls
    if tool.prim == "create":
        values = {f.sym: 7 if f.type == "int" else 0 for f in ordered if f.type in ("int", "enum")}
        return [{"key": "new", **values}, {"key": "new", **values}]
    if tool.prim == "update":
        calls: list[dict[str, Any]] = []
        for f in ordered:
            if f.type not in ("int", "enum") or (tool.field is not None and f.sym != tool.field):
                continue
            if f.type == "int":
                calls += [{"id": 2, f.sym: 5}, {"id": 2, f.sym: 5}]
            else:
                calls.append({"id": 2, f.sym: (state[tool.table].get(2, {}).get(f.sym, 0) + 1) % f.size})
        return calls + ([{"id": 2}] if tool.field is None else [])
    if tool.prim == "delete":
        return [{"id": 3}, {"id": 3}]
    if tool.prim == "link":
        return [{"id": 2, tool.field: 3}, {"id": 2, tool.field: 99}]
    return [{"id": 2, "to": s} for s in roles.status_labels]


def _canon_row(rt: Runtime, roles: Roles, table: str, row: dict[str, Any] | None) -> list[Any] | None:
    if row is None:
        return None
    label = {s: k for k, s in enumerate(roles.status_labels)}
    return [
        label[row[s]] if s == rt.status_field and table == rt.machine_table else row[s] for s in roles.fields[table]
    ]


def _canon_result(rt: Runtime, roles: Roles, result: tuple) -> list[Any]:
    kind, table = result[0], roles.table(result[1])
    if kind == "row":
        return [kind, table, result[2], _canon_row(rt, roles, result[1], result[3])]
    if kind == "list":
        return [kind, table, [i for i, _ in result[2]]]
    return [kind, table, *result[2:]]


def _diff(rt: Runtime, roles: Roles, before: State, after: State) -> list[Any]:
    out = []
    for t in roles.tables:
        old, new = before[t], after[t]
        for i in sorted(set(old) | set(new)):
            if old.get(i) != new.get(i):
                out.append(
                    [roles.table(t), i, _canon_row(rt, roles, t, old.get(i)), _canon_row(rt, roles, t, new.get(i))]
                )
    return out


def _behaviour(roles: Roles, tool: Tool, calls: list[dict[str, Any]], steps: list[tuple[list[Any], list[Any]]]) -> str:
    """A coarse behaviour class of one tool from its probe steps (for transition_tokens)."""
    if not tool.writes:
        return "read"
    if tool.prim == "update":
        repeated = any(calls[k] == calls[k - 1] and steps[k][1] for k in range(1, len(calls)))
        return "add" if repeated else "set"
    if tool.prim == "delete":
        table, diff = roles.table(tool.table), steps[0][1]
        own = [entry for entry in diff if entry[0] == table and entry[1] == calls[0]["id"]]
        others = [entry for entry in diff if entry not in own]
        if not own:
            return "none"
        if own[0][3] is not None:
            return "soft"
        if others:
            return "cascade" if any(entry[3] is None for entry in others) else "nullify"
        return "hard"
    if tool.prim == "transition":
        return "guarded" if any(result == ["error", "guard"] for result, _ in steps) else "free"
    return "write"


def probe(rt: Runtime, roles: Roles) -> tuple[list[Any], dict[str, str]]:
    """Run every tool in canonical order with canonical arguments on the canonical state.

    Returns the name-free trace and a behaviour class per tool (keyed by tool symbol).
    """
    state = _probe_state(rt, roles)
    order = sorted(
        rt.tools,
        key=lambda tool: (
            [tool.prim, roles.table(tool.table), sorted(_param_type(rt, roles, tool, p) for p in tool.params)],
            roles.field(tool.table, tool.field) if tool.field else "",
        ),
    )
    trace: list[Any] = []
    classes: dict[str, str] = {}
    for tool in order:
        steps = []
        calls = _probe_calls(rt, roles, tool, state)
        for args in calls:
            before = copy_state(state)
            try:
                result = _canon_result(rt, roles, rt.execute(state, tool, args))
            except CallError as error:
                result = ["error", error.code]
            steps.append((result, _diff(rt, roles, before, state)))
        trace.append([tool.prim, roles.table(tool.table), steps])
        classes[tool.sym] = _behaviour(roles, tool, calls, steps)
    return trace, classes


# ------------------------------------------------------------------------------------- public


def signatures(spec: Spec) -> dict[str, str]:
    """``sig_api``, ``sig_schema``, ``sig_sem``, ``sig_ver`` (name-free) and ``skin``."""
    rt = compile_spec(spec)
    roles = canonical_roles(rt)
    trace, _ = probe(rt, roles)
    return {
        "sig_api": short_hash(_api_entries(rt, roles)),
        "sig_schema": short_hash(_schema(rt, roles)),
        "sig_sem": short_hash(trace),
        "sig_ver": short_hash(spec["verifier"]),
        "skin": skin(spec),
    }


def skin(spec: Spec) -> str:
    return short_hash({"lexicon": spec["lexicon"], "id_format": spec["id_format"]})


def tool_tokens(spec: Spec) -> frozenset[str]:
    """One token per tool, e.g. ``update/r1/enum?,id,int?`` (primitive, table role, param types)."""
    rt = compile_spec(spec)
    roles = canonical_roles(rt)
    return frozenset(f"{prim}/{table}/{','.join(params)}" for prim, table, params, _ in _api_entries(rt, roles))


def schema_tokens(spec: Spec) -> frozenset[str]:
    """Field, ref and state-machine tokens in role indices, e.g. ``field/r0.2/enum4``, ``ref/r2->r0``."""
    rt = compile_spec(spec)
    roles = canonical_roles(rt)
    schema = _schema(rt, roles)
    tokens = set()
    for ti, fields in enumerate(schema["tables"]):
        tokens.add(f"table/r{ti}/{len(fields)}")
        for j, (kind, target) in enumerate(fields):
            tokens.add(f"field/r{ti}.{j}/{kind}")
            if target:
                tokens.add(f"ref/r{ti}->{target}")
    machine = schema["machine"]
    tokens.add(f"machine/{machine['field']}/{machine['size']}")
    tokens.update(f"edge/{a}->{b}" for a, b in machine["edges"])
    return frozenset(tokens)


def transition_tokens(spec: Spec) -> frozenset[str]:
    """Declared semantics plus the probe's behaviour class per tool, e.g. ``update/r0:add``."""
    rt = compile_spec(spec)
    roles = canonical_roles(rt)
    _, classes = probe(rt, roles)
    tokens = {f"declared/{name}={value}" for name, value in sorted(spec["semantics"].items())}
    tokens.update(
        f"{rt.tool_by_sym[sym].prim}/{roles.table(rt.tool_by_sym[sym].table)}:{cls}" for sym, cls in classes.items()
    )
    return frozenset(tokens)
