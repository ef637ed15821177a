"""Worlds (L2), variants (L1), contents (L0) and the environment spec that holds all three.

A *structure* is the name-free part of an environment: tables of typed fields addressed by
symbols (``t0``, ``t0.f2``), one guarded state machine, tools bound to tables, the
transition semantics and the verifier settings. A *spec* adds the skin (lexicon and ID format),
the initial state and the step limit; it is plain JSON and is the whole environment.

Field types: ``key`` (natural-key string, always ``f0``), ``int``, ``enum`` (domain ``size``),
``ref`` (id of a row of ``target``), ``status`` (state-machine field) and ``flag`` (the
soft-delete marker ``fd``, present on every table that has or had a delete tool, so switching
between hard and soft delete is a pure semantics edit).
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from typing import Any

from axisrl.domains.canon import derive_seed, short_hash
from axisrl.domains.levels import draw_variant
from axisrl.domains.toolworld.lexicon import assign_words, entity_name, make_id_format

SPEC_FORMAT = "toolworld/1"
PRIMITIVES = ("lookup", "get", "list", "filter", "create", "update", "delete", "link", "aggregate", "transition")
TABLE_PRIMITIVES = ("lookup", "get", "list", "filter", "create", "update", "delete", "aggregate")
PARAMS = ("id", "field", "op", "value", "total", "to")
"""World-named parameters; a field-valued parameter is named after its field instead."""
INT_RANGE = (0, 99)
FLAG_FIELD = "fd"

SEMANTICS = {
    "update_mode": ("overwrite", "increment"),
    "delete_mode": ("hard", "soft"),
    "guard": (True, False),
    "cascade": (True, False),
}
VERIFIER = {"collateral": (True, False), "answer_mode": ("exact", "normalized")}

TOOL_PROBABILITY = {
    "lookup": 0.85,
    "get": 0.85,
    "list": 0.35,
    "filter": 0.4,
    "create": 0.45,
    "update": 0.6,
    "delete": 0.4,
    "aggregate": 0.35,
    "link": 0.5,
    "transition": 0.85,
}

Structure = dict[str, Any]
Spec = dict[str, Any]


def tool_symbol(prim: str, table: str, field: str | None = None) -> str:
    return f"{prim}:{table}" if field is None else f"{prim}:{table}.{field}"


def _tool(prim: str, table: str, field: str | None = None) -> dict[str, Any]:
    return {"sym": tool_symbol(prim, table, field), "prim": prim, "table": table, "field": field}


def _copy(obj: Any) -> Any:
    return json.loads(json.dumps(obj))


def _table(structure: Structure, sym: str) -> dict[str, Any]:
    return next(t for t in structure["tables"] if t["sym"] == sym)


def _fields_of_type(table: Mapping[str, Any], *types: str) -> list[str]:
    return [f["sym"] for f in table["fields"] if f["type"] in types]


def _next_field_symbol(table: Mapping[str, Any]) -> str:
    numbers = [int(f["sym"][1:]) for f in table["fields"] if f["sym"][1:].isdigit()]
    return f"f{max(numbers) + 1}"


# ---------------------------------------------------------------------------------------------- L2


def sample_world(world_seed: int, n_tables: tuple[int, int]) -> Structure:
    """The structure of world ``world_seed``: tables, refs, one state machine, sampled tools."""
    rng = random.Random(derive_seed(world_seed, "structure"))
    tables: list[dict[str, Any]] = []
    for i in range(rng.randint(*n_tables)):
        kinds = ["int"] * rng.randint(1, 3) + ["enum"] * rng.randint(0, 2)
        rng.shuffle(kinds)
        if i > 0:
            kinds.append("ref")
        if i > 1 and rng.random() < 0.3:
            kinds.append("ref")
        fields: list[dict[str, Any]] = [{"sym": "f0", "type": "key"}]
        targets = rng.sample(range(i), min(i, kinds.count("ref")))
        for j, kind in enumerate(kinds, start=1):
            field: dict[str, Any] = {"sym": f"f{j}", "type": kind}
            if kind == "enum":
                field["size"] = rng.randint(3, 5)
            elif kind == "ref":
                field["target"] = f"t{targets.pop()}"
            fields.append(field)
        tables.append({"sym": f"t{i}", "fields": fields})

    machine_table = tables[rng.randrange(len(tables))]
    size = rng.randint(3, 5)
    status = {"sym": _next_field_symbol(machine_table), "type": "status", "size": size}
    machine_table["fields"].append(status)
    edges = [[a, a + 1] for a in range(size - 1)]
    edges += [[a, b] for a in range(size) for b in range(size) if a != b and b != a + 1 and rng.random() < 0.15]
    machine = {"table": machine_table["sym"], "field": status["sym"], "initial": 0, "edges": sorted(edges)}

    tools: list[dict[str, Any]] = []
    for table in tables:
        t = table["sym"]
        bound = [_tool(prim, t) for prim in TABLE_PRIMITIVES if rng.random() < TOOL_PROBABILITY[prim]]
        if not any(tool["prim"] in ("lookup", "list") for tool in bound):
            bound.insert(0, _tool("lookup", t))
        bound += [
            _tool("link", t, ref) for ref in _fields_of_type(table, "ref") if rng.random() < TOOL_PROBABILITY["link"]
        ]
        if t == machine["table"] and rng.random() < TOOL_PROBABILITY["transition"]:
            bound.append(_tool("transition", t))
        tools += bound

    structure = {
        "tables": tables,
        "machine": machine,
        "tools": tools,
        "semantics": {
            "update_mode": rng.choice(SEMANTICS["update_mode"]),
            "delete_mode": "hard" if rng.random() < 0.6 else "soft",
            "guard": rng.random() < 0.7,
            "cascade": rng.random() < 0.5,
        },
        "verifier": {"collateral": rng.random() < 0.75, "answer_mode": rng.choice(VERIFIER["answer_mode"])},
    }
    _sync_flag_fields(structure)
    return structure


def _sync_flag_fields(structure: Structure) -> None:
    """Give every table with a delete tool its soft-delete flag field (never removed again)."""
    for tool in structure["tools"]:
        if tool["prim"] == "delete":
            table = _table(structure, tool["table"])
            if FLAG_FIELD not in _fields_of_type(table, "flag"):
                table["fields"].append({"sym": FLAG_FIELD, "type": "flag"})


def candidate_tools(structure: Structure) -> list[dict[str, Any]]:
    """Every binding of the primitive library to this structure (the space api edits draw from)."""
    out = []
    for table in structure["tables"]:
        t = table["sym"]
        out += [_tool(prim, t) for prim in TABLE_PRIMITIVES]
        out += [_tool("link", t, ref) for ref in _fields_of_type(table, "ref")]
        if structure["machine"]["table"] == t:
            out.append(_tool("transition", t))
    return out


def updatable_fields(table: Mapping[str, Any]) -> list[str]:
    return _fields_of_type(table, "int", "enum")


# ---------------------------------------------------------------------------------------------- L1


def _edit_options(structure: Structure) -> dict[str, list[str]]:
    """Applicable edits by category; each edit is a string that ``_apply_edit`` understands."""
    tools = structure["tools"]
    present = {tool["sym"] for tool in tools}
    updated_tables = {tool["table"] for tool in tools if tool["prim"] == "update"}
    api = [
        f"api:add:{c['sym']}"
        for c in candidate_tools(structure)
        if c["sym"] not in present and not (c["prim"] == "update" and c["table"] in updated_tables)
    ]
    if len(tools) > 3:
        api += [f"api:remove:{tool['sym']}" for tool in tools]
    api += [
        f"api:split:{tool['sym']}"
        for tool in tools
        if tool["prim"] == "update"
        and tool["field"] is None
        and len(updatable_fields(_table(structure, tool["table"]))) >= 2
    ]

    schema = []
    for table in structure["tables"]:
        schema += [f"schema:add_field:{table['sym']}:{kind}" for kind in ("int", "enum")]
        schema += [f"schema:extend_enum:{table['sym']}.{f}" for f in _fields_of_type(table, "enum")]

    sem, prims = structure["semantics"], {tool["prim"] for tool in tools}
    referenced = {f["target"] for table in structure["tables"] for f in table["fields"] if f["type"] == "ref"}
    int_updates = any(
        tool["prim"] == "update"
        and (tool["field"] is None or _field(structure, tool["table"], tool["field"])["type"] == "int")
        for tool in tools
    )
    semantics = []
    if int_updates:
        semantics.append(f"semantics:update_mode={_flip('update_mode', sem['update_mode'])}")
    if "delete" in prims:
        semantics.append(f"semantics:delete_mode={_flip('delete_mode', sem['delete_mode'])}")
    if "transition" in prims:
        semantics.append(f"semantics:guard={_flip('guard', sem['guard'])}")
    if any(tool["prim"] == "delete" and tool["table"] in referenced for tool in tools):
        semantics.append(f"semantics:cascade={_flip('cascade', sem['cascade'])}")

    ver = structure["verifier"]
    verifier = [
        f"verifier:collateral={not ver['collateral']}",
        f"verifier:answer_mode={_flip('answer_mode', ver['answer_mode'], VERIFIER)}",
    ]
    return {"api": api, "schema": schema, "semantics": semantics, "verifier": verifier}


def _flip(name: str, value: Any, table: Mapping[str, tuple] = SEMANTICS) -> Any:
    a, b = table[name]
    return b if value == a else a


def _field(structure: Structure, table: str, field: str) -> dict[str, Any]:
    return next(f for f in _table(structure, table)["fields"] if f["sym"] == field)


def _parse_setting(text: str) -> Any:
    return {"True": True, "False": False}.get(text, text)


def _apply_edit(structure: Structure, edit: str) -> None:
    category, rest = edit.split(":", 1)
    if category == "api":
        action, sym = rest.split(":", 1)
        tools = structure["tools"]
        if action == "add":
            prim, binding = sym.split(":")
            table, _, field = binding.partition(".")
            tools.append(_tool(prim, table, field or None))
            _sync_flag_fields(structure)
        elif action == "remove":
            tools[:] = [tool for tool in tools if tool["sym"] != sym]
        else:  # split a whole-row update into one setter per field
            index = next(i for i, tool in enumerate(tools) if tool["sym"] == sym)
            table = tools[index]["table"]
            tools[index : index + 1] = [_tool("update", table, f) for f in updatable_fields(_table(structure, table))]
    elif category == "schema":
        action, target = rest.split(":", 1)
        if action == "add_field":
            table_sym, kind = target.split(":")
            table = _table(structure, table_sym)
            field: dict[str, Any] = {"sym": _next_field_symbol(table), "type": kind}
            if kind == "enum":
                field["size"] = 3
            table["fields"].append(field)
        else:  # extend_enum
            table_sym, field_sym = target.split(".")
            _field(structure, table_sym, field_sym)["size"] += 1
    else:
        name, value = rest.split("=")
        structure["semantics" if category == "semantics" else "verifier"][name] = _parse_setting(value)


def sample_variant(structure: Structure, variant_seed: int | None) -> tuple[Structure, list[str]]:
    """1-3 declared edits drawn from ``variant_seed`` (``levels.draw_variant``); ``None`` is the unedited world."""
    return draw_variant(structure, variant_seed, _copy, _edit_options, lambda s, e, _rng: _apply_edit(s, e))


# ---------------------------------------------------------------------------------------------- L0


def sample_state(structure: Structure, content_seed: int, pool: str, rows: tuple[int, int]) -> dict[str, list]:
    """Initial rows ``{table: [[id, row], ...]}`` (ids ascending). Each field draws from its own
    stream, so two variants with the same content seed share the values of their common fields."""
    key_rng = random.Random(derive_seed(content_seed, "keys"))
    taken: set[str] = set()
    ids: dict[str, list[int]] = {}
    state: dict[str, list] = {}
    for table in structure["tables"]:
        t = table["sym"]
        rng = random.Random(derive_seed(content_seed, "rows", t))
        n = rng.randint(*rows)
        ids[t] = sorted(rng.sample(range(1, max(1000, 16 * n)), n))
        columns: dict[str, list[Any]] = {}
        for field in table["fields"]:
            f, kind = field["sym"], field["type"]
            frng = random.Random(derive_seed(content_seed, "values", t, f))
            if kind == "key":
                columns[f] = [entity_name(key_rng, pool, taken) for _ in range(n)]
            elif kind == "int":
                columns[f] = [frng.randint(*INT_RANGE) for _ in range(n)]
            elif kind in ("enum", "status"):
                columns[f] = [frng.randrange(field["size"]) for _ in range(n)]
            elif kind == "ref":
                targets = ids[field["target"]]
                columns[f] = [None if frng.random() < 0.15 else frng.choice(targets) for _ in range(n)]
            else:
                columns[f] = [False] * n
        state[t] = [[i, {f: columns[f][k] for f in columns}] for k, i in enumerate(ids[t])]
    return state


# ---------------------------------------------------------------------------------------------- spec


def lexicon_symbols(structure: Structure) -> list[str]:
    """Every symbol that needs a surface word: tables, fields, enum values, verbs, parameters."""
    symbols = [f"verb:{prim}" for prim in PRIMITIVES] + [f"param:{p}" for p in PARAMS]
    for table in structure["tables"]:
        t = table["sym"]
        symbols.append(t)
        for field in table["fields"]:
            symbols.append(f"{t}.{field['sym']}")
            if field["type"] in ("enum", "status"):
                symbols += [f"{t}.{field['sym']}.v{k}" for k in range(field["size"])]
    return symbols


def build_spec(structure: Structure, state: dict[str, list], pool: str, skin_seed: int, max_steps: int) -> Spec:
    """Assemble the environment spec; the skin (names, ID format) comes from ``skin_seed``."""
    lexicon = assign_words(lexicon_symbols(structure), pool, skin_seed)
    id_format = make_id_format(skin_seed, {t["sym"]: lexicon[t["sym"]] for t in structure["tables"]})
    return {
        "format": SPEC_FORMAT,
        "pool": pool,
        **_copy(structure),
        "max_steps": max_steps,
        "lexicon": lexicon,
        "id_format": id_format,
        "state": state,
    }


def env_id(spec: Spec) -> str:
    """First 16 hex chars of sha256 over the spec's canonical JSON."""
    return short_hash(spec)


def reskin(spec: Spec, seed: int) -> Spec:
    """The same environment under a fresh lexicon and ID format (names only)."""
    skin_seed = derive_seed(seed, "reskin")
    out = _copy(spec)
    out["lexicon"] = assign_words(spec["lexicon"], spec["pool"], skin_seed)
    out["id_format"] = make_id_format(skin_seed, {t["sym"]: out["lexicon"][t["sym"]] for t in spec["tables"]})
    return out


def with_semantics(spec: Spec, **changes: Any) -> Spec:
    """A copy of ``spec`` that differs only in the named transition semantics."""
    for name, value in changes.items():
        if name not in SEMANTICS or value not in SEMANTICS[name]:
            raise ValueError(f"unknown semantics {name}={value!r}; choose from {SEMANTICS}")
    out = _copy(spec)
    out["semantics"].update(changes)
    return out


def with_verifier(spec: Spec, **changes: Any) -> Spec:
    """A copy of ``spec`` that differs only in the named verifier settings."""
    for name, value in changes.items():
        if name not in VERIFIER or value not in VERIFIER[name]:
            raise ValueError(f"unknown verifier setting {name}={value!r}; choose from {VERIFIER}")
    out = _copy(spec)
    out["verifier"].update(changes)
    return out
