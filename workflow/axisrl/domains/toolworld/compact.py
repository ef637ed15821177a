"""toolworld's compact view (``axisrl.domains.compact.CompactView``): a name-free token view.

Every world-specific symbol (table, field, tool, entity id, string value) becomes an
episode-local slot token (``slots``), so a re-skinned world renders identically. Tool descriptors
show the bound table, read/write, return type, declared semantics and typed parameters, but not
the primitive. Actions are candidates: a tool index plus pointers into ``values`` (what the goal
and the history make visible), each paired with the surface call that executes it (``layout``).
"""

from __future__ import annotations

import bisect
import copy
import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from axisrl.domains.compact import HISTORY_K, DecisionPoint
from axisrl.domains.toolworld.layout import FINISH_DESCRIPTOR, RETURN_KIND, Pointers, layout_of
from axisrl.domains.toolworld.model import FINISH, CallError, Goal, Tool
from axisrl.domains.toolworld.runtime import Runtime, compile_spec
from axisrl.domains.toolworld.slots import Slots, slots_of
from axisrl.domains.toolworld.world import Spec


class _View:
    """Builds one compact view; holds the per-call symbol additions (new entities and strings)."""

    def __init__(self, rt: Runtime, slots: Slots) -> None:
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
            clauses.append(
                ["ref", *head, view.f(t, c["field"]), "null" if c["value"] is None else view.key(c["value"])]
            )
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


def _history_step(
    view: _View, call: Any, observation: Mapping[str, Any], tool_index: dict[str, int]
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
            _, row = parsed
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
        layout = layout_of(rt)
        slots = slots_of(rt, episode_seed)
        view = _View(rt, slots)
        flat = slots.fill(layout.base_values)  # the ops, field selectors and state-machine values
        view.values = [flat[k : k + 2] for k in range(0, len(flat), 2)]
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
        self.tools = [
            slots.fill(layout.descriptors[tool.sym]) if tool else list(FINISH_DESCRIPTOR) for tool in self.ordered
        ]
        self.steps: list[list[list[str]]] = []
        self.pointers = Pointers()
        self.blocks: list[list[list[int]] | None] = [None] * len(self.ordered)
        """Per tool position, its candidate rows; a block is replaced, never modified, when it changes
        (and only then: the same object means the same rows)."""
        self._answers: list[int] | None = None
        self._derived: tuple[int, ...] = ()
        self._current: DecisionPoint | None = None

    @property
    def base_values(self) -> int:
        """Values that persist past this decision (derived deltas exist only in one)."""
        return len(self.state.values)

    def primitive(self, position: int) -> str:
        tool = self.ordered[position]
        return tool.prim if tool else FINISH

    def fork(self, env: Any = None) -> CompactEpisode:
        """An independent copy at this decision point: an episode branching into several
        continuations (the rollouts of one GRPO group) pays for its shared prefix once. The view
        reads no environment (``env``, the protocol's, is ignored)."""
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

    def current(self) -> DecisionPoint:
        """The values, their internal forms and the candidates at this decision point."""
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
        self._current = DecisionPoint(values, typed, list(itertools.chain.from_iterable(self.blocks)))
        return self._current

    def candidates(self) -> list[list[int]]:
        return self.current().candidates

    def call(self, k: int) -> dict[str, Any]:
        """The surface call that executes candidate ``k``."""
        _, typed, candidates = self.current()
        position, *pointers = candidates[k]
        tool = self.ordered[position]
        if tool is None:
            if pointers[0] < 0:
                return {"name": FINISH, "arguments": {}}
            kind, payload = typed[pointers[0]]
            text = (
                str(payload)
                if kind == "int"
                else payload[1]
                if kind == "key"
                else self.rt.tables[payload[0]].by_sym[payload[1]].words[payload[2]]
            )
            return {"name": FINISH, "arguments": {"answer": text}}
        args = {}
        for p, k_value in zip(tool.params, pointers):
            if k_value >= 0:
                kind, payload = typed[k_value]
                args[p.sym] = payload[-1] if kind in ("entity", "key", "field", "enum") else payload
        return self.rt.encode_call(tool, args)

    def view(self, last_k: int = HISTORY_K) -> dict[str, Any]:
        values, _, candidates = self.current()
        return {
            "goal": self.goal,
            "tools": self.tools,
            "history": self.steps[-last_k:] if last_k else [],
            "values": values,
            "candidates": candidates,
            "calls": [self.call(k) for k in range(len(candidates))],
        }


def render_compact(
    spec: Spec,
    task: Mapping[str, Any],
    history: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]],
    episode_seed: int,
    last_k: int = HISTORY_K,
) -> dict[str, Any]:
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


def compact_view(spec: Spec, task: Mapping[str, Any], episode_seed: int, env: Any) -> CompactEpisode:
    """The domain's ``compact_view`` (``axisrl.domains.compact.ViewFactory``); the runtime, not the
    environment, enumerates toolworld's candidates."""
    return CompactEpisode(spec, task, episode_seed)
