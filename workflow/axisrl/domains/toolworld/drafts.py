"""Task drafts: typed skeletons of primitive calls bound to rows of an environment's initial state.

A skeleton (``lookup>update``, ``filter>get>answer``, ...) is bound to a row, with its instruction
in one of its intent's templates (``templates``) and the same skeleton bound to another row (the
wrong plan the task filter must reject). Arguments are natural keys and attribute values, never
ids: every id has to be discovered by a call.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from axisrl.domains.toolworld.lexicon import entity_name
from axisrl.domains.toolworld.model import Call, Tool
from axisrl.domains.toolworld.runtime import Runtime
from axisrl.domains.toolworld.templates import OP_WORDS, TEMPLATES
from axisrl.domains.toolworld.world import INT_RANGE

ANSWER_TYPES = {"int": "int", "enum": "enum", "status": "enum", "key": "key"}


@dataclass(slots=True)
class Draft:
    """A bound skeleton before filtering; ``wrong_*`` is the same skeleton on another row."""

    plan: list[Call]
    wrong_plan: list[Call]
    skill: list[list[str]]
    """Typed skeleton: [primitive, table role in the skeleton (A, B), field type] per step."""
    instruction: str
    table: str
    involved: int
    """Rows of ``table`` the task is about (the rest are distractors)."""
    id_depth: int
    answer: str | None = None
    wrong_answer: str | None = None
    answer_type: str | None = None
    query: dict[str, Any] | None = None
    """For read tasks: what is asked, without the answer (a view may show it as the goal)."""


class Context:
    """Read-only views of one environment's initial state that the builders share."""

    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        self.s0 = runtime.initial
        self.tools = {(tool.prim, tool.table, tool.field): tool for tool in runtime.tools}
        self.rows = {t: list(rows) for t, rows in self.s0.items()}
        self.keys = {row["f0"] for rows in self.s0.values() for row in rows.values()}

    def tool(self, prim: str, table: str, field: str | None = None) -> Tool | None:
        return self.tools.get((prim, table, field))

    def updater(self, table: str, field: str) -> Tool | None:
        return self.tool("update", table, field) or self.tool("update", table)

    def discovery(self, table: str) -> Tool | None:
        return self.tool("lookup", table) or self.tool("list", table)

    def discover(self, table: str, ident: int) -> list[Call]:
        tool = self.discovery(table)
        return [(tool, {"key": self.s0[table][ident]["f0"]} if tool.prim == "lookup" else {})]

    def key(self, table: str, ident: int) -> str:
        return self.s0[table][ident]["f0"]

    def show(self, table: str, field: str, value: Any) -> str:
        shown = self.rt.surface_value(table, field, value)
        return shown if isinstance(shown, str) else str(shown)

    def names(self, table: str, **fields: str) -> dict[str, str]:
        t = self.rt.tables[table]
        return {
            "table": t.name,
            "keyfield": t.by_sym["f0"].name,
            **{slot: t.by_sym[f].name for slot, f in fields.items()},
        }


def _skill_discover(tool: Tool, role: str) -> list[str]:
    return [tool.prim, role, "key" if tool.prim == "lookup" else "-"]


def _say(rng: random.Random, intent: str, **slots: Any) -> str:
    text = rng.choice(TEMPLATES[intent]).format(**slots)
    return text[0].upper() + text[1:]


# ------------------------------------------------------------------------------------- builders
# Each builder returns a Draft or None (nothing sensible to bind in this state).


def _read_field(ctx: Context, rng: random.Random, t: str) -> Draft | None:
    if len(ctx.rows[t]) < 2:
        return None
    f = rng.choice(ctx.rt.tables[t].of_type("int", "enum", "status"))
    r, w = rng.sample(ctx.rows[t], 2)
    get = ctx.tool("get", t)
    return Draft(
        plan=ctx.discover(t, r) + [(get, {"id": r})],
        wrong_plan=ctx.discover(t, w) + [(get, {"id": w})],
        skill=[_skill_discover(ctx.discovery(t), "A"), ["get", "A", "id"], ["answer", "A", f.type]],
        instruction=_say(rng, "read_field", **ctx.names(t, field=f.sym), key=ctx.key(t, r)),
        table=t,
        involved=1,
        id_depth=1,
        answer=ctx.show(t, f.sym, ctx.s0[t][r][f.sym]),
        wrong_answer=ctx.show(t, f.sym, ctx.s0[t][w][f.sym]),
        answer_type=ANSWER_TYPES[f.type],
        query={"kind": "field", "table": t, "key": ctx.key(t, r), "path": [f.sym]},
    )


