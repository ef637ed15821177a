"""Reasoning-gym scoring in a child process, with a time limit.

Some generators' ``score_answer`` run the submitted answer as code (``eval`` in spiral_matrix,
``sympy.parse_expr`` in the integration and polynomial scorers) and some take tens of seconds on a
wrong answer (``sympy.simplify`` in intermediate_integration). Scoring a model's answer in the
evaluator's own process would let it run arbitrary code there, or stall a whole batch. So every
score (in task filtering as in evaluation, so both judge alike) comes from one long-lived
``python -I -B`` child that has imported reasoning-gym once, under the sandbox's memory and
file-size limits in an empty directory. A score that takes longer than ``SCORE_TIMEOUT_S`` is 0:
the child is killed and the next call starts a new one.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
from typing import Any

from axisrl.domains.mathcode.sandbox import MEMORY_BYTES, sandbox_env

SCORE_TIMEOUT_S = 5.0

DRIVER = r"""
import json, os, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (MEMORY,) * 2)
resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
channel = os.fdopen(os.dup(1), "w")
os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # whatever a scorer prints cannot reach the channel
from reasoning_gym import get_score_answer_fn
scorers = {}
channel.write("ready\n")
channel.flush()
for line in sys.stdin:
    request = json.loads(line)
    try:
        generator = request["generator"]
        if generator not in scorers:
            scorers[generator] = get_score_answer_fn(generator)
        score = float(scorers[generator](request["answer"], request["entry"]))
    except BaseException:
        score = 0.0
    channel.write(json.dumps(score) + "\n")
    channel.flush()
""".replace("MEMORY", str(MEMORY_BYTES))


class Scorer:
    """The scoring child; calls are serialised (one request in flight), so it is thread-safe."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.process: subprocess.Popen[bytes] | None = None
        self.workdir = tempfile.TemporaryDirectory(prefix="axisrl-scorer-")

    def _start(self) -> subprocess.Popen[bytes]:
        env = sandbox_env(self.workdir.name)
        process = subprocess.Popen(
            [sys.executable, "-I", "-B", "-c", DRIVER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=self.workdir.name,
            env=env,
            start_new_session=True,
        )
        if process.stdout.readline() != b"ready\n":
            raise RuntimeError("the reasoning-gym scorer process did not start")
        return process

    def _stop(self) -> None:
        if self.process is not None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
            self.process = None

    def score(self, generator: str, answer: str | None, entry: dict[str, Any]) -> float:
        """The generator's score of ``answer`` in [0, 1]; 0 if the scorer raised or ran out of time."""
        request = (json.dumps({"generator": generator, "answer": answer, "entry": entry}) + "\n").encode()
        with self.lock:
            if self.process is None or self.process.poll() is not None:
                self.process = self._start()
            try:
                self.process.stdin.write(request)
                self.process.stdin.flush()
            except BrokenPipeError:
                self._stop()
                return 0.0
            ready, _, _ = select.select([self.process.stdout], [], [], SCORE_TIMEOUT_S)
            line = self.process.stdout.readline() if ready else b""
            if not line:
                self._stop()
                return 0.0
            return float(json.loads(line))


SCORER = Scorer()
"""The process-wide scorer (started on first use)."""
