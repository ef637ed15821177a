"""The chat rendering of one environment for LLMs: messages plus OpenAI function-calling tools.

``render_chat`` gives the messages and function schemas an LLM sees (the tau2/BFCL contract:
tools as JSON Schema, JSON observations, ``finish(answer)`` ends the episode), and
``observation_json`` the tool-result string it reads back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from axisrl.domains.toolworld.model import FINISH, OPS, Field, Param, Tool
from axisrl.domains.toolworld.runtime import Runtime, compile_spec
from axisrl.domains.toolworld.world import Spec

POLICY = (
    "Policy: ids are never given in requests; find them with the tools. Change only what the request "
    "asks for and leave every other record as it is. If the request is a question, call "
    f"{FINISH} with the answer (just the value); otherwise call {FINISH} when the change is done."
)

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
        return {
            "type": "string",
            "pattern": _id_pattern(rt, p.table),
            "description": f"id of a {rt.tables[p.table].name}, e.g. {rt.render_id(p.table, 7)}",
        }
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
        how = (
            "adds the given amount to integer fields and sets the others"
            if rt.update_mode == "increment"
            else "sets the given fields"
        )
        return f"Update a {table.name} ({', '.join(fields)}): {how}."
    field = table.by_sym.get(tool.field or rt.status_field)
    target = rt.tables[field.target].name if field and field.target else ""
    text = PURPOSE[tool.prim].format(
        table=table.name, key=table.by_sym["f0"].name, field=field and field.name, target=target
    )
    if tool.prim == "delete":
        if rt.soft_delete:
            text += f" (Archives it: sets {table.by_sym[table.flag].name} to true; archived records are hidden.)"
        elif rt.referrers[tool.table]:
            text += " Records that refer to it are deleted too." if rt.cascade else " References to it are cleared."
    if tool.prim == "transition":
        words = field.words
        text += (
            " Allowed changes: " + ", ".join(f"{words[a]} -> {words[b]}" for a, b in sorted(rt.edges)) + "."
            if rt.guard
            else " Any value may be set."
        )
    return text


def tool_schemas(spec: Spec) -> list[dict[str, Any]]:
    """OpenAI function-calling tool list, the world's tools plus ``finish``."""
    rt = compile_spec(spec)
    tools = []
    for tool in rt.tools:
        tools.append(
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": _describe_tool(rt, tool),
                    "parameters": {
                        "type": "object",
                        "properties": {p.name: _param_schema(rt, tool, p) for p in tool.params},
                        "required": [p.name for p in tool.params if p.required],
                        "additionalProperties": False,
                    },
                },
            }
        )
    tools.append(
        {
            "type": "function",
            "function": {
                "name": FINISH,
                "description": "End the episode. Give the answer if the request asked a question.",
                "parameters": {
                    "type": "object",
                    "properties": {"answer": {"type": "string"}},
                    "required": [],
                    "additionalProperties": False,
                },
            },
        }
    )
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
    lines = [
        (
            f"You operate a records system with {len(rt.tables)} tables. Every record is identified by its "
            f"{rt.id_name} (e.g. {rt.render_id(next(iter(rt.tables)), 7)})."
        )
    ]
    for table in rt.tables.values():
        lines.append(f"- {table.name}: " + "; ".join(_describe_field(rt, f) for f in table.fields))
    lines.append(POLICY)
    return {
        "messages": [{"role": "system", "content": "\n".join(lines)}, {"role": "user", "content": task["instruction"]}],
        "tools": tool_schemas(spec),
    }
