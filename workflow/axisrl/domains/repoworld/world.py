"""Worlds (L2), variants (L1) and contents (L0): the name-free model of a small Python repository.

A *structure* is the name-free part of a repository, addressed by symbols: record types (``T0``
with fields ``f0`` (the str key), ``f1``, ...; a dataclass or a NamedTuple; whether its last field
has a default), modules in layers (layer 0 holds leaf functions over records, layer ``k`` holds
composites that call functions of lower layers), functions (a template from ``templates``, its
record type, the fields and callees it fills its slots with, its contract and its module
constant) and the API of the tools an agent works with (whether ``search`` exists, whether tests
run per file or only as a suite, whether code is read by file or by definition).

A *variant* applies 1-3 declared edits to a world and records them (``edits``): ``api:`` edits
change the tool set, ``schema:`` edits the record types (a field added, a dataclass made a
NamedTuple or back, a default on the last field), ``semantics:`` edits one function's contract.
A *content* is the concrete data: module constants and every test's arguments, each field of
each test drawing from its own stream (so two variants with one content seed share the values of
their common fields).

``spec`` names a structure and renders it as the repository's files.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from typing import Any

from axisrl.domains.canon import derive_seed
from axisrl.domains.levels import draw_variant
from axisrl.domains.repoworld.templates import (
    INT3_TO_INT,
    LEAVES,
    TEMPLATES,
    WIDE_RANGE_TEMPLATES,
    Template,
    contracts,
    needed_fields,
)
from axisrl.domains.toolworld.lexicon import entity_name, make_word

MODULES = (2, 4)
"""Function modules per world, when the config gives no ``tables`` range (its bounds are clipped to this)."""
ROWS = (4, 8)
"""Records per test list, when the config gives no ``rows_per_table`` range."""
CASES_PER_LEAF = 2
CASES_PER_COMPOSITE = 3
"""Tests per function: composites get more, so a bug low in a chain shows where users call it."""
INT_RANGE = (0, 9)
WIDE_RANGE = (0, 30)
CONSTANT_RANGE = (2, 4)
FIELD_TYPES = ("int", "bool", "str", "list")
RECORD_KINDS = ("dataclass", "namedtuple")
API = {"search": (True, False), "tests": ("file", "suite"), "read": ("file", "definition")}
LEAF_WEIGHTS = {
    "select": 1.0,
    "between": 0.6,
    "total": 1.0,
    "count": 1.0,
    "find": 0.8,
    "best": 0.8,
    "window": 0.7,
    "locate": 0.8,
    "score": 1.0,
    "clamp": 0.6,
}
COMPOSITE_WEIGHTS = {
    "pipe": 1.0,
    "range_total": 0.8,
    "spread": 0.9,
    "bounded": 0.8,
    "top_score": 0.8,
    "score_sum": 0.9,
    "lookup_score": 0.8,
}

Structure = dict[str, Any]


def json_copy(obj: Any) -> Any:
    """A deep copy of plain JSON data."""
    return json.loads(json.dumps(obj))


def record_type(structure: Structure, sym: str) -> dict[str, Any]:
    """The record type ``sym`` of a structure."""
    return next(t for t in structure["types"] if t["sym"] == sym)


def fields_by_type(record: Mapping[str, Any]) -> dict[str, list[str]]:
    """Field symbols of a record type grouped by type, the key (``f0``) left out."""
    out: dict[str, list[str]] = {}
    for f in record["fields"][1:]:
        out.setdefault(f["type"], []).append(f["sym"])
    return out


def function_template(function: Mapping[str, Any]) -> Template:
    return TEMPLATES[function["template"]]


# ---------------------------------------------------------------------------------------------- L2


def _record_type(rng: random.Random, sym: str) -> dict[str, Any]:
    kinds = ["int"] * rng.randint(2, 4) + ["bool"] * rng.randint(0, 2) + ["str"] * rng.randint(0, 1)
    kinds += ["list"] * rng.randint(0, 1)
    rng.shuffle(kinds)
    return {
        "sym": sym,
        "record": "dataclass" if rng.random() < 0.7 else "namedtuple",
        "default": rng.random() < 0.3,
        "fields": [{"sym": "f0", "type": "str"}] + [{"sym": f"f{j}", "type": k} for j, k in enumerate(kinds, start=1)],
    }


def _bind_fields(rng: random.Random, template: Template, record: Mapping[str, Any]) -> dict[str, str]:
    by_type = fields_by_type(record)
    out: dict[str, str] = {}
    for slot, kind in needed_fields(template, by_type):
        free = [f for f in by_type[kind] if f not in out.values()]
        out[slot] = rng.choice(free)
    return out


def _leaf(
    rng: random.Random, name: str, sym: str, module: str, types: list[dict[str, Any]], constants: list[dict[str, Any]]
) -> dict[str, Any]:
    template = TEMPLATES[name]
    record = rng.choice(types) if template.typed else None
    fields = _bind_fields(rng, template, record) if record else {}
    function = {
        "sym": sym,
        "module": module,
        "template": name,
        "type": record["sym"] if record else None,
        "fields": fields,
        "callees": {},
        "contract": rng.choice(contracts(template, fields_by_type(record) if record else {})),
        "constant": None,
    }
    if template.constant:
        function["constant"] = f"k{len(constants)}"
        constants.append({"sym": function["constant"], "module": module})
    return function


def _composite(
    rng: random.Random,
    sym: str,
    module: str,
    lower: list[tuple[int, dict[str, Any]]],
    called: set[str],
    target: Mapping[str, Any] | None,
) -> dict[str, Any] | None:
    """A composite over functions of lower layers that calls ``target`` (when given), or None when
    no template fits; every other slot prefers a callee from the highest layer that fits (the
    deepest call chain), and among those one that nothing calls yet."""
    names = list(COMPOSITE_WEIGHTS)
    order = []
    while names:
        pick = rng.choices(names, weights=[COMPOSITE_WEIGHTS[n] for n in names])[0]
        names.remove(pick)
        order.append(pick)
    record_syms = sorted({f["type"] for _, f in lower if f["type"]})
    if target is not None and target["type"] is not None:
        record_syms = [target["type"]]
    for name in order:
        template = TEMPLATES[name]
        slots = [
            slot for slot, kind in template.callees if target is not None and function_template(target).kind == kind
        ]
        if target is not None and not slots:
            continue
        for record in rng.sample(record_syms, len(record_syms)):
            callees: dict[str, str] = {slots[0]: target["sym"]} if target is not None else {}
            for slot, kind in template.callees:
                if slot in callees:
                    continue
                fits = [
                    (lay, f)
                    for lay, f in lower
                    if function_template(f).kind == kind
                    and f["type"] in (record, None)
                    and f["sym"] not in callees.values()
                    and (f["type"] is None) == (kind == INT3_TO_INT)
                ]
                if not fits:
                    break
                top = max(lay for lay, _ in fits)
                best = [f for lay, f in fits if lay == top]
                fresh = [f for f in best if f["sym"] not in called]
                callees[slot] = rng.choice(fresh or best)["sym"]
            else:
                return {
                    "sym": sym,
                    "module": module,
                    "template": name,
                    "type": record,
                    "fields": {},
                    "callees": {slot: callees[slot] for slot, _ in template.callees},
                    "contract": rng.choice(template.contracts),
                    "constant": None,
                }
    return None


def sample_world(world_seed: int, n_modules: tuple[int, int] = MODULES) -> Structure:
    """The structure of world ``world_seed``: record types, layered modules of functions, the API."""
    rng = random.Random(derive_seed(world_seed, "structure"))
    types = [_record_type(rng, f"T{i}") for i in range(rng.choice((1, 1, 2)))]
    low, high = max(2, min(n_modules)), min(4, max(n_modules))
    n = rng.randint(low, max(low, high))
    n_leaf = 1 if n == 2 or rng.random() < 0.6 else 2
    layers = [0] * n_leaf + list(range(1, n - n_leaf + 1))
    modules = [{"sym": f"m{i}", "layer": layer} for i, layer in enumerate(layers)]

    functions: list[dict[str, Any]] = []
    constants: list[dict[str, Any]] = []
    leaf_modules = [m["sym"] for m in modules if m["layer"] == 0]
    names: list[str] = [rng.choice(("select", "window")), "total", "score"]
    extras = [n for n in LEAVES if n not in names]
    for _ in range(rng.randint(1, 3)):
        pick = rng.choices(extras, weights=[LEAF_WEIGHTS[n] for n in extras])[0]
        extras.remove(pick)
        names.append(pick)
    rng.shuffle(names)
    for k, name in enumerate(names):
        module = leaf_modules[k * len(leaf_modules) // len(names)]
        functions.append(_leaf(rng, name, f"g{len(functions)}", module, types, constants))

    called: set[str] = set()
    for module in modules[n_leaf:]:
        lower = [(m["layer"], f) for m in modules for f in functions if f["module"] == m["sym"]]
        lower = [(lay, f) for lay, f in lower if lay < module["layer"]]
        for _ in range(rng.randint(2, 3)):
            uncalled = [(lay, f) for lay, f in lower if f["sym"] not in called]
            targets = [f for _, f in sorted(rng.sample(uncalled, len(uncalled)), key=lambda lf: -lf[0])]
            function = None
            for target in [*targets, None]:
                function = _composite(rng, f"g{len(functions)}", module["sym"], lower, called, target)
                if function is not None:
                    break
            if function is not None:
                called.update(function["callees"].values())
            else:
                name = rng.choices(LEAVES, weights=[LEAF_WEIGHTS[n] for n in LEAVES])[0]
                function = _leaf(rng, name, f"g{len(functions)}", module["sym"], types, constants)
            functions.append(function)

    api = {
        "search": rng.random() < 0.7,
        "tests": "file" if rng.random() < 0.7 else "suite",
        "read": "file" if rng.random() < 0.7 else "definition",
    }
    return {"types": types, "modules": modules, "functions": functions, "constants": constants, "api": api}


# ---------------------------------------------------------------------------------------------- L1


def _edit_options(structure: Structure) -> dict[str, list[str]]:
    """Applicable edits by level; each is a string ``_apply_edit`` understands."""
    api = [f"api:{key}={_other(API[key], structure['api'][key])}" for key in sorted(API)]
    schema = []
    for record in structure["types"]:
        t = record["sym"]
        schema += [f"schema:add_field:{t}:{kind}" for kind in FIELD_TYPES]
        schema.append(f"schema:record:{t}={_other(RECORD_KINDS, record['record'])}")
        schema.append(f"schema:default:{t}={not record['default']}")
    semantics = []
    for function in structure["functions"]:
        record = record_type(structure, function["type"]) if function["type"] else {"fields": [{}]}
        options = contracts(function_template(function), fields_by_type(record))
        semantics += [f"semantics:{function['sym']}={c}" for c in options if c != function["contract"]]
    return {"api": api, "schema": schema, "semantics": semantics}


def _other(options: tuple, value: Any) -> Any:
    a, b = options
    return b if value == a else a


def _parse(value: str) -> Any:
    return {"True": True, "False": False}.get(value, value)


def _apply_edit(structure: Structure, edit: str) -> None:
    level, rest = edit.split(":", 1)
    if level == "api":
        key, value = rest.split("=")
        structure["api"][key] = _parse(value)
    elif level == "schema":
        action, target = rest.split(":", 1)
        if action == "add_field":
            t, kind = target.split(":")
            record = record_type(structure, t)
            number = max(int(f["sym"][1:]) for f in record["fields"]) + 1
            record["fields"].append({"sym": f"f{number}", "type": kind})
        else:
            t, value = target.split("=")
            record_type(structure, t)["record" if action == "record" else "default"] = _parse(value)
    else:
        sym, value = rest.split("=", 1)
        next(f for f in structure["functions"] if f["sym"] == sym)["contract"] = value


def sample_variant(structure: Structure, variant_seed: int | None) -> tuple[Structure, list[str]]:
    """Apply 1-3 declared edits drawn from ``variant_seed``; ``None`` is the unedited world."""
    return draw_variant(structure, variant_seed, json_copy, _edit_options, lambda s, e, _rng: _apply_edit(s, e))


def edit_options(structure: Structure) -> dict[str, list[str]]:
    """Every edit a variant of ``structure`` could apply, by level (``api``, ``schema``, ``semantics``)."""
    return _edit_options(structure)


def with_edit(structure: Structure, edit: str) -> Structure:
    """A copy of ``structure`` with one declared edit applied."""
    out = json_copy(structure)
    _apply_edit(out, edit)
    return out


# ---------------------------------------------------------------------------------------------- L0


def _records(
    structure: Structure, record_sym: str, n: int, seed: int, stream: tuple, pool: str, taken: set[str]
) -> list[dict[str, Any]]:
    record = record_type(structure, record_sym)
    key_rng = random.Random(derive_seed(seed, "keys", *stream))
    columns: dict[str, list[Any]] = {}
    for f in record["fields"]:
        rng = random.Random(derive_seed(seed, "values", *stream, record_sym, f["sym"]))
        if f["sym"] == "f0":
            columns["f0"] = [entity_name(key_rng, pool, taken) for _ in range(n)]
        elif f["type"] == "int":
            columns[f["sym"]] = [rng.randint(*INT_RANGE) for _ in range(n)]
        elif f["type"] == "bool":
            columns[f["sym"]] = [rng.random() < 0.5 for _ in range(n)]
        elif f["type"] == "str":
            columns[f["sym"]] = [make_word(rng, pool) for _ in range(n)]
        else:
            columns[f["sym"]] = [[rng.randint(*INT_RANGE) for _ in range(rng.randint(0, 2))] for _ in range(n)]
    return [{f: columns[f][k] for f in columns} for k in range(n)]


def _case(
    structure: Structure, function: Mapping[str, Any], k: int, seed: int, pool: str, rows: tuple[int, int]
) -> dict[str, Any]:
    """One test's arguments: lists of records, one record or ints, by the template's parameters."""
    template = function_template(function)
    stream = (function["sym"], k)
    rng = random.Random(derive_seed(seed, "args", *stream))
    n = random.Random(derive_seed(seed, "rows", *stream)).randint(*rows)
    taken: set[str] = set()
    args: list[dict[str, Any]] = []
    wide = template.name in WIDE_RANGE_TEMPLATES
    low = rng.randint(*(WIDE_RANGE if wide else INT_RANGE))
    high = low + rng.randint(2, 15) if wide else rng.randint(low, INT_RANGE[1])
    for role, kind in zip(template.params, template.kind.params):
        if kind == "items":
            args.append({"records": _records(structure, function["type"], n, seed, stream, pool, taken)})
        elif kind == "item":
            args.append({"record": _records(structure, function["type"], 1, seed, stream, pool, taken)[0]})
        elif role == "low":
            args.append({"int": low})
        elif role == "high":
            args.append({"int": high})
        elif role == "page":
            args.append({"int": rng.randint(0, 2) if function["contract"] == "base0" else rng.randint(1, 3)})
        else:
            args.append({"int": rng.randint(*(WIDE_RANGE if wide else INT_RANGE))})
    return {"args": args}


def sample_content(structure: Structure, content_seed: int, pool: str, rows: tuple[int, int] = ROWS) -> dict[str, Any]:
    """Module constants and the test argument sets of every function."""
    constants = {
        c["sym"]: random.Random(derive_seed(content_seed, "constant", c["sym"])).randint(*CONSTANT_RANGE)
        for c in structure["constants"]
    }
    cases = {
        f["sym"]: [
            _case(structure, f, k, content_seed, pool, rows)
            for k in range(CASES_PER_LEAF if function_template(f).leaf else CASES_PER_COMPOSITE)
        ]
        for f in structure["functions"]
    }
    return {"constants": constants, "cases": cases}


__all__ = [
    "CASES_PER_COMPOSITE",
    "CASES_PER_LEAF",
    "MODULES",
    "ROWS",
    "Structure",
    "edit_options",
    "fields_by_type",
    "function_template",
    "json_copy",
    "record_type",
    "sample_content",
    "sample_variant",
    "sample_world",
    "with_edit",
]
