"""Worlds (L2), variants (L1), contents (L0) and the environment spec: a small Python repository.

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
their common fields). The expected value of every test is computed by running the clean code
(answer-first), so the clean suite passes by construction and fails wherever a test exercises
code that behaves otherwise.

The *spec* is plain JSON: the structure, the content, the lexicon (world names from toolworld's
``lexicon``: a held-out world's words share no syllable with training's), the rendered files and
the step limit. The environment reads the files; the signatures read the structure and run the
files on a probe.
"""

from __future__ import annotations

import builtins
import json
import keyword
import random
from collections.abc import Mapping
from typing import Any

from axisrl.domains.levels import draw_variant
from axisrl.domains.repoworld.runner import Session, call_functions
from axisrl.domains.repoworld.templates import (
    INT3_TO_INT,
    LEAVES,
    ROLES,
    TEMPLATES,
    WIDE_RANGE_TEMPLATES,
    Template,
    contracts,
    needed_fields,
)
from axisrl.domains.toolworld.canon import derive_seed, short_hash
from axisrl.domains.toolworld.lexicon import SYLLABLES, assign_words, entity_name, make_word

SPEC_FORMAT = "repoworld/1"
HORIZON_LIMIT = 30
"""The step limit of a repoworld episode when the config's ``max_steps`` is shorter: toolworld's
default of 10 is below a developer's reference here (about 9-19 calls), so the spec carries
``max(max_steps, HORIZON_LIMIT)``."""
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
RESERVED = frozenset(dir(builtins)) | frozenset({"dataclass", "field", "NamedTuple", "dataclasses", "typing", "tests"})

Structure = dict[str, Any]
Spec = dict[str, Any]


def _copy(obj: Any) -> Any:
    return json.loads(json.dumps(obj))


def _type(structure: Structure, sym: str) -> dict[str, Any]:
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
        record = _type(structure, function["type"]) if function["type"] else {"fields": [{}]}
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
            record = _type(structure, t)
            number = max(int(f["sym"][1:]) for f in record["fields"]) + 1
            record["fields"].append({"sym": f"f{number}", "type": kind})
        else:
            t, value = target.split("=")
            _type(structure, t)["record" if action == "record" else "default"] = _parse(value)
    else:
        sym, value = rest.split("=", 1)
        next(f for f in structure["functions"] if f["sym"] == sym)["contract"] = value


def sample_variant(structure: Structure, variant_seed: int | None) -> tuple[Structure, list[str]]:
    """Apply 1-3 declared edits drawn from ``variant_seed``; ``None`` is the unedited world."""
    return draw_variant(structure, variant_seed, _copy, _edit_options, lambda s, e, _rng: _apply_edit(s, e))


def edit_options(structure: Structure) -> dict[str, list[str]]:
    """Every edit a variant of ``structure`` could apply, by level (``api``, ``schema``, ``semantics``)."""
    return _edit_options(structure)


def with_edit(structure: Structure, edit: str) -> Structure:
    """A copy of ``structure`` with one declared edit applied."""
    out = _copy(structure)
    _apply_edit(out, edit)
    return out


# ---------------------------------------------------------------------------------------------- L0


def _records(
    structure: Structure, record_sym: str, n: int, seed: int, stream: tuple, pool: str, taken: set[str]
) -> list[dict[str, Any]]:
    record = _type(structure, record_sym)
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


# ---------------------------------------------------------------------------------------------- names


def lexicon_symbols(structure: Structure) -> list[str]:
    """Every symbol that needs a surface word: package, modules, types, fields, functions, constants, variables."""
    symbols = ["package", "module:records"] + [f"module:{m['sym']}" for m in structure["modules"]]
    for record in structure["types"]:
        symbols.append(f"type:{record['sym']}")
        symbols += [f"field:{record['sym']}.{f['sym']}" for f in record["fields"]]
    symbols += [f"function:{f['sym']}" for f in structure["functions"]]
    symbols += [f"constant:{c['sym']}" for c in structure["constants"]]
    return symbols + [f"var:{role}" for role in ROLES]


def surface(symbol: str, word: str) -> str:
    """How a symbol's word is written in code: types capitalised, constants upper case."""
    if symbol.startswith("type:"):
        return word.capitalize()
    if symbol.startswith("constant:"):
        return word.upper()
    return word


def _safe(symbol: str, word: str) -> bool:
    name = surface(symbol, word)
    return not keyword.iskeyword(name) and name not in RESERVED and not keyword.issoftkeyword(name)


def make_lexicon(symbols: list[str], pool: str, seed: int) -> dict[str, str]:
    """toolworld's ``assign_words`` with every word that would spell a Python keyword or builtin
    (as written in code) lengthened by a syllable of the same pool."""
    words = assign_words(symbols, pool, seed)
    taken = set(words.values())
    for symbol in sorted(words):
        word = words[symbol]
        if _safe(symbol, word):
            continue
        while not _safe(symbol, word) or word in taken:
            word += SYLLABLES[pool][0]
        taken.add(word)
        words[symbol] = word
    return words