def _read_hop(ctx: Context, rng: random.Random, t: str, ref: str) -> Draft | None:
    linked = [i for i in ctx.rows[t] if ctx.s0[t][i][ref] is not None]
    if len(linked) < 2:
        return None
    r, w = rng.sample(linked, 2)
    u = ctx.rt.tables[t].by_sym[ref].target
    g = rng.choice(ctx.rt.tables[u].of_type("key", "int", "enum", "status"))
    get_t, get_u = ctx.tool("get", t), ctx.tool("get", u)

    def plan(i: int) -> list[Call]:
        return ctx.discover(t, i) + [(get_t, {"id": i}), (get_u, {"id": ctx.s0[t][i][ref]})]

    def answer(i: int) -> str:
        return ctx.show(u, g.sym, ctx.s0[u][ctx.s0[t][i][ref]][g.sym])

    names = ctx.names(t, ref=ref) | {"target": ctx.rt.tables[u].name, "field": g.name}
    return Draft(
        plan=plan(r),
        wrong_plan=plan(w),
        skill=[_skill_discover(ctx.discovery(t), "A"), ["get", "A", "id"], ["get", "B", "id"], ["answer", "B", g.type]],
        instruction=_say(rng, "read_hop", **names, key=ctx.key(t, r)),
        table=t,
        involved=1,
        id_depth=2,
        answer=answer(r),
        wrong_answer=answer(w),
        answer_type=ANSWER_TYPES[g.type],
        query={"kind": "hop", "table": t, "key": ctx.key(t, r), "path": [ref, g.sym]},
    )


def _find_by_value(ctx: Context, rng: random.Random, t: str) -> Draft | None:
    f = rng.choice(ctx.rt.tables[t].of_type("int", "enum", "status"))
    values = [ctx.s0[t][i][f.sym] for i in ctx.rows[t]]
    unique = [i for i, v in zip(ctx.rows[t], values) if values.count(v) == 1]
    if not unique or len(ctx.rows[t]) < 2:
        return None
    r = rng.choice(unique)
    w = rng.choice([i for i in ctx.rows[t] if i != r])
    filt, get = ctx.tool("filter", t), ctx.tool("get", t)

    def plan(i: int) -> list[Call]:
        return [(filt, {"field": f.sym, "op": "eq", "value": ctx.s0[t][i][f.sym]}), (get, {"id": i})]

    value = ctx.s0[t][r][f.sym]
    return Draft(
        plan=plan(r),
        wrong_plan=plan(w),
        skill=[["filter", "A", f.type], ["get", "A", "id"], ["answer", "A", "key"]],
        instruction=_say(rng, "find_by_value", **ctx.names(t, field=f.sym), value=ctx.show(t, f.sym, value)),
        table=t,
        involved=1,
        id_depth=1,
        answer=ctx.key(t, r),
        wrong_answer=ctx.key(t, w),
        answer_type="key",
        query={"kind": "find", "table": t, "field": f.sym, "op": "eq", "value": value},
    )


def _count_filter(ctx: Context, rng: random.Random, t: str) -> Draft | None:
    f = rng.choice(ctx.rt.tables[t].of_type("int", "enum", "status"))
    op = rng.choice(("eq", "lt", "gt")) if f.type == "int" else "eq"
    r, w = rng.sample(ctx.rows[t], 2)
    filt = ctx.tool("filter", t)
    compare: Callable[[Any, Any], bool] = {
        "eq": lambda a, b: a == b,
        "lt": lambda a, b: a < b,
        "gt": lambda a, b: a > b,
    }[op]

    def bind(i: int) -> tuple[list[Call], int]:
        value = ctx.s0[t][i][f.sym]
        hits = sum(compare(row[f.sym], value) for row in ctx.s0[t].values())
        return [(filt, {"field": f.sym, "op": op, "value": value})], hits

    (plan, hits), (wrong, wrong_hits) = bind(r), bind(w)
    value = ctx.s0[t][r][f.sym]
    return Draft(
        plan=plan,
        wrong_plan=wrong,
        skill=[["filter", "A", f"{f.type}:{op}"], ["answer", "A", "int"]],
        instruction=_say(
            rng, "count_filter", **ctx.names(t, field=f.sym), op=OP_WORDS[op], value=ctx.show(t, f.sym, value)
        ),
        table=t,
        involved=hits,
        id_depth=0,
        answer=str(hits),
        wrong_answer=str(wrong_hits),
        answer_type="int",
        query={"kind": "count", "table": t, "field": f.sym, "op": op, "value": value},
    )


class _Bound(NamedTuple):
    """An aggregate skeleton bound to one row: its plan, the answer and the rows it counts."""

    plan: list[Call]
    answer: str
    hits: int


