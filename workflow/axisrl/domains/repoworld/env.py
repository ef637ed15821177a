"""The episode API (toolworld's): ``reset``, ``step``, ``verify``, ``fork``, plus ``candidates``.

``RepoworldEnv(spec, task)``: ``reset()`` injects the task's bug and returns the issue report;
``step(call)`` runs one tool call and returns a JSON observation (errors are observations, never
exceptions); ``verify()`` runs the repository's own test suite for real (``runner``) on the
edited sources with the original tests, and succeeds when every test passes (partial credit:
tests passed / total). Tests are read-only, so a suite cannot be made to pass by editing it.

Tools, as the spec's API allows: ``list_files``; ``read_file(path)`` or ``read_definition(name)``;
``search(name)``; ``run_tests(path?)`` (one test file, or the whole suite; some APIs run only the
suite); ``edit(path, line, replacement)``, where the replacement must be one of the line's offered
rewrites (``mutations``), matched up to spacing; ``finish``.

``candidates()`` is the discrete action space a small learner, a random policy or a memoriser
picks from: every call an agent can name from what it has seen, in a fixed order. Files become
known from ``list_files`` or from paths in observations, names (functions, constants, record
types, tests) from the report and from every observation that mentions them; edits are offered
for the lines of the last read file or definition. ``step`` accepts any well-formed call, not
only candidates (an LLM may read a file it guessed).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from typing import Any

from axisrl.domains.repoworld.mutations import normalise
from axisrl.domains.repoworld.repo import TESTS_DIR, Repository, compile_repo
from axisrl.domains.repoworld.runner import SuiteResult, run_suite
from axisrl.domains.toolworld.env import StepResult, VerifyResult
from axisrl.domains.toolworld.model import FINISH, CallError, parse_arguments

MAX_MATCHES = 20
MAX_FAILURES = 10
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PATH = re.compile(r"[A-Za-z0-9_/]+\.py")


def call(tool: str, /, **arguments: Any) -> dict[str, Any]:
    """A call dict as ``step`` takes it and ``candidates`` offers it."""
    return {"name": tool, "arguments": arguments}


def tool_names(api: Mapping[str, Any]) -> list[str]:
    """The tools of an API, ``finish`` last."""
    names = ["list_files", "read_file" if api["read"] == "file" else "read_definition"]
    if api["search"]:
        names.append("search")
    return names + ["run_tests", "edit", FINISH]


def numbered(lines: list[str] | tuple[str, ...], first: int) -> str:
    return "\n".join(f"{first + k:>3}| {line}" for k, line in enumerate(lines))


def suite_observation(result: SuiteResult) -> dict[str, Any]:
    failing = result.failing()
    observation: dict[str, Any] = {"passed": result.passed, "failed": len(failing)}
    observation["failures"] = [f"{o.test_id}: {o.message}" for o in failing[:MAX_FAILURES]]
    if len(failing) > MAX_FAILURES:
        observation["failures"].append(f"... and {len(failing) - MAX_FAILURES} more")
    return observation


class RepoworldEnv:
    """One episode of one task. The spec and the task row are read, never modified."""

    def __init__(self, spec: Mapping[str, Any], task: Mapping[str, Any]) -> None:
        self.repo: Repository = compile_repo(spec)
        self.task = task
        goal = task["goal"]
        self.goal: dict[str, Any] = json.loads(goal) if isinstance(goal, str) else dict(goal)
        self.max_steps = self.repo.max_steps
        self.tools = tool_names(self.repo.api)
        self.files: dict[str, str] | None = None
        self.steps = 0
        self.done = False
        self.known_files: set[str] = set()
        self.known_names: set[str] = set()
        self.view: tuple[str, int, int] | None = None

    # ------------------------------------------------------------------------------ episode

    def initial_files(self) -> dict[str, str]:
        """The repository with the task's bug in it."""
        bug = self.goal["bug"]
        files = dict(self.repo.files)
        lines = files[bug["path"]].split("\n")
        if lines[bug["line"] - 1] != bug["original"]:
            raise ValueError(f"task {self.task.get('task_id')} does not fit its spec: line {bug['line']} differs")
        lines[bug["line"] - 1] = bug["text"]
        files[bug["path"]] = "\n".join(lines)
        return files

    def reset(self) -> dict[str, Any]:
        self.files = self.initial_files()
        self.steps = 0
        self.done = False
        self.known_files = set()
        self.known_names = set()
        self.view = None
        self._learn(self.task["instruction"])
        return {"instruction": self.task["instruction"]}

    def fork(self) -> RepoworldEnv:
        """An independent copy of this episode so far (file texts are immutable strings)."""
        other = copy.copy(self)
        other.files = None if self.files is None else dict(self.files)
        other.known_files = set(self.known_files)
        other.known_names = set(self.known_names)
        return other

    def step(self, call: Mapping[str, Any]) -> StepResult:
        if self.files is None:
            return StepResult({"error": "call reset() before step()"}, False)
        if self.done:
            return StepResult({"error": "the episode is over"}, True)
        self.steps += 1
        try:
            if not isinstance(call, Mapping) or not isinstance(call.get("name"), str):
                raise CallError("bad_call", "a call is an object with a name and arguments")
            name = call["name"]
            arguments = parse_arguments(call.get("arguments"))
            if name == FINISH:
                self.done = True
                return StepResult({"result": "finished"}, True)
            if name not in self.tools:
                raise CallError("unknown_tool", f"unknown tool {name!r}; the tools are {', '.join(self.tools)}")
            observation = getattr(self, f"_tool_{name}")(arguments)
        except CallError as error:
            observation = {"error": error.message}
        self._learn(json.dumps(observation))
        self.done = self.steps >= self.max_steps
        return StepResult(observation, self.done)

    def verify(self) -> VerifyResult:
        """The repository's own suite on the current sources and the original tests."""
        result = self.suite(None)
        success = result.success and not result.timed_out
        return VerifyResult(success, 1.0 if success else 0.0, result.passed, result.total)

    def suite(self, test_path: str | None) -> SuiteResult:
        """Run one test file or every test against the current sources (the original tests)."""
        sources = self.files if self.files is not None else self.initial_files()
        files = {p: (self.repo.files[p] if p.startswith(TESTS_DIR) else text) for p, text in sources.items()}
        return run_suite(files, self.repo.test_paths if test_path is None else (test_path,))

    # ------------------------------------------------------------------------------ actions

    def candidates(self) -> list[dict[str, Any]]:
        """Every call the agent can name from what it has seen (see the module docstring)."""
        if self.files is None or self.done:
            return []
        api, out = self.repo.api, [call("list_files"), call("run_tests")]
        if api["tests"] == "file":
            out += [call("run_tests", path=p) for p in sorted(self.known_files) if p.startswith(TESTS_DIR)]
        if api["read"] == "file":
            out += [call("read_file", path=p) for p in sorted(self.known_files)]
        else:
            out += [call("read_definition", name=n) for n in sorted(self.known_names)]
        if api["search"]:
            out += [call("search", name=n) for n in sorted(self.known_names & self.repo.searchable)]
        if self.view is not None and not self.view[0].startswith(TESTS_DIR):
            path, first, last = self.view
            lines = self.files[path].split("\n")
            for number in range(first, last + 1):
                for rewrite in self.repo.rewrites(lines[number - 1]):
                    out.append(call("edit", path=path, line=number, replacement=rewrite.text.strip()))
        return out + [call(FINISH)]

    def _learn(self, text: str) -> None:
        self.known_files.update(p for p in _PATH.findall(text) if p in self.repo.files)
        self.known_names.update(n for n in _IDENTIFIER.findall(text) if n in self.repo.readable)

    # ------------------------------------------------------------------------------ tools

    @staticmethod
    def _arguments(arguments: Mapping[str, Any], required: tuple[str, ...], optional: tuple[str, ...] = ()) -> None:
        unknown = sorted(set(arguments) - set(required) - set(optional))
        if unknown:
            raise CallError("bad_argument", f"unexpected argument(s): {', '.join(unknown)}")
        missing = [name for name in required if name not in arguments]
        if missing:
            raise CallError("missing_argument", f"missing argument(s): {', '.join(missing)}")

    def _path(self, arguments: Mapping[str, Any]) -> str:
        path = arguments["path"]
        if not isinstance(path, str) or path not in self.files:
            raise CallError("no_file", f"no file {path!r}; list_files shows the repository")
        return path

    def _tool_list_files(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        self._arguments(arguments, ())
        return {"files": sorted(self.files)}

    def _tool_read_file(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        self._arguments(arguments, ("path",))
        path = self._path(arguments)
        lines = self.files[path].split("\n")[:-1]
        self.view = (path, 1, len(lines))
        return {"path": path, "text": numbered(lines, 1)}

    def _tool_read_definition(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        self._arguments(arguments, ("name",))
        name = arguments["name"]
        definition = self.repo.definitions.get(name) if isinstance(name, str) else None
        if definition is None:
            raise CallError("no_definition", f"no function, class or constant named {name!r}")
        lines = self.files[definition.path].split("\n")[definition.start - 1 : definition.end]
        self.view = (definition.path, definition.start, definition.end)
        return {"path": definition.path, "text": numbered(lines, definition.start)}

    def _tool_search(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        self._arguments(arguments, ("name",))
        name = arguments["name"]
        if not isinstance(name, str) or not _IDENTIFIER.fullmatch(name):
            raise CallError("bad_argument", "search takes one identifier")
        word = re.compile(rf"\b{re.escape(name)}\b")
        matches = [
            f"{path}:{number}: {line.strip()}"
            for path in sorted(self.files)
            if name in self.files[path]
            for number, line in enumerate(self.files[path].split("\n"), start=1)
            if name in line and word.search(line)
        ]
        observation: dict[str, Any] = {"name": name, "matches": matches[:MAX_MATCHES]}
        if len(matches) > MAX_MATCHES:
            observation["more"] = len(matches) - MAX_MATCHES
        return observation

    def _tool_run_tests(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        if self.repo.api["tests"] == "suite":
            self._arguments(arguments, ())
            return suite_observation(self.suite(None))
        self._arguments(arguments, (), ("path",))
        if "path" not in arguments:
            return suite_observation(self.suite(None))
        path = self._path(arguments)
        if not path.startswith(TESTS_DIR):
            raise CallError("not_a_test_file", f"{path} is not a test file")
        return suite_observation(self.suite(path))

    def _tool_edit(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        self._arguments(arguments, ("path", "line", "replacement"))
        path = self._path(arguments)
        if path.startswith(TESTS_DIR):
            raise CallError("read_only", "the tests are read-only; fix the source")
        line, replacement = arguments["line"], arguments["replacement"]
        if isinstance(line, str) and line.strip().isdigit():
            line = int(line)
        lines = self.files[path].split("\n")
        if not isinstance(line, int) or isinstance(line, bool) or not 1 <= line < len(lines):
            raise CallError("bad_line", f"{path} has lines 1 to {len(lines) - 1}")
        if not isinstance(replacement, str):
            raise CallError("bad_argument", "replacement is the new text of the line")
        offered = self.repo.rewrites(lines[line - 1])
        wanted = normalise(replacement)
        chosen = next((r for r in offered if normalise(r.text) == wanted), None)
        if chosen is None:
            raise CallError(
                "not_offered",
                f"line {line} of {path} admits one small change; the replacements offered are: "
                + ("; ".join(r.text.strip() for r in offered) if offered else "none"),
            )
        lines[line - 1] = chosen.text
        self.files[path] = "\n".join(lines)
        return {"path": path, "line": line, "text": chosen.text.strip()}