class Names:
    """A structure's symbols under a lexicon, as written in code."""

    def __init__(self, structure: Structure, lexicon: Mapping[str, str]) -> None:
        self.structure = structure
        self.lexicon = lexicon

    def __call__(self, symbol: str) -> str:
        return surface(symbol, self.lexicon[symbol])

    def record(self, sym: str) -> str:
        return self(f"type:{sym}")

    def field(self, record: str, sym: str) -> str:
        return self(f"field:{record}.{sym}")

    def function(self, sym: str) -> str:
        return self(f"function:{sym}")

    def module(self, sym: str) -> str:
        return self(f"module:{sym}")

    def constant(self, sym: str) -> str:
        return self(f"constant:{sym}")

    def path(self, module_sym: str) -> str:
        return f"{self('package')}/{self.module(module_sym)}.py"

    def test_path(self, module_sym: str) -> str:
        return f"tests/test_{self.module(module_sym)}.py"

    def slots(self, function: Mapping[str, Any]) -> dict[str, str]:
        """The names a template's body is written in."""
        names = {role: self(f"var:{role}") for role in ROLES}
        names["fn"] = self.function(function["sym"])
        for slot, sym in function["fields"].items():
            names[slot] = self.field(function["type"], sym)
        for slot, sym in function["callees"].items():
            names[slot] = self.function(sym)
        if function["constant"]:
            names["K"] = self.constant(function["constant"])
        return names

    def vocabulary(self) -> list[str]:
        """Every world name an agent reads in the code (test names and paths are made of these)."""
        return sorted({self(symbol) for symbol in self.lexicon})


# ---------------------------------------------------------------------------------------------- files


DEFAULTS = {"int": "0", "bool": "False", "str": '""'}


def render_records(structure: Structure, names: Names) -> str:
    dataclass_types = [t for t in structure["types"] if t["record"] == "dataclass"]
    lines: list[str] = []
    if dataclass_types:
        needs_field = any(t["default"] and t["fields"][-1]["type"] == "list" for t in dataclass_types)
        lines.append("from dataclasses import dataclass" + (", field" if needs_field else ""))
    if len(dataclass_types) < len(structure["types"]):
        lines.append("from typing import NamedTuple")
    for record in structure["types"]:
        name = names.record(record["sym"])
        lines += ["", ""]
        if record["record"] == "dataclass":
            lines += ["@dataclass(frozen=True)", f"class {name}:"]
        else:
            lines.append(f"class {name}(NamedTuple):")
        for k, f in enumerate(record["fields"]):
            text = f"    {names.field(record['sym'], f['sym'])}: {f['type']}"
            if record["default"] and k == len(record["fields"]) - 1 and k > 0:
                if f["type"] != "list":
                    text += f" = {DEFAULTS[f['type']]}"
                else:
                    text += " = field(default_factory=list)" if record["record"] == "dataclass" else " = []"
            lines.append(text)
    return "\n".join(lines) + "\n"


def _module_functions(structure: Structure, module_sym: str) -> list[dict[str, Any]]:
    return [f for f in structure["functions"] if f["module"] == module_sym]


def render_module(structure: Structure, module_sym: str, names: Names, constants: Mapping[str, int]) -> str:
    functions = _module_functions(structure, module_sym)
    by_sym = {f["sym"]: f for f in structure["functions"]}
    imports: dict[str, list[str]] = {}
    for function in functions:
        for callee in function["callees"].values():
            imports.setdefault(by_sym[callee]["module"], []).append(names.function(callee))
    order = [m["sym"] for m in structure["modules"]]
    lines = [
        f"from {names('package')}.{names.module(m)} import {', '.join(sorted(set(imports[m])))}"
        for m in sorted(imports, key=order.index)
    ]
    module_constants = [c["sym"] for c in structure["constants"] if c["module"] == module_sym]
    if module_constants:
        if lines:
            lines.append("")
        lines += [f"{names.constant(c)} = {constants[c]}" for c in module_constants]
    for function in functions:
        if lines:
            lines += ["", ""]
        lines += function_template(function).body(names.slots(function), function["contract"])
    return "\n".join(lines) + "\n"


def _literal(structure: Structure, names: Names, record_sym: str, values: Mapping[str, Any]) -> str:
    record = _type(structure, record_sym)
    parts = [f"{names.field(record_sym, f['sym'])}={values[f['sym']]!r}" for f in record["fields"]]
    return f"{names.record(record_sym)}({', '.join(parts)})"


