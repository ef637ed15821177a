"""repoworld's compact view: how its tools, issue reports and tool outputs read in the shared vocabulary.

``RepoLexicon`` is the ``axisrl.domains.callview.Lexicon`` of repoworld and ``compact_view`` the
domain's ``ViewFactory`` (``CallView`` over ``RepoworldEnv.candidates``). Every repository word (a
path, a function, a record type, a test, a constant, a value, a line of code) reaches a token only
through the episode's ``Namer``, and everything is named in a name-free order (files by their
structural rank, definitions by file rank and line), so a re-skinned repository renders identically.

Symbols, by the role a string plays (the kind its candidate arguments are named with):

* ``E``: what a call addresses: a path (``read_file``, ``run_tests``, ``edit``) and a definition's
  name (``read_definition``, ``search``): functions, record types, constants and tests;
* ``V``: a value: an expected or observed result of a test, an offered line rewrite (``edit``'s
  replacement); integers are ``#n`` (line numbers, counts, integer results) and Python's ``None``,
  ``True`` and ``False`` read ``null``, ``true`` and ``false``.

Tools (descriptors ``[access, return kind, semantics]``, parameters by kind):

================================  ====  ========  ========  ===========================================
tool                              acc.  returns   sem.      parameters
================================  ====  ========  ========  ===========================================
list_files                        R     ret:ids   sem:-     (none)
read_file / read_definition       R     ret:row   sem:-     id (a path / a name)
search                            R     ret:list  sem:-     id (a name)
run_tests                         R     ret:agg   sem:-     id (a test file; none where only the suite runs)
edit                              W     ret:ack   sem:set   id (path), int (line), val (replacement)
finish                            R     ret:-     sem:end   answer (never filled)
================================  ====  ========  ========  ===========================================

Goal clauses (what the issue report states, never the bug's place): ``["eq", E(fn), expected]``
(the reported function should return the expected value), ``["absent", E(fn), actual | "err"]``
(what it returned, or that it raised) and ``["ref", E(fn), E(record)]`` (the record type the
reproduction builds its input of), where ``fn`` is the function the report names.

Observation pairs (at most ``MAX_PAIRS``, most useful first):

* ``list_files``: ``["count", #files]``; per source module ``[E(module), E(its test file)]``, the
  records module (the one without tests) ``["ent", E(path)]``;
* ``run_tests``: ``["count", #passed]``, ``["sum", #failed]``; per failing test, the reported
  function's first, ``[E(handle), E(function under test)]`` (the handle is what a read passes: the
  test's name where code is read by definition, its file where it is read by file; one pair per
  file and function) and, where a handle is a test, ``[E(test), expected]`` for the reported
  function's tests; where tests run per file and code is read by definition,
  ``[E(test file), E(function)]`` too;
* a read (``read_file`` / ``read_definition``): ``["id", E(path)]``; each import
  ``[E(name), E(module path)]``; per definition in view (line order) a test's
  ``[E(test), E(function)]`` (and, for the reported function, ``[E(test), expected]`` and
  ``[E(test), E(record)]``), a function's call edges ``[E(def), E(callee or constant)]`` (or
  ``["ent", E(def)]`` for a leaf), a record type's or constant's ``["ent", E(name)]``; then each
  line with offered rewrites ``[#line, E(its definition)]``;
* ``search``: ``["count", #matches]``, the definition ``[E(name), E(path)]`` and each user
  ``[E(caller), E(name)]``;
* ``edit``: ``[E(path), #line]`` and ``[#line, E(its definition)]``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from axisrl.domains.callview import FINISH_SHAPE, CallView, Namer, ToolShape
from axisrl.domains.repoworld.repo import TESTS_DIR, Repository, TestCase

MAX_PAIRS = 16
"""Observation pairs shown per step (the most useful first)."""

_FUNCTION = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*)`")
_EXPECTED = re.compile(r"^Expected: (.*)$", re.MULTILINE)
_ACTUAL = re.compile(r"^Actual: (.*)$", re.MULTILINE)
_FAILED_ASSERT = re.compile(r"^assert (\w+) == (.*) failed: \1 was (.*)$")
_NUMBERED = re.compile(r"^\s*(\d+)\| ?(.*)$")
_IMPORT = re.compile(r"^from ([\w.]+) import (.+)$")
_LITERALS = {"None": "null", "True": "true", "False": "false"}


class _Index:
    """Name-free lookups of one compiled repository (cached while it lives)."""

    def __init__(self, repo: Repository) -> None:
        self.repo = repo
        self.order = {name: (repo.rank.get(d.path, len(repo.rank)), d.start) for name, d in repo.definitions.items()}
        """Each definition's name-free position: its file's rank, then its first line."""
        self.by_path: dict[str, list[str]] = {}
        for name in sorted(repo.definitions, key=self.order.__getitem__):
            self.by_path.setdefault(repo.definitions[name].path, []).append(name)
        self.tests: dict[str, TestCase] = {case.name: case for case in repo.tests.values()}
        self.test_module: dict[str, str] = {}
        """Source module path -> its test file."""
        names = repo.names
        for module in repo.spec["structure"]["modules"]:
            self.test_module[names.path(module["sym"])] = names.test_path(module["sym"])

    def ordered(self, names: Iterable[str]) -> list[str]:
        return sorted(names, key=lambda n: self.order.get(n, (len(self.repo.rank), 0)))

    def files(self, paths: Iterable[str]) -> list[str]:
        return sorted(paths, key=lambda p: self.repo.rank.get(p, len(self.repo.rank)))

    def record_of(self, text: str) -> str | None:
        """The first record type (in definition order) the text builds a value of."""
        return next((n for n in self.ordered(self.repo.classes) if re.search(rf"\b{n}\(", text)), None)


_INDEX: dict[int, _Index] = {}


def _index(repo: Repository) -> _Index:
    hit = _INDEX.get(id(repo))
    if hit is None or hit.repo is not repo:
        if len(_INDEX) >= 256:
            del _INDEX[next(iter(_INDEX))]
        hit = _INDEX[id(repo)] = _Index(repo)
    return hit


def report(instruction: str) -> tuple[str | None, str | None, str | None]:
    """``(function, expected, actual)`` of an issue report (``tasks.report``); ``actual`` is None
    when the report says the function raised."""
    fn = _FUNCTION.search(instruction)
    expected = _EXPECTED.search(instruction)
    actual = _ACTUAL.search(instruction)
    shown = None if actual is None or actual.group(1).startswith("it raises ") else actual.group(1)
    return (fn and fn.group(1), expected and expected.group(1).strip(), shown and shown.strip())


def _value(text: str | None, name: Namer) -> str:
    """A result's token: ``#n`` for an integer, ``null``/``true``/``false`` for Python's literals, else V."""
    if text is None:
        return "err"
    return _LITERALS.get(text) or name(text, "V")


def _settle(env: Any, name: Namer) -> None:
    """Name every file and definition a candidate may pass, in a name-free order, so the candidates
    (which the environment lists in name order) never draw a slot first."""
    repo = env.repo
    index = _index(repo)
    for path in index.files(env.known_files):
        name(path, "E")
    names = env.known_names if repo.api["read"] == "definition" else env.known_names & repo.searchable
    if repo.api["read"] == "definition" or repo.api["search"]:
        for known in index.ordered(names):
            name(known, "E")


class RepoLexicon:
    """repoworld's ``Lexicon`` (stateless: one instance serves every episode)."""

    def tools(self, env: Any) -> Sequence[ToolShape]:
        api = env.repo.api
        shapes = [ToolShape("list_files", ("R", "ret:ids", "sem:-"), (), "list")]
        if api["read"] == "file":
            shapes.append(ToolShape("read_file", ("R", "ret:row", "sem:-"), (("path", "id"),), "read"))
        else:
            shapes.append(ToolShape("read_definition", ("R", "ret:row", "sem:-"), (("name", "id"),), "read"))
        if api["search"]:
            shapes.append(ToolShape("search", ("R", "ret:list", "sem:-"), (("name", "id"),), "search"))
        tests = (("path", "id"),) if api["tests"] == "file" else ()
        shapes.append(ToolShape("run_tests", ("R", "ret:agg", "sem:-"), tests, "test"))
        edit = (("path", "id"), ("line", "int"), ("replacement", "val"))
        shapes.append(ToolShape("edit", ("W", "ret:ack", "sem:set"), edit, "edit"))
        return [*shapes, FINISH_SHAPE]

    def goal(self, env: Any, task: Mapping[str, Any], name: Namer) -> list[list[str]]:
        fn, expected, actual = report(task.get("instruction", ""))
        clauses: list[list[str]] = []
        if fn is not None:
            subject = name(fn, "E")
            if expected is not None:
                clauses.append(["eq", subject, _value(expected, name)])
            clauses.append(["absent", subject, _value(actual, name)])
            record = _index(env.repo).record_of(task.get("instruction", ""))
            if record is not None:
                clauses.append(["ref", subject, name(record, "E")])
        _settle(env, name)
        return clauses

    def observation(
        self, env: Any, call: Mapping[str, Any], observation: Mapping[str, Any], name: Namer
    ) -> list[list[str]]:
        tool = call.get("name")
        if tool == "list_files":
            pairs = self._files(env, observation, name)
        elif tool == "run_tests":
            pairs = self._tests(env, observation, name)
        elif tool in ("read_file", "read_definition"):
            pairs = self._read(env, observation, name)
        elif tool == "search":
            pairs = self._search(env, observation, name)
        elif tool == "edit":
            pairs = self._edit(env, observation, name)
        else:
            pairs = [["err", "-"]]
        _settle(env, name)
        return pairs[:MAX_PAIRS]

    # ------------------------------------------------------------------------------ per tool

    @staticmethod
    def _files(env: Any, observation: Mapping[str, Any], name: Namer) -> list[list[str]]:
        index = _index(env.repo)
        files = [p for p in observation.get("files", ()) if isinstance(p, str)]
        pairs = [["count", name(len(files), "V")]]
        for path in index.files(p for p in files if not p.startswith(TESTS_DIR)):
            test = index.test_module.get(path)
            pairs.append([name(path, "E"), name(test, "E")] if test in files else ["ent", name(path, "E")])
        return pairs

    @staticmethod
    def _tests(env: Any, observation: Mapping[str, Any], name: Namer) -> list[list[str]]:
        repo = env.repo
        index = _index(repo)
        passed, failed = observation.get("passed"), observation.get("failed")
        pairs = [["count", name(passed, "V") if isinstance(passed, int) else "-"]]
        pairs.append(["sum", name(failed, "V") if isinstance(failed, int) else "-"])
        fn, _, _ = report(env.task.get("instruction", ""))
        failing: list[tuple[TestCase, str]] = []
        for line in observation.get("failures", ()):
            test_id, _, message = str(line).partition(": ")
            case = repo.tests.get(test_id)
            if case is not None:
                failing.append((case, message))
        # the reported function's tests first, then in the name-free order of the tests
        failing.sort(key=lambda item: (item[0].function != fn, index.order.get(item[0].name, (0, 0))))
        by_file = repo.api["read"] == "file"
        seen: set[tuple[str, str]] = set()
        for case, message in failing:
            handle = case.path if by_file else case.name
            if (handle, case.function) not in seen:
                seen.add((handle, case.function))
                pairs.append([name(handle, "E"), name(case.function, "E")])
            if case.function == fn and not by_file:
                match = _FAILED_ASSERT.match(message)
                pairs.append([name(handle, "E"), _value(match.group(2) if match else case.expected, name)])
        if not by_file and repo.api["tests"] == "file":
            for case, _ in failing:
                if (case.path, case.function) not in seen:
                    seen.add((case.path, case.function))
                    pairs.append([name(case.path, "E"), name(case.function, "E")])
        return pairs

    @staticmethod
    def _read(env: Any, observation: Mapping[str, Any], name: Namer) -> list[list[str]]:
        repo = env.repo
        index = _index(repo)
        path = observation.get("path")
        if not isinstance(path, str) or path not in repo.files:
            return [["err", "-"]]
        lines: list[tuple[int, str]] = []
        for text in str(observation.get("text", "")).split("\n"):
            match = _NUMBERED.match(text)
            if match:
                lines.append((int(match.group(1)), match.group(2)))
        if not lines:
            return [["id", name(path, "E")]]
        first, last = lines[0][0], lines[-1][0]
        fn, _, _ = report(env.task.get("instruction", ""))
        pairs = [["id", name(path, "E")]]
        for _, text in lines:  # imports: where each imported name is defined
            match = _IMPORT.match(text.strip())
            if match:
                module = match.group(1).replace(".", "/") + ".py"
                imported = [n.strip() for n in match.group(2).split(",")]
                if module in repo.files:
                    pairs += [
                        [name(n, "E"), name(module, "E")] for n in index.ordered(imported) if n in repo.definitions
                    ]
        shown = [n for n in index.by_path.get(path, ()) if first <= repo.definitions[n].start <= last]
        for defined in shown:
            definition = repo.definitions[defined]
            case = index.tests.get(defined) if path.startswith(TESTS_DIR) else None
            if case is not None:
                pairs.append([name(defined, "E"), name(case.function, "E")])
                if case.function == fn:
                    pairs.append([name(defined, "E"), _value(case.expected, name)])
                    record = index.record_of("\n".join(case.setup))
                    if record is not None:
                        pairs.append([name(defined, "E"), name(record, "E")])
            elif definition.kind == "function":
                used = index.ordered((*repo.calls.get(defined, ()), *repo.uses.get(defined, ())))
                pairs += [[name(defined, "E"), name(u, "E")] for u in used] or [["ent", name(defined, "E")]]
            else:
                pairs.append(["ent", name(defined, "E")])
        if not path.startswith(TESTS_DIR):
            for number, text in lines:
                if repo.rewrites(text):
                    owner = repo.owner(path, number)
                    pairs.append([name(number, "V"), name(owner.name, "E") if owner else "-"])
        return pairs

    @staticmethod
    def _search(env: Any, observation: Mapping[str, Any], name: Namer) -> list[list[str]]:
        repo = env.repo
        wanted = observation.get("name")
        matches = [m for m in observation.get("matches", ()) if isinstance(m, str)]
        more = observation.get("more", 0)
        pairs = [["count", name(len(matches) + (more if isinstance(more, int) else 0), "V")]]
        if not isinstance(wanted, str):
            return pairs
        sites: list[tuple[tuple[int, int], str, int]] = []
        for match in matches:
            path, _, rest = match.partition(":")
            number, _, _ = rest.partition(":")
            if path in repo.files and number.isdigit():
                sites.append(((repo.rank.get(path, len(repo.rank)), int(number)), path, int(number)))
        definition = repo.definitions.get(wanted)
        if definition is not None:
            pairs.append([name(wanted, "E"), name(definition.path, "E")])
        callers: list[str] = []
        for _, path, number in sorted(sites):
            owner = repo.owner(path, number)
            if owner is not None and owner.name != wanted and owner.name not in callers:
                callers.append(owner.name)
        pairs += [[name(caller, "E"), name(wanted, "E")] for caller in callers]
        return pairs

    @staticmethod
    def _edit(env: Any, observation: Mapping[str, Any], name: Namer) -> list[list[str]]:
        path, line = observation.get("path"), observation.get("line")
        if not isinstance(path, str) or not isinstance(line, int):
            return [["err", "-"]]
        owner = env.repo.owner(path, line)
        return [[name(path, "E"), name(line, "V")], [name(line, "V"), name(owner.name, "E") if owner else "-"]]


LEXICON = RepoLexicon()
compact_view = CallView.factory(LEXICON)
"""The domain's ``ViewFactory``: ``compact_view(spec, task, episode_seed, env)``."""

__all__ = ["LEXICON", "MAX_PAIRS", "RepoLexicon", "compact_view", "report"]
