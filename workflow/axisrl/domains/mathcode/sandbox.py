"""Model-written Python, run in a child interpreter that can be killed.

In-process ``exec`` cannot be interrupted reliably (a thread cannot be killed and ``SIGALRM`` only
reaches the main thread), and it shares the evaluator's memory. Each call therefore starts a fresh
``python -I -B`` in an empty temporary directory, in its own session so the whole process group is
killed on timeout, with address-space, CPU-time and file-size limits set by the child before it
runs any model code. This bounds time, memory and writes; it is not a security boundary against
a deliberately hostile program (there is no network or filesystem namespace).

A persistent REPL is emulated by replaying the earlier cells silently before the new one, so the
semantics do not depend on a long-lived process surviving timeouts.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

from axisrl.threads import THREAD_VARIABLES

MEMORY_BYTES = 2 * 1024**3
MAX_OUTPUT_CHARS = 4096
"""Output kept per call; the rest is cut so one runaway print cannot flood the conversation."""
RESULT_MARKER = "\x00axisrl-sandbox-result\x00"

DRIVER = r"""
import ast, builtins, contextlib, io, json, math, resource, sys, traceback

request = json.load(sys.stdin)
resource.setrlimit(resource.RLIMIT_AS, (request["memory_bytes"],) * 2)
resource.setrlimit(resource.RLIMIT_CPU, (request["cpu_seconds"],) * 2)
resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
namespace = {"__name__": "__main__"}
CALCULATOR = {"__builtins__": {name: getattr(builtins, name) for name in
                               ("abs", "divmod", "float", "int", "max", "min", "pow", "round", "sum")},
              **{name: value for name, value in vars(math).items() if not name.startswith("_")}}


def run_cell(source, echo):
    tree = ast.parse(source)
    tail = tree.body.pop() if echo and tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, "<cell>", "exec"), namespace)
    if tail is not None:
        value = eval(compile(ast.Expression(tail.value), "<cell>", "eval"), namespace)
        if value is not None:
            print(repr(value))


for source in request["history"]:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            run_cell(source, False)
        except BaseException:
            pass
output, error = io.StringIO(), None
with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
    try:
        if request["mode"] == "expression":
            print(repr(eval(compile(request["source"], "<expression>", "eval"), CALCULATOR)))
        else:
            run_cell(request["source"], request["echo"])
    except BaseException as exc:
        error = "".join(traceback.format_exception_only(type(exc), exc)).strip()
sys.__stdout__.write(MARKER + json.dumps({"output": output.getvalue(), "error": error}))
""".replace("MARKER", repr(RESULT_MARKER))


def sandbox_env(home: str) -> dict[str, str]:
    """The whole environment of a sandboxed child: nothing inherited, one thread for its math libraries."""
    return {"PATH": os.environ.get("PATH", ""), "HOME": home, "LANG": "C.UTF-8", **dict.fromkeys(THREAD_VARIABLES, "1")}


def _clip(text: str) -> str:
    if len(text) <= MAX_OUTPUT_CHARS:
        return text
    return text[:MAX_OUTPUT_CHARS] + f"...({len(text) - MAX_OUTPUT_CHARS} more characters cut)"


def run(source: str, *, mode: str, timeout_s: float, history: Sequence[str] = (), echo: bool = False) -> dict[str, Any]:
    """Run ``source`` (``mode``: ``"exec"`` a cell, ``"expression"`` one calculator expression)
    after replaying ``history``; the observation is ``{"output": ...}`` plus ``"error"`` when the
    code raised, timed out or was killed by a limit."""
    request = json.dumps(
        {
            "source": source,
            "mode": mode,
            "history": list(history),
            "echo": echo,
            "memory_bytes": MEMORY_BYTES,
            "cpu_seconds": int(timeout_s) + 1,
        }
    )
    with tempfile.TemporaryDirectory(prefix="axisrl-sandbox-") as workdir:
        env = sandbox_env(workdir)
        with subprocess.Popen(
            [sys.executable, "-I", "-B", "-c", DRIVER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=workdir,
            env=env,
            text=True,
            start_new_session=True,
        ) as process:
            try:
                stdout, _ = process.communicate(request, timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.communicate()
                return {"output": "", "error": f"timed out after {timeout_s:g} s"}
    head, marker, result = stdout.rpartition(RESULT_MARKER)
    if not marker:
        return {
            "output": _clip(head),
            "error": f"the interpreter stopped without a result (exit status {process.returncode})",
        }
    outcome = json.loads(result)
    observation = {"output": _clip(head + outcome["output"])}
    if outcome["error"] is not None:
        observation["error"] = outcome["error"]
    return observation