def _test_body(structure: Structure, names: Names, function: Mapping[str, Any], case: Mapping[str, Any]) -> list[str]:
    """The lines of one test before its assert: the argument set-up and ``result = f(...)``."""
    template = function_template(function)
    setup: list[str] = []
    arguments: list[str] = []
    for role, arg in zip(template.params, case["args"]):
        if "records" in arg:
            variable = names(f"var:{role}")
            setup.append(f"    {variable} = [")
            setup += [f"        {_literal(structure, names, function['type'], r)}," for r in arg["records"]]
            setup.append("    ]")
            arguments.append(variable)
        elif "record" in arg:
            variable = names(f"var:{role}")
            setup.append(f"    {variable} = {_literal(structure, names, function['type'], arg['record'])}")
            arguments.append(variable)
        else:
            arguments.append(repr(arg["int"]))
    call = f"{names.function(function['sym'])}({', '.join(arguments)})"
    return setup + [f"    {names('var:result')} = {call}"]


def _expected(structure: Structure, names: Names, sources: Mapping[str, str], content: Mapping[str, Any]) -> dict:
    """Every test's expected value (its repr), by running the clean code on its arguments."""
    records_module = f"{names('package')}.{names.module('records')}"

    def run(session: Session) -> list[Any]:
        records = session.load(records_module)
        out = []
        for function in structure["functions"]:
            module = session.load(f"{names('package')}.{names.module(function['module'])}")
            target = getattr(module, names.function(function["sym"]))
            for case in content["cases"][function["sym"]]:
                args = []
                for arg in case["args"]:
                    if "records" in arg or "record" in arg:
                        cls = getattr(records, names.record(function["type"]))
                        build = [arg["record"]] if "record" in arg else arg["records"]
                        objects = [
                            cls(**{names.field(function["type"], f): v for f, v in values.items()}) for values in build
                        ]
                        args.append(objects[0] if "record" in arg else objects)
                    else:
                        args.append(arg["int"])
                out.append(((function["sym"], len(out)), repr(target(*args))))
        return out

    results = call_functions(sources, run)
    expected: dict[str, list[str]] = {}
    for (sym, _), text in results:
        expected.setdefault(sym, []).append(text)
    return expected


def render_tests(
    structure: Structure, names: Names, module_sym: str, content: Mapping[str, Any], expected: Mapping[str, list[str]]
) -> str:
    functions = _module_functions(structure, module_sym)
    records = sorted({names.record(f["type"]) for f in functions if f["type"]})
    lines = []
    if records:
        lines.append(f"from {names('package')}.{names.module('records')} import {', '.join(records)}")
    lines.append(
        f"from {names('package')}.{names.module(module_sym)} import "
        + ", ".join(names.function(f["sym"]) for f in functions)
    )
    for function in functions:
        for k, case in enumerate(content["cases"][function["sym"]], start=1):
            lines += ["", "", f"def test_{names.function(function['sym'])}_{k}():"]
            lines += _test_body(structure, names, function, case)
            lines.append(f"    assert {names('var:result')} == {expected[function['sym']][k - 1]}")
    return "\n".join(lines) + "\n"


def render_files(structure: Structure, content: Mapping[str, Any], names: Names) -> dict[str, str]:
    """The repository: records, one file per module, one test file per module."""
    package = names("package")
    sources = {f"{package}/{names.module('records')}.py": render_records(structure, names)}
    for module in structure["modules"]:
        sources[names.path(module["sym"])] = render_module(structure, module["sym"], names, content["constants"])
    expected = _expected(structure, names, sources, content)
    files = dict(sources)
    for module in structure["modules"]:
        files[names.test_path(module["sym"])] = render_tests(structure, names, module["sym"], content, expected)
    return dict(sorted(files.items()))


# ---------------------------------------------------------------------------------------------- spec


def build_spec(structure: Structure, content: Mapping[str, Any], pool: str, skin_seed: int, max_steps: int) -> Spec:
    """The environment: structure, content, lexicon (from ``skin_seed``), the rendered files, the step limit."""
    lexicon = make_lexicon(lexicon_symbols(structure), pool, skin_seed)
    names = Names(structure, lexicon)
    return {
        "format": SPEC_FORMAT,
        "pool": pool,
        "structure": _copy(structure),
        "content": _copy(content),
        "lexicon": lexicon,
        "files": render_files(structure, content, names),
        "max_steps": max(max_steps, HORIZON_LIMIT),
    }


def names_of(spec: Spec) -> Names:
    return Names(spec["structure"], spec["lexicon"])


def env_id(spec: Spec) -> str:
    """First 16 hex chars of sha256 over the spec's canonical JSON, tagged with the domain."""
    return short_hash(["repoworld-env", spec])


def reskin(spec: Spec, seed: int) -> Spec:
    """The same repository (structure and content) under fresh names."""
    out = _copy(spec)
    out["lexicon"] = make_lexicon(lexicon_symbols(spec["structure"]), spec["pool"], derive_seed(seed, "reskin"))
    out["files"] = render_files(spec["structure"], spec["content"], Names(spec["structure"], out["lexicon"]))
    return out


__all__ = [
    "HORIZON_LIMIT",
    "SPEC_FORMAT",
    "Names",
    "build_spec",
    "edit_options",
    "env_id",
    "names_of",
    "reskin",
    "sample_content",
    "sample_variant",
    "sample_world",
    "with_edit",
]
