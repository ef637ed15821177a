"""Name-free environment signatures and token sets of a repository.

Record types are named by their role ``r<i>`` (their position in the structure, which a reskin
keeps) and functions by their kind over those roles, so no world name enters any signature:

* ``sig_api`` (the API set and the repository's layout): the tools the agent has, with their
  parameters, and per module its layer and the kinds of its functions;
* ``sig_schema``: the record types: dataclass or NamedTuple, field types in order, a default on
  the last field;
* ``sig_sem``: a behavioural fingerprint: every function run by the real runner on a fixed probe
  (canonical records built from field positions, ints from their values, module constants set to
  one canonical value so that content, which is L0, does not enter), records in the outputs
  replaced by their probe position; it sees contracts (a filter's comparison, first or last
  match, ...) and what calls what, and nothing of names or content;
* ``sig_ver``: the verifier: the suite's shape (tests per file, in layer order);
* ``skin``: the lexicon, the only thing a reskin changes.

A reskin keeps every signature but ``skin``; an ``api:`` edit changes ``sig_api``, a ``schema:``
edit ``sig_schema`` and a ``semantics:`` edit ``sig_sem`` (and only that one).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

from axisrl.domains.canon import canonical_json, short_hash
from axisrl.domains.repoworld.env import tool_names
from axisrl.domains.repoworld.runner import Session, call_functions
from axisrl.domains.repoworld.spec import Names, names_of
from axisrl.domains.repoworld.world import CASES_PER_COMPOSITE, CASES_PER_LEAF, function_template

TOOL_SIGNATURES = {
    "list_files": "list_files()",
    "read_file": "read_file(path:str)",
    "read_definition": "read_definition(name:str)",
    "search": "search(name:str)",
    "edit": "edit(path:str,line:int,replacement:str)",
    "finish": "finish()",
}
PROBE_BASE = (1, 3, 3, 5, 1, 4)
"""Probe int values of field position 0 (position ``j`` adds ``j`` mod 6): repeats (first vs last
match), equal values at every bound, and 9 as a value no record has."""
PROBE_VALUES = (0, 1, 2, 3, 4, 5, 9)
"""Int arguments of the probe: every value a probe field can take, and one none takes (the
same for every schema, so adding a field does not move the probe)."""
PROBE_CONSTANT = 2
PROBE_TRIPLES = ((0, 2, 6), (4, 2, 6), (9, 2, 6), (4, 6, 2), (20, 3, 3))


def _role(structure: Mapping[str, Any], record: str | None) -> str:
    return "-" if record is None else f"r{[t['sym'] for t in structure['types']].index(record)}"


def _tools(api: Mapping[str, Any]) -> list[str]:
    out = []
    for name in tool_names(api):
        if name == "run_tests":
            out.append("run_tests(path?:str)" if api["tests"] == "file" else "run_tests()")
        else:
            out.append(TOOL_SIGNATURES[name])
    return sorted(out)


def _layout(structure: Mapping[str, Any]) -> list[Any]:
    modules = []
    for module in structure["modules"]:
        kinds = sorted(
            function_template(f).kind.token(_role(structure, f["type"]))
            for f in structure["functions"]
            if f["module"] == module["sym"]
        )
        modules.append([module["layer"], kinds])
    return sorted(modules)


def _schema(structure: Mapping[str, Any]) -> list[Any]:
    return [[t["record"], bool(t["default"]), [f["type"] for f in t["fields"]]] for t in structure["types"]]


def _probe_rows(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for n in range(len(PROBE_BASE)):
        row: dict[str, Any] = {}
        for j, f in enumerate(record["fields"]):
            row[f["sym"]] = {
                "int": (PROBE_BASE[n] + j) % 6,
                "bool": (n + j) % 3 == 0,
                "str": f"k{n}" if j == 0 else f"s{n}",
                "list": [n] * (n % 2),
            }[f["type"]]
        rows.append(row)
    return rows


def _probe_arguments(kind_params: tuple[str, ...], rows: list[Any], values: list[int]) -> list[tuple]:
    if kind_params == ("int", "int", "int"):
        return list(PROBE_TRIPLES)
    if kind_params == ("item",):
        return [(row,) for row in rows]
    if kind_params == ("items",):
        return [(rows,), (rows[2:],), ([],)]
    if kind_params == ("items", "int"):
        return [(rows, v) for v in values] + [([], values[0])]
    pairs = [(a, b) for a in values[:5] for b in values[:5] if a <= b]
    return [(rows, a, b) for a, b in pairs] + [(rows, values[-1], values[0])]


def _canonical(value: Any, rows: list[Any]) -> Any:
    if isinstance(value, list | tuple) and not any(value is row for row in rows):
        return [_canonical(v, rows) for v in value]
    for k, row in enumerate(rows):
        if value is row:
            return ["record", k]
    return value


def probe(spec: Mapping[str, Any]) -> list[Any]:
    """Every function's outputs on the probe, in a name-free order (see the module docstring)."""
    structure = spec["structure"]
    names: Names = names_of(spec)
    package = names("package")

    def run(session: Session) -> list[Any]:
        records = session.load(f"{package}.{names.module('records')}")
        for constant in structure["constants"]:
            module = session.load(f"{package}.{names.module(constant['module'])}")
            setattr(module, names.constant(constant["sym"]), PROBE_CONSTANT)
        built: dict[str, list[Any]] = {}
        for record in structure["types"]:
            cls = getattr(records, names.record(record["sym"]))
            rows = _probe_rows(record)
            built[record["sym"]] = [cls(**{names.field(record["sym"], f): v for f, v in row.items()}) for row in rows]
        out = []
        for function in structure["functions"]:
            template = function_template(function)
            module = session.load(f"{package}.{names.module(function['module'])}")
            target = getattr(module, names.function(function["sym"]))
            rows = built.get(function["type"], [])
            outputs = []
            for args in _probe_arguments(template.kind.params, rows, list(PROBE_VALUES)):
                try:
                    outputs.append(_canonical(target(*args), rows))
                except Exception as error:  # a contract may raise on a probe input; that is behaviour too
                    outputs.append(["raises", type(error).__name__])
            role = _role(structure, function["type"])
            out.append([module_layer(structure, function["module"]), template.kind.token(role), outputs])
        return sorted(out, key=canonical_json)

    return call_functions(spec["files"], run)