def _aggregate(ctx: Context, rng: random.Random, t: str) -> Draft | None:
    table = ctx.rt.tables[t]
    g = rng.choice(table.of_type("int", "enum", "status"))
    total = rng.choice((None, *table.of_type("int")))
    r, w = rng.sample(ctx.rows[t], 2)
    agg = ctx.tool("aggregate", t)

    def bind(i: int) -> _Bound:
        value = ctx.s0[t][i][g.sym]
        hits = [row for row in ctx.s0[t].values() if row[g.sym] == value]
        args: dict[str, Any] = {"field": g.sym, "value": value}
        if total is not None:
            args["total"] = total.sym
        result = len(hits) if total is None else sum(row[total.sym] for row in hits)
        return _Bound([(agg, args)], str(result), len(hits))

    (plan, answer, hits), (wrong, wrong_answer, _) = bind(r), bind(w)
    value = ctx.s0[t][r][g.sym]
    slots = ctx.names(t, field=g.sym) | {"value": ctx.show(t, g.sym, value)}
    if total is None:
        instruction = _say(rng, "count", **slots)
    else:
        instruction = _say(rng, "sum", **slots, total=total.name)
    return Draft(
        plan=plan,
        wrong_plan=wrong,
        skill=[["aggregate", "A", f"{g.type}:{'count' if total is None else 'sum'}"], ["answer", "A", "int"]],
        instruction=instruction,
        table=t,
        involved=hits,
        id_depth=0,
        answer=answer,
        wrong_answer=wrong_answer,
        answer_type="int",
        query={
            "kind": "aggregate",
            "table": t,
            "field": g.sym,
            "value": value,
            "total": None if total is None else total.sym,
        },
    )


def _write_field(ctx: Context, rng: random.Random, t: str, f: str, intent: str) -> Draft | None:
    """``set_field``: make the field equal a value; ``add_field``: raise an int field by a delta.
    Whether the reference must read the current value first depends on the update semantics."""
    if len(ctx.rows[t]) < 2:
        return None
    field = ctx.rt.tables[t].by_sym[f]
    upd, get = ctx.updater(t, f), ctx.tool("get", t)
    increment = field.type == "int" and ctx.rt.update_mode == "increment"
    r, w = rng.sample(ctx.rows[t], 2)
    current = ctx.s0[t][r][f]
    if intent == "add_field":
        amount = rng.randint(1, 20)
    elif field.type == "int":
        amount = rng.choice([v for v in range(INT_RANGE[0], INT_RANGE[1] + 1) if v != current])
    else:
        amount = rng.choice([k for k in range(field.size) if k != current])
    needs_read = increment != (intent == "add_field")

    def plan(i: int) -> list[Call]:
        old = ctx.s0[t][i][f]
        if intent == "add_field":
            new = amount if increment else old + amount
        else:
            new = amount - old if increment else amount
        return ctx.discover(t, i) + ([(get, {"id": i})] if needs_read else []) + [(upd, {"id": i, f: new})]

    skill = [_skill_discover(ctx.discovery(t), "A")] + ([["get", "A", "id"]] if needs_read else [])
    value = str(amount) if intent == "add_field" else ctx.show(t, f, amount)
    return Draft(
        plan=plan(r),
        wrong_plan=plan(w),
        skill=skill + [["update", "A", field.type]],
        instruction=_say(rng, intent, **ctx.names(t, field=f), key=ctx.key(t, r), value=value),
        table=t,
        involved=1,
        id_depth=1,
    )


def _link(ctx: Context, rng: random.Random, t: str, ref: str) -> Draft | None:
    u = ctx.rt.tables[t].by_sym[ref].target
    a = rng.choice(ctx.rows[t])
    targets = [b for b in ctx.rows[u] if b != ctx.s0[t][a][ref]]
    if not targets:
        return None
    b = rng.choice(targets)
    others = [i for i in ctx.rows[t] if i != a and ctx.s0[t][i][ref] != b]
    if not others:
        return None
    w = rng.choice(others)
    link = ctx.tool("link", t, ref)

    def plan(i: int) -> list[Call]:
        return ctx.discover(t, i) + ctx.discover(u, b) + [(link, {"id": i, ref: b})]

    names = ctx.names(t, ref=ref) | {"target": ctx.rt.tables[u].name}
    return Draft(
        plan=plan(a),
        wrong_plan=plan(w),
        skill=[_skill_discover(ctx.discovery(t), "A"), _skill_discover(ctx.discovery(u), "B"), ["link", "A", "ref"]],
        instruction=_say(rng, "link", **names, key=ctx.key(t, a), target_key=ctx.key(u, b)),
        table=t,
        involved=1,
        id_depth=2,
    )


