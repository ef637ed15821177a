"""A repoworld world under names, as files, and the environment spec.

A world's symbols get words from a lexicon (toolworld's ``lexicon``: a held-out world's words share no
syllable with training's; a word that would spell a Python keyword or builtin is lengthened), and
``Names`` writes them as code. The files are the repository: the record types, one module per
function module and one test file per module. The expected value of every test is computed by
running the clean code (answer-first), so the clean suite passes by construction and fails wherever a
test exercises code that behaves otherwise.

The *spec* is plain JSON: the structure, the content, the lexicon, the rendered files and the step
limit. The environment reads the files; the signatures read the structure and run the files on a
probe.
"""

from __future__ import annotations

import builtins
import keyword
from collections.abc import Mapping
from typing import Any

from axisrl.domains.canon import derive_seed, short_hash
from axisrl.domains.repoworld.runner import Session, call_functions
from axisrl.domains.repoworld.templates import ROLES
from axisrl.domains.repoworld.world import Structure, function_template, json_copy, record_type
from axisrl.domains.toolworld.lexicon import SYLLABLES, assign_words

SPEC_FORMAT = "repoworld/1"
HORIZON_LIMIT = 30
"""The step limit of a repoworld episode when the config's ``max_steps`` is shorter: toolworld's
default of 10 is below a developer's reference here (about 9-19 calls), so the spec carries
``max(max_steps, HORIZON_LIMIT)``."""
RESERVED = frozenset(dir(builtins)) | frozenset({"dataclass", "field", "NamedTuple", "dataclasses", "typing", "tests"})

Spec = dict[str, Any]


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
    record = record_type(structure, record_sym)
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
        "structure": json_copy(structure),
        "content": json_copy(content),
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
    out = json_copy(spec)
    out["lexicon"] = make_lexicon(lexicon_symbols(spec["structure"]), spec["pool"], derive_seed(seed, "reskin"))
    out["files"] = render_files(spec["structure"], spec["content"], Names(spec["structure"], out["lexicon"]))
    return out


__all__ = [
    "HORIZON_LIMIT",
    "SPEC_FORMAT",
    "Names",
    "Spec",
    "build_spec",
    "env_id",
    "make_lexicon",
    "names_of",
    "render_files",
    "reskin",
]
