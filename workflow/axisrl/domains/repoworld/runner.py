"""The repository's own test suite, run for real: in process, in fresh module namespaces, with a time limit.

Every run builds the repository's modules anew from its file texts (compiled code is cached by text,
module objects never are), resolves imports between them with an ``__import__`` of its own (so no
run touches ``sys.modules`` and threads can run suites side by side), and calls each test function.

The time limit is a tracer on the repository's own frames: a budget of executed lines
(deterministic, so a verdict never depends on how loaded the machine is) and, as a backstop, a
budget of the CPU time the run's own thread spends in repository code (``time.thread_time``: a
machine loaded with other work slows the wall clock, not this); either stops the run with an
exception the generated code cannot catch, and every test not finished fails. Every program that
can run here is one the generator wrote or one of its offered one-line rewrites (``mutations``), none
of which allocates without bound or calls into C for long, so a line budget bounds them all; this is
a time limit, not a security boundary.
"""

from __future__ import annotations

import ast
import builtins
import functools
import hashlib
import sys
import threading
import time
import types
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

ALLOWED_IMPORTS = frozenset({"dataclasses", "typing"})
"""Standard-library modules the generated code may import; everything else resolves in the repository."""
LINE_BUDGET = 200_000
"""Executed repository lines per run; a clean suite runs a few thousand."""
TIME_LIMIT_S = 2.0
"""Backstop per run, in CPU seconds of the thread running it; a clean suite takes milliseconds."""
CACHE_SIZE = 8192
REPR_CHARS = 240
"""Longest value shown in a failure message."""


class _Stop(BaseException):
    """Raised into repository code when its run is over its limits (a BaseException: code that
    catches ``Exception`` cannot swallow it)."""


@dataclass(frozen=True, slots=True)
class Limits:
    lines: int = LINE_BUDGET
    seconds: float = TIME_LIMIT_S


@dataclass(frozen=True, slots=True)
class TestOutcome:
    """One test's result. ``observed`` is the value the failing assert compared (its repr) and
    ``raised`` the exception the test died of, so a report can say what happened."""

    test_id: str
    passed: bool
    message: str = ""
    observed: str | None = None
    raised: str | None = None


@dataclass(frozen=True, slots=True)
class SuiteResult:
    outcomes: tuple[TestOutcome, ...]
    timed_out: bool
    seconds: float = field(compare=False)
    out_of_time: bool = field(default=False, compare=False)
    """Stopped by the CPU-time backstop, not the line budget: not a pure function of the texts."""

    @property
    def total(self) -> int:
        return len(self.outcomes)

    @property
    def passed(self) -> int:
        return sum(o.passed for o in self.outcomes)

    @property
    def success(self) -> bool:
        return self.passed == self.total

    def failing(self) -> list[TestOutcome]:
        return [o for o in self.outcomes if not o.passed]


def module_name(path: str) -> str:
    """``pkg/mod.py`` -> ``pkg.mod``."""
    return path[: -len(".py")].replace("/", ".")


@functools.lru_cache(maxsize=4096)
def _compiled(path: str, text: str) -> types.CodeType:
    return compile(text, path, "exec", dont_inherit=True)


def short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= REPR_CHARS else text[: REPR_CHARS - 3] + "..."


class Session:
    """One run's modules, built lazily from ``files`` under one budget of lines and CPU seconds.

    ``guarded`` runs a callable with the tracer on; repository code may only run inside it, and
    only the CPU time it spends there (on the calling thread) counts against the budget."""

    def __init__(self, files: Mapping[str, str], limits: Limits = Limits()) -> None:
        self.files = files
        self.limits = limits
        self.modules: dict[str, types.ModuleType] = {}
        self.builtins = dict(vars(builtins))
        self.builtins["__import__"] = self._import
        self.remaining = limits.lines
        self.cpu_left = limits.seconds
        self.cpu_deadline = 0.0
        """``time.thread_time()`` at which the guarded call in progress spends the rest of ``cpu_left``."""
        self.tripped = False
        self.out_of_time = False
        """Stopped by the CPU backstop rather than by the line budget (such a run is never cached)."""

    # ---------------------------------------------------------------------------------- imports

    def _import(
        self,
        name: str,
        globals: Mapping[str, Any] | None = None,
        locals: Mapping[str, Any] | None = None,
        fromlist: Sequence[str] | None = (),
        level: int = 0,
    ) -> Any:
        if name.partition(".")[0] in ALLOWED_IMPORTS:
            return __import__(name, globals, locals, fromlist or (), level)
        if level or not fromlist:
            raise ImportError(f"only 'from <module> import <names>' is supported here, not {name!r}")
        return self.load(module_name(name.replace(".", "/") + ".py"))

    def load(self, name: str) -> types.ModuleType:
        """The module ``name`` of this run, executed on first use (inside a guarded call)."""
        if name in self.modules:
            return self.modules[name]
        path = name.replace(".", "/") + ".py"
        if path not in self.files:
            raise ModuleNotFoundError(f"No module named {name!r}")
        module = types.ModuleType(name)
        module.__file__ = path
        module.__dict__["__builtins__"] = self.builtins
        self.modules[name] = module
        try:
            exec(_compiled(path, self.files[path]), module.__dict__)
        except BaseException:
            del self.modules[name]
            raise
        return module

    # ---------------------------------------------------------------------------------- tracing

    def _global_trace(self, frame: types.FrameType, event: str, arg: Any) -> Callable | None:
        return self._local_trace if frame.f_code.co_filename in self.files else None

    def _local_trace(self, frame: types.FrameType, event: str, arg: Any) -> Callable | None:
        if event == "line":
            self.remaining -= 1
            if self.remaining <= 0:
                self.tripped = True
                raise _Stop
            if not self.remaining & 255 and time.thread_time() > self.cpu_deadline:
                self.tripped = self.out_of_time = True
                raise _Stop
        return self._local_trace

    def guarded(self, function: Callable[..., Any], *args: Any) -> Any:
        """``function(*args)`` with the tracer on; raises ``TimeoutError`` once the budget is spent
        (this call and every later one)."""
        if self.tripped:
            raise TimeoutError("the run exceeded its time limit")
        previous = sys.gettrace()
        start = time.thread_time()
        self.cpu_deadline = start + self.cpu_left
        sys.settrace(self._global_trace)
        try:
            return function(*args)
        except _Stop:
            raise TimeoutError("the run exceeded its time limit") from None
        finally:
            sys.settrace(previous)
            self.cpu_left -= time.thread_time() - start


