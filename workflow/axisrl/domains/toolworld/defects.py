"""The defects synthetic sources inject, each a pure function of its inputs and a seeded ``rng``.

``mismatch``: tool documentation that disagrees with what the tools do; ``unreachable_goal``: a
goal no agent can satisfy; ``reword``: a near-duplicate's re-drafted instruction; ``step_variants``
and ``with_step_errors``: a generated trajectory's wrong steps (another tool, a wrong argument or
answer, a skipped step).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping, Sequence
from typing import Any

from axisrl.domains.toolworld.lexicon import entity_name
from axisrl.domains.toolworld.model import FINISH, OPS, CallError, Tool
from axisrl.domains.toolworld.runtime import Runtime, compile_spec
from axisrl.domains.toolworld.templates import TEMPLATES
from axisrl.domains.toolworld.world import Spec

INT_DELTAS = (-10, -1, 1, 10)
"""How far a wrong integer argument or answer is from the right one."""


def mismatch(spec: Spec, rng: random.Random) -> tuple[Spec, Spec] | None:
    """(documented spec, actual spec) of an environment whose tool documentation disagrees with
    its transitions, or None if ``spec`` has no two tools to confuse.

    Renderers and the runtime compile the same spec, so documentation and behaviour can only
    part where the runtime resolves a call: by tool *name*. Two primitives that some table binds
    both of get the same verb word, so on every such table their tools share a name; both stay
    in the tool list (each with its own description in ``tool_schemas`` and its own descriptor
    in the compact view), but a call by that name always runs the tool listed last. The earlier
    tool's documentation then describes a behaviour that calling it never has (e.g. a documented
    read that deletes, or a documented lookup whose arguments the tool that runs rejects). The
    actual spec lists only the tools that calls can reach (same names), so tasks generated on it
    are verified against what really executes.
    """
    by_table: dict[str, set[str]] = {}
    for tool in spec["tools"]:
        if tool["field"] is None:
            by_table.setdefault(tool["table"], set()).add(tool["prim"])
    pairs = sorted({(a, b) for prims in by_table.values() for a in prims for b in prims if a < b})
    if not pairs:
        return None
    a, b = rng.choice(pairs)
    documented = json.loads(json.dumps(spec))
    documented["lexicon"][f"verb:{a}"] = documented["lexicon"][f"verb:{b}"]
    shadowed = set(description_mismatches(documented))
    actual = {**documented, "tools": [tool for tool in documented["tools"] if tool["sym"] not in shadowed]}
    return documented, actual


def description_mismatches(spec: Spec) -> list[str]:
    """Symbols of the tools whose documentation (name, description, compact descriptor) is not
    what a call by their name executes: empty for every faithful environment."""
    rt = compile_spec(spec)
    return [tool.sym for tool in rt.tools if rt.tool_by_name[tool.name] is not tool]


def unreachable_goal(rt: Runtime, goal: Mapping[str, Any], rng: random.Random) -> dict[str, Any]:
    """``goal`` plus a check no agent can satisfy: a row's natural key (``f0``) must equal a fresh
    key. No primitive writes a key field and rows are found by key, so the checked row's key is
    always the one it is found by. The row is the goal's first checked row, else the queried one,
    else the first row of the queried table."""
    if goal["checks"]:
        table, key = goal["checks"][0]["table"], goal["checks"][0]["key"]
    else:
        table = goal["query"]["table"]
        key = goal["query"].get("key") or next(iter(rt.initial[table].values()))["f0"]
    taken = {row["f0"] for rows in rt.initial.values() for row in rows.values()}
    impossible = {
        "op": "field_eq",
        "table": table,
        "key": key,
        "field": "f0",
        "type": "key",
        "value": entity_name(rng, rt.spec["pool"], taken),
    }
    return {**goal, "checks": [*goal["checks"], impossible]}


def _template_patterns() -> list[tuple[str, str, re.Pattern[str]]]:
    patterns = []
    for intent, templates in TEMPLATES.items():
        for template in templates:
            parts = re.split(r"\{(\w+)\}", template)
            regex = "".join(re.escape(p) if k % 2 == 0 else f"(?P<{p}>.+?)" for k, p in enumerate(parts))
            patterns.append((intent, template, re.compile(regex)))
    return patterns


_PATTERNS = _template_patterns()


def reword(instruction: str, rng: random.Random) -> str:
    """The same request in another of its intent's templates (a near-duplicate's re-drafted
    wording), or framed differently if no template produced it."""
    for text in (instruction[0].lower() + instruction[1:], instruction):
        for intent, template, pattern in _PATTERNS:
            match = pattern.fullmatch(text)
            if match:
                other = rng.choice([t for t in TEMPLATES[intent] if t != template])
                out = other.format(**match.groupdict())
                return out[0].upper() + out[1:]
    return f"Here is a request: {instruction}"


def with_step_errors(
    rng: random.Random, reference: Sequence[dict[str, Any]], variants: Sequence[dict[str, list]], step_error: float
) -> tuple[list[dict[str, Any]], int]:
    """One generated trajectory: each step that can go wrong does so with ``step_error``,
    replaced by a variant of a randomly chosen kind (a skipped step is a None variant)."""
    calls, errors = [], 0
    for call, options in zip(reference, variants):
        if options and rng.random() < step_error:
            errors += 1
            call = rng.choice(options[rng.choice(sorted(options))])
            if call is None:
                continue
        calls.append(call)
    return calls, errors


def step_variants(rt: Runtime, task: Mapping[str, Any], call: dict[str, Any]) -> dict[str, list]:
    """The plausible wrong versions of one reference step, by kind: ``other_tool`` (another tool
    that accepts the same arguments), ``wrong_value`` (one argument, or the answer, replaced by
    another valid value) and ``skip``. A ``finish`` can only carry a wrong answer."""
    if call["name"] == FINISH:
        answer = call["arguments"].get("answer")
        wrong = [] if answer is None else _wrong_answers(rt, task, answer)
        return {"wrong_value": [{"name": FINISH, "arguments": {"answer": w}} for w in wrong]} if wrong else {}
    tool, args = rt.decode_call(call)
    options: dict[str, list] = {"skip": [None]}
    others = [other for other in rt.tools if other is not tool and _accepts(rt, other, call["arguments"])]
    if others:
        options["other_tool"] = [{"name": other.name, "arguments": call["arguments"]} for other in others]
    wrong = [rt.encode_call(tool, changed) for changed in _wrong_arguments(rt, tool, args)]
    if wrong:
        options["wrong_value"] = wrong
    return options


def _accepts(rt: Runtime, tool: Tool, arguments: Mapping[str, Any]) -> bool:
    try:
        rt.decode_call({"name": tool.name, "arguments": arguments})
    except CallError:
        return False
    return True


def _other_values(rt: Runtime, table: str, field_sym: str, value: Any) -> list[Any]:
    """Other valid internal values of a field: nearby integers, other enum values, other keys."""
    f = rt.tables[table].by_sym[field_sym]
    if f.type == "int":
        return [value + d for d in INT_DELTAS]
    if f.type == "key":
        return [row["f0"] for row in rt.initial[table].values() if row["f0"] != value]
    return [k for k in range(f.size) if k != value]


def _wrong_arguments(rt: Runtime, tool: Tool, args: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``args`` with one argument changed to another valid value (field selectors kept, so the
    compared value stays of the selected field's type)."""
    out = []
    for p in tool.params:
        if p.sym not in args:
            continue
        value = args[p.sym]
        if p.kind == "id":
            others: list[Any] = [i for i in rt.initial[p.table] if i != value]
        elif p.kind == "key":
            others = _other_values(rt, tool.table, "f0", value)
        elif p.kind in ("int", "enum"):
            others = _other_values(rt, tool.table, p.field, value)
        elif p.kind == "val":
            others = _other_values(rt, tool.table, args["field"], value)
        elif p.kind == "op" and rt.tables[tool.table].by_sym[args["field"]].type == "int":
            others = [op for op in OPS if op != value]
        else:
            continue
        out += [{**args, p.sym: other} for other in others]
    return out


def _wrong_answers(rt: Runtime, task: Mapping[str, Any], answer: str) -> list[str]:
    """Plausible wrong answers: nearby numbers, or other values of the asked field or table."""
    goal = json.loads(task["goal"])
    if goal["answer_type"] == "int":
        return [str(int(answer) + d) for d in INT_DELTAS]
    query = goal["query"]
    table, path = query["table"], query.get("path") or ["f0"]
    if query["kind"] == "hop":
        table = rt.tables[table].by_sym[path[0]].target
    field_sym = path[-1]
    if rt.tables[table].by_sym[field_sym].type == "key":
        return _other_values(rt, table, "f0", answer)
    words = rt.tables[table].by_sym[field_sym].words
    return [w for w in words if w != answer]
