"""A spec compiled for reading: its files, their definitions, call graph and tests, and the rewrite context.

Everything here is read off the files (with Python's ``ast``) and the structure's record fields,
so the environment, the task generator and the signatures see one repository the same way.
Compiled repositories are cached by the spec's content, as many episodes share one spec.
"""

from __future__ import annotations

import ast
import functools
import json
import textwrap
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from axisrl.domains.repoworld.mutations import Context, Rewrite, rewrites
from axisrl.domains.repoworld.spec import Names
from axisrl.domains.repoworld.world import fields_by_type

TESTS_DIR = "tests/"


@dataclass(frozen=True, slots=True)
class Definition:
    """A top-level definition: a function, a class or a constant, and its lines (1-based, inclusive)."""

    name: str
    kind: str
    path: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class TestCase:
    """One test as its file spells it: the set-up lines, the call under test and the expected value."""

    test_id: str
    path: str
    name: str
    function: str
    setup: tuple[str, ...]
    call: str
    expected: str


class Repository:
    """A spec's repository. Treat it (and the spec) as immutable."""

    def __init__(self, spec: Mapping[str, Any]) -> None:
        self.spec = spec
        self.files: dict[str, str] = dict(spec["files"])
        self.api: dict[str, Any] = dict(spec["structure"]["api"])
        self.max_steps: int = spec["max_steps"]
        self.names = Names(spec["structure"], spec["lexicon"])
        self.records_path = f"{self.names('package')}/{self.names.module('records')}.py"
        self.test_paths = tuple(p for p in self.files if p.startswith(TESTS_DIR))
        self.source_paths = tuple(p for p in self.files if not p.startswith(TESTS_DIR))
        self.lines: dict[str, tuple[str, ...]] = {p: tuple(text.split("\n")[:-1]) for p, text in self.files.items()}
        modules = spec["structure"]["modules"]
        self.rank: dict[str, int] = {self.records_path: 0}
        """A name-free order of the files (records, then modules and their tests in structure order),
        so that seeded choices among files are the same under a reskin."""
        for k, module in enumerate(modules):
            self.rank[self.names.path(module["sym"])] = 1 + k
            self.rank[self.names.test_path(module["sym"])] = 1 + len(modules) + k

        self.definitions: dict[str, Definition] = {}
        self.calls: dict[str, tuple[str, ...]] = {}
        self.uses: dict[str, tuple[str, ...]] = {}
        trees = {p: ast.parse(text) for p, text in self.files.items()}
        for path, tree in trees.items():
            for node in tree.body:
                if isinstance(node, ast.FunctionDef | ast.ClassDef):
                    kind = "class" if isinstance(node, ast.ClassDef) else "function"
                    self.definitions[node.name] = Definition(node.name, kind, path, node.lineno, node.end_lineno)
                elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    name = node.targets[0].id
                    self.definitions[name] = Definition(name, "constant", path, node.lineno, node.end_lineno)
        self.functions = frozenset(
            n for n, d in self.definitions.items() if d.kind == "function" and not d.path.startswith(TESTS_DIR)
        )
        self.constants = frozenset(n for n, d in self.definitions.items() if d.kind == "constant")
        self.classes = frozenset(n for n, d in self.definitions.items() if d.kind == "class")
        for path in self.source_paths:
            for node in trees[path].body:
                if isinstance(node, ast.FunctionDef):
                    used = [n.id for n in ast.walk(node) if isinstance(n, ast.Name)]
                    self.calls[node.name] = tuple(sorted({n for n in used if n in self.functions} - {node.name}))
                    self.uses[node.name] = tuple(sorted({n for n in used if n in self.constants}))

        self.tests: dict[str, TestCase] = {}
        for path in self.test_paths:
            for node in trees[path].body:
                if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                    self.tests[f"{path}::{node.name}"] = self._test_case(path, node)
        self.test_names = frozenset(case.name for case in self.tests.values())
        self.searchable = self.functions | self.constants | self.classes
        """Names ``search`` is offered for: the source's functions, constants and record types."""
        self.readable = self.searchable | self.test_names
        """Names ``read_definition`` is offered for: those and the test functions."""

        alternatives: dict[str, tuple[str, ...]] = {}
        for record in spec["structure"]["types"]:
            for group in fields_by_type(record).values():
                words = [self.names.field(record["sym"], f) for f in group]
                for word in words:
                    alternatives[word] = tuple(w for w in words if w != word)
        self.context = Context(alternatives, self.functions)
        self._rewrites: dict[str, tuple[Rewrite, ...]] = {}

    def _test_case(self, path: str, node: ast.FunctionDef) -> TestCase:
        text = self.files[path]
        *setup, call, check = node.body
        assert isinstance(call, ast.Assign) and isinstance(check, ast.Assert)
        assert isinstance(call.value, ast.Call) and isinstance(check.test, ast.Compare)
        lines = text.split("\n")
        return TestCase(
            f"{path}::{node.name}",
            path,
            node.name,
            call.value.func.id,
            tuple(textwrap.dedent("\n".join(lines[s.lineno - 1 : s.end_lineno])) for s in setup),
            lines[call.lineno - 1][call.value.col_offset : call.value.end_col_offset],
            lines[check.lineno - 1][check.test.comparators[0].col_offset : check.test.comparators[0].end_col_offset],
        )

    def rewrites(self, line: str) -> tuple[Rewrite, ...]:
        """The offered rewrites of a source line (cached by its text)."""
        hit = self._rewrites.get(line)
        if hit is None:
            hit = self._rewrites[line] = rewrites(line, self.context)
        return hit

    def owner(self, path: str, line: int) -> Definition | None:
        """The definition a line belongs to."""
        for definition in self.definitions.values():
            if definition.path == path and definition.start <= line <= definition.end:
                return definition
        return None

    def functions_at(self, path: str, line: int) -> tuple[str, ...]:
        """The functions whose behaviour a source line shapes: its own function, or every function
        that reads the constant it defines."""
        definition = self.owner(path, line)
        if definition is None:
            return ()
        if definition.kind == "constant":
            return tuple(sorted(f for f, used in self.uses.items() if definition.name in used))
        return (definition.name,) if definition.kind == "function" else ()

    def call_path(self, start: str, targets: tuple[str, ...]) -> list[str] | None:
        """The shortest call chain from ``start`` down to one of ``targets`` (both ends included)."""
        parents: dict[str, str | None] = {start: None}
        queue = deque([start])
        while queue:
            name = queue.popleft()
            if name in targets:
                chain = [name]
                while parents[chain[-1]] is not None:
                    chain.append(parents[chain[-1]])
                return chain[::-1]
            for callee in self.calls.get(name, ()):
                if callee not in parents:
                    parents[callee] = name
                    queue.append(callee)
        return None

    def test_file_of(self, function: str) -> str | None:
        """The test file of the module defining ``function``."""
        for case in self.tests.values():
            if case.function == function:
                return case.path
        return None


@functools.lru_cache(maxsize=256)
def _compile(text: str) -> Repository:
    return Repository(json.loads(text))


def compile_repo(spec: Mapping[str, Any]) -> Repository:
    """The compiled repository of ``spec``, shared by every episode of the same spec."""
    return _compile(json.dumps(spec, sort_keys=True, separators=(",", ":")))


__all__ = ["Definition", "Repository", "TestCase", "compile_repo"]