def module_layer(structure: Mapping[str, Any], module: str) -> int:
    return next(m["layer"] for m in structure["modules"] if m["sym"] == module)


@functools.lru_cache(maxsize=4096)
def _signatures(text: str) -> dict[str, str]:
    spec = json.loads(text)
    structure = spec["structure"]
    tests = []
    for module in sorted(structure["modules"], key=lambda m: m["layer"]):
        count = sum(
            CASES_PER_LEAF if function_template(f).leaf else CASES_PER_COMPOSITE
            for f in structure["functions"]
            if f["module"] == module["sym"]
        )
        tests.append([module["layer"], count])
    return {
        "sig_api": short_hash(["repoworld-api", _tools(structure["api"]), _layout(structure)]),
        "sig_schema": short_hash(["repoworld-schema", _schema(structure)]),
        "sig_sem": short_hash(["repoworld-sem", probe(spec)]),
        "sig_ver": short_hash(["repoworld-suite", sorted(tests)]),
        "skin": short_hash(["repoworld-skin", spec["lexicon"]]),
    }


def signatures(spec: Mapping[str, Any]) -> dict[str, str]:
    """``sig_api``, ``sig_schema``, ``sig_sem``, ``sig_ver`` (name-free) and ``skin``."""
    return dict(_signatures(canonical_json(spec)))


def tool_tokens(spec: Mapping[str, Any]) -> frozenset[str]:
    """One token per tool and per function kind with its layer, e.g. ``fn/L1/(items:r0,int)->int``."""
    structure = spec["structure"]
    tokens = set(_tools(structure["api"]))
    for layer, kinds in _layout(structure):
        tokens.update(f"fn/L{layer}/{kind}" for kind in kinds)
    return frozenset(tokens)


def schema_tokens(spec: Mapping[str, Any]) -> frozenset[str]:
    """Record, field and default tokens in role indices, e.g. ``field/r0.2/int``, ``record/r1/namedtuple``."""
    tokens = set()
    for i, (kind, default, fields) in enumerate(_schema(spec["structure"])):
        tokens.add(f"record/r{i}/{kind}")
        tokens.add(f"fields/r{i}/{len(fields)}")
        tokens.update(f"field/r{i}.{j}/{t}" for j, t in enumerate(fields))
        if default:
            tokens.add(f"default/r{i}/{fields[-1]}")
    return frozenset(tokens)


def transition_tokens(spec: Mapping[str, Any]) -> frozenset[str]:
    """Declared contracts and call edges between templates, e.g. ``contract/select=>=``, ``call/pipe->total``."""
    structure = spec["structure"]
    by_sym = {f["sym"]: f for f in structure["functions"]}
    tokens = {f"contract/{f['template']}={f['contract']}" for f in structure["functions"]}
    tokens.update(
        f"call/{f['template']}->{by_sym[callee]['template']}"
        for f in structure["functions"]
        for callee in f["callees"].values()
    )
    return frozenset(tokens)