# -------------------------------------------------------------------------------------- the suite


@functools.lru_cache(maxsize=1024)
def test_functions(path: str, text: str) -> tuple[str, ...]:
    """The top-level ``test_*`` functions of a test file, in file order (as pytest collects them)."""
    tree = ast.parse(text)
    return tuple(node.name for node in tree.body if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"))


def _failed_assert(files: Mapping[str, str], path: str, error: AssertionError) -> tuple[str, str | None]:
    """The failing ``assert`` line and the value of its left operand, read from the test's frame
    (pytest's assertion introspection, for ``assert <name> == <expected>``)."""
    frame, lineno = None, 0
    tb = error.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == path:
            frame, lineno = tb.tb_frame, tb.tb_lineno
        tb = tb.tb_next
    if frame is None:
        return "AssertionError", None
    line = files[path].splitlines()[lineno - 1].strip()
    try:
        node = ast.parse(line).body[0]
    except SyntaxError:
        return line, None
    if isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare) and isinstance(node.test.left, ast.Name):
        name = node.test.left.id
        if name in frame.f_locals:
            observed = short_repr(frame.f_locals[name])
            return f"{line} failed: {name} was {observed}", observed
    return f"{line} failed", None


def _raised(files: Mapping[str, str], error: BaseException) -> str:
    """``Type: message (path, line n)`` at the deepest repository frame."""
    where = ""
    tb = error.__traceback__
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if filename in files:
            where = f" ({filename}, line {tb.tb_lineno})"
        tb = tb.tb_next
    return f"{type(error).__name__}: {error}{where}"


def _run(files: Mapping[str, str], test_paths: Sequence[str], limits: Limits) -> SuiteResult:
    start = time.perf_counter()
    session = Session(files, limits)
    outcomes: list[TestOutcome] = []
    for path in test_paths:
        names = test_functions(path, files[path])
        module = None
        import_error = ""
        try:
            module = session.guarded(session.load, module_name(path))
        except TimeoutError as error:
            import_error = str(error)
        except Exception as error:  # a module that fails to import fails every test in its file
            import_error = _raised(files, error)
        for name in names:
            test_id = f"{path}::{name}"
            if module is None:
                outcomes.append(TestOutcome(test_id, False, import_error, raised=import_error))
                continue
            try:
                session.guarded(module.__dict__[name])
            except AssertionError as error:
                message, observed = _failed_assert(files, path, error)
                outcomes.append(TestOutcome(test_id, False, message, observed=observed))
            except TimeoutError as error:
                outcomes.append(TestOutcome(test_id, False, str(error), raised=str(error)))
            except Exception as error:
                text = _raised(files, error)
                outcomes.append(TestOutcome(test_id, False, text, raised=text))
            else:
                outcomes.append(TestOutcome(test_id, True))
    return SuiteResult(tuple(outcomes), session.tripped, time.perf_counter() - start, session.out_of_time)


_CACHE: OrderedDict[str, SuiteResult] = OrderedDict()
_CACHE_LOCK = threading.Lock()


def _key(files: Mapping[str, str], test_paths: Sequence[str], limits: Limits) -> str:
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(path.encode() + b"\x00" + files[path].encode() + b"\x01")
    digest.update("\x02".join(test_paths).encode() + f"\x03{limits.lines}:{limits.seconds}".encode())
    return digest.hexdigest()


def run_suite(
    files: Mapping[str, str], test_paths: Iterable[str], limits: Limits = Limits(), cache: bool = True
) -> SuiteResult:
    """Run the tests of ``test_paths`` (in that order) against ``files``.

    The outcome is a pure function of the file texts and the limits (a run stopped by the CPU-time
    backstop is the exception, and is never cached), so results are cached by content: replaying a
    state an episode or a filter has run before costs a lookup. ``cache=False`` always runs."""
    test_paths = list(test_paths)
    key = _key(files, test_paths, limits)
    if cache:
        with _CACHE_LOCK:
            hit = _CACHE.get(key)
            if hit is not None:
                _CACHE.move_to_end(key)
                return hit
    result = _run(files, test_paths, limits)
    if cache and not result.out_of_time:
        with _CACHE_LOCK:
            _CACHE[key] = result
            while len(_CACHE) > CACHE_SIZE:
                _CACHE.popitem(last=False)
    return result


def call_functions(
    files: Mapping[str, str],
    calls: Callable[[Session], list[Any]],
    limits: Limits = Limits(),
) -> list[Any]:
    """Run ``calls(session)`` with the tracer on and return what it returns (the generator's
    expected values and the signature probe call repository functions through this)."""
    session = Session(files, limits)
    return session.guarded(calls, session)