def _create(ctx: Context, rng: random.Random, t: str) -> Draft | None:
    table = ctx.rt.tables[t]
    taken = set(ctx.keys)
    key, other = entity_name(rng, ctx.rt.spec["pool"], taken), entity_name(rng, ctx.rt.spec["pool"], taken)
    values = {
        f.sym: rng.randint(*INT_RANGE) if f.type == "int" else rng.randrange(f.size)
        for f in table.of_type("int", "enum")
    }
    create = ctx.tool("create", t)
    shown = [f"{table.by_sym[f].name} {ctx.show(t, f, v)}" for f, v in values.items()]
    listing = shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]
    return Draft(
        plan=[(create, {"key": key, **values})],
        wrong_plan=[(create, {"key": other, **values})],
        skill=[["create", "A", ",".join(table.by_sym[f].type for f in values)]],
        instruction=_say(rng, "create", table=table.name, key=key, values=listing),
        table=t,
        involved=0,
        id_depth=0,
    )


def _delete(ctx: Context, rng: random.Random, t: str) -> Draft | None:
    if len(ctx.rows[t]) < 2:
        return None
    r, w = rng.sample(ctx.rows[t], 2)
    delete = ctx.tool("delete", t)
    return Draft(
        plan=ctx.discover(t, r) + [(delete, {"id": r})],
        wrong_plan=ctx.discover(t, w) + [(delete, {"id": w})],
        skill=[_skill_discover(ctx.discovery(t), "A"), ["delete", "A", "id"]],
        instruction=_say(rng, "delete", **ctx.names(t), key=ctx.key(t, r)),
        table=t,
        involved=1,
        id_depth=1,
    )


def _status_path(ctx: Context, start: int, size: int) -> dict[int, list[int]]:
    """Shortest transition paths (up to two steps) from ``start`` under the env's guard."""
    if not ctx.rt.guard:
        return {s: [s] for s in range(size) if s != start}
    paths: dict[int, list[int]] = {start: []}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        if len(paths[state]) == 2:
            continue
        for a, b in sorted(ctx.rt.edges):
            if a == state and b not in paths:
                paths[b] = paths[state] + [b]
                queue.append(b)
    del paths[start]
    return paths


def _transition(ctx: Context, rng: random.Random, t: str) -> Draft | None:
    if len(ctx.rows[t]) < 2:
        return None
    f = ctx.rt.tables[t].by_sym[ctx.rt.status_field]
    r, w = rng.sample(ctx.rows[t], 2)
    paths = _status_path(ctx, ctx.s0[t][r][f.sym], f.size)
    if not paths:
        return None
    target = rng.choice(sorted(paths))
    move = ctx.tool("transition", t)

    def plan(i: int) -> list[Call]:
        return ctx.discover(t, i) + [(move, {"id": i, "to": s}) for s in paths[target]]

    return Draft(
        plan=plan(r),
        wrong_plan=plan(w),
        skill=[_skill_discover(ctx.discovery(t), "A")] + [["transition", "A", "status"]] * len(paths[target]),
        instruction=_say(rng, "transition", **ctx.names(t, field=f.sym), key=ctx.key(t, r), value=f.words[target]),
        table=t,
        involved=1,
        id_depth=1,
    )


Builder = Callable[..., Draft | None]


def bindings(ctx: Context) -> dict[str, list[tuple[Builder, tuple]]]:
    """Every (builder, binding) whose tools exist in this env, grouped by intent."""
    rt, has = ctx.rt, ctx.tool
    slots: dict[str, list[tuple[Builder, tuple]]] = {}

    def add(intent: str, builder: Builder, *binding: Any) -> None:
        slots.setdefault(intent, []).append((builder, binding))

    for t, table in rt.tables.items():
        found, get = ctx.discovery(t), has("get", t)
        if found and get:
            add("read_field", _read_field, t)
            for ref in table.of_type("ref"):
                if has("get", ref.target):
                    add("read_hop", _read_hop, t, ref.sym)
        if has("filter", t) and get:
            add("find_by_value", _find_by_value, t)
        if has("filter", t) and len(ctx.rows[t]) >= 2:
            add("count_filter", _count_filter, t)
        if has("aggregate", t) and len(ctx.rows[t]) >= 2:
            add("aggregate", _aggregate, t)
        if found:
            increment = rt.update_mode == "increment"
            for f in table.of_type("int", "enum"):
                if not ctx.updater(t, f.sym):
                    continue
                if get or not (increment and f.type == "int"):
                    add("set_field", _write_field, t, f.sym, "set_field")
                if f.type == "int" and (get or increment):
                    add("add_field", _write_field, t, f.sym, "add_field")
            for ref in table.of_type("ref"):
                if has("link", t, ref.sym) and ctx.discovery(ref.target):
                    add("link", _link, t, ref.sym)
            if has("delete", t):
                add("delete", _delete, t)
            if has("transition", t):
                add("transition", _transition, t)
        if has("create", t):
            add("create", _create, t)
    return slots
