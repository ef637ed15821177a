"""Answer-first task synthesis with the SCA/CaT filter.

A draft (``drafts``) binds a typed skeleton of primitive calls to rows of the initial state. Its
reference solution is run on that state; the goal is read off the resulting state diff (field
equalities, rows created or deleted) plus the diff's footprint, or is the expected answer for a
read skeleton. A draft is kept only if the reference passes and a no-op run, every truncated
prefix of the reference and the same skeleton bound to another row all fail.
"""

from __future__ import annotations

import random
from typing import Any, NamedTuple

from axisrl.domains.canon import canonical_json, derive_seed, short_hash
from axisrl.domains.toolworld.drafts import Context, Draft, bindings
from axisrl.domains.toolworld.model import FINISH, Call, CallError, Goal, State, copy_state
from axisrl.domains.toolworld.runtime import Runtime, compile_spec


class _Run(NamedTuple):
    """A plan run on a state: the final state, the state after each proper prefix, and whether
    every call succeeded."""

    final: State
    prefixes: list[State]
    ok: bool


def _run(rt: Runtime, s0: State, plan: list[Call]) -> _Run:
    """Final state, the state after each proper prefix, and whether every call succeeded.
    A failed call leaves the state unchanged and the run goes on, as for an agent."""
    state = copy_state(s0)
    prefixes: list[State] = []
    last: State = s0
    ok = True
    for k, (tool, args) in enumerate(plan):
        try:
            rt.execute(state, tool, args)
        except CallError:
            ok = False
        if k < len(plan) - 1:
            if tool.writes:
                last = copy_state(state)
            prefixes.append(last)
    return _Run(state, prefixes, ok)


def _goal(rt: Runtime, s0: State, final: State, draft: Draft) -> dict[str, Any]:
    """The goal JSON, read off the reference's state diff. Rows are named by natural key, so the
    goal holds on any path to the same final rows: ``checks`` (``row_exists``, ``row_absent``,
    ``field_eq`` with its field ``type``, ``ref_eq`` to a target key or null), ``footprint`` (the
    rows that may change), ``answer_type`` and ``query`` (read tasks)."""
    order = {t: k for k, t in enumerate(rt.tables)}
    changed = sorted(rt.changed_rows(s0, final), key=lambda tk: (order[tk[0]], tk[1]))
    checks: list[dict[str, Any]] = []
    for t, key in changed:
        before, after = rt.find(s0, t, key), rt.find(final, t, key)
        if after is None:
            checks.append({"op": "row_absent", "table": t, "key": key})
            continue
        fields = [f for f in rt.tables[t].fields if f.type != "key"]
        if before is None:
            checks.append({"op": "row_exists", "table": t, "key": key})
        else:
            fields = [f for f in fields if before[1][f.sym] != after[1][f.sym]]
        for f in fields:
            value = after[1][f.sym]
            if f.type == "ref":
                target = None if value is None else final[f.target][value]["f0"]
                checks.append({"op": "ref_eq", "table": t, "key": key, "field": f.sym, "value": target})
            else:
                checks.append(
                    {"op": "field_eq", "table": t, "key": key, "field": f.sym, "type": f.type, "value": value}
                )
    return {
        "checks": checks,
        "footprint": [list(tk) for tk in changed],
        "answer_type": draft.answer_type,
        "query": draft.query,
    }


def _passes(rt: Runtime, goal: Goal, expected: str | None, s0: State, final: State, answer: Any) -> bool:
    met, total = rt.check(goal, expected, s0, final, answer)
    return met == total


def _filter(rt: Runtime, draft: Draft) -> dict[str, Any] | None:
    """The goal if the draft survives the CaT filter, else None."""
    s0 = rt.initial
    final, prefixes, ok = _run(rt, s0, draft.plan)
    if not ok:
        return None
    goal_dict = _goal(rt, s0, final, draft)
    if not goal_dict["checks"] and draft.answer_type is None:
        return None
    goal = Goal.parse(goal_dict)
    expected = draft.answer
    if not _passes(rt, goal, expected, s0, final, expected) or _passes(rt, goal, expected, s0, s0, None):
        return None
    if any(_passes(rt, goal, expected, s0, state, None) for state in prefixes):
        return None
    wrong_final, _, _ = _run(rt, s0, draft.wrong_plan)
    if _passes(rt, goal, expected, s0, wrong_final, draft.wrong_answer):
        return None
    return goal_dict


def verifier_shape(goal: dict[str, Any]) -> list[list[str]]:
    """The goal's AST shape: check ops with value types, and the answer type; no names or values."""
    shape = sorted([c["op"], c.get("type", "ref" if c["op"] == "ref_eq" else "row")] for c in goal["checks"])
    return shape + [["answer", goal["answer_type"] or "-"]]


def generate_tasks(
    spec: dict[str, Any], env_id: str, n_tasks: int, seed: int, max_attempts: int | None = None
) -> list[dict[str, Any]]:
    """Up to ``n_tasks`` filtered task rows for the environment ``spec`` (id ``env_id``), from ``seed``.

    Stops after ``max_attempts`` drafts (default ``8 * n_tasks + 16``), so a poor environment
    yields fewer tasks rather than looping. Nothing here depends on the skin except the rendered
    text, so a re-skinned spec with the same seed yields the same tasks in its own names.
    """
    rt = compile_spec(spec)
    ctx = Context(rt)
    by_intent = bindings(ctx)
    intents = sorted(by_intent)
    rng = random.Random(derive_seed(seed, "tasks"))
    tasks: list[dict[str, Any]] = []
    seen: set[str] = set()
    attempts = 8 * n_tasks + 16 if max_attempts is None else max_attempts
    for _ in range(attempts):
        if len(tasks) >= n_tasks or not intents:
            break
        builder, binding = rng.choice(by_intent[rng.choice(intents)])
        draft = builder(ctx, rng, *binding)
        if draft is None or len(draft.plan) + 1 > rt.max_steps:  # the reference and its finish must fit
            continue
        goal = _filter(rt, draft)
        if goal is None:
            continue
        finish = {"name": FINISH, "arguments": {} if draft.answer is None else {"answer": draft.answer}}
        reference = canonical_json([rt.encode_call(tool, args) for tool, args in draft.plan] + [finish])
        goal_json = canonical_json(goal)
        task_id = short_hash(env_id + reference + goal_json)
        if task_id in seen:
            continue
        seen.add(task_id)
        skeleton = ">".join(tool.prim for tool, _ in draft.plan) + (">answer" if draft.answer_type else "")
        tasks.append(
            {
                "task_id": task_id,
                "env_id": env_id,
                "skeleton": skeleton,
                "skill_sig": short_hash(draft.skill),
                "verifier_sig": short_hash(verifier_shape(goal)),
                "instruction": draft.instruction,
                "reference": reference,
                "goal": goal_json,
                "answer": draft.answer,
                "n_steps": len(draft.plan),
                "n_distractors": len(ctx.rows[draft.table]) - draft.involved,
                "id_depth": draft.id_depth,
            }
        )
    return tasks
