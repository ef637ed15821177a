"""Warm start for the workflow's one-thread script jobs: a resident server forks one child per job.

Every Snakemake ``script:`` job is a new Python process, and importing torch, numpy and scipy is a sizeable share
of a short train job; serving the jobs saves about a tenth of the default study's wall time (bench/README.md). The
server imports them once (``PRELOAD``) and forks a child per job. The job's own process (the client) hands over the
stage, its arguments and its stdout/stderr, and waits for the exit status. The child watches the connection: a
client that dies (Snakemake killed, a retry, an OOM kill) takes its child with it, and signals sent to the client
are forwarded to the child.

Used only where the fork is safe and the server sits beside the job (``enabled``): Linux, a
one-thread job, not inside a cluster job (Slurm ends every process a job started when it ends, a
server included), ``AXISRL_WARM`` not ``0``. The server's address hashes the interpreter, the
axisrl sources, ``sys.path`` and the variables read at import, so an edited checkout never runs in
a stale server; the server exits after ``IDLE_SECONDS`` without a job, and its pid is in the lock
file beside the socket. Polars is not preloaded: it starts threads at import, and a fork copies only
the calling thread. Snakemake's ``benchmark:`` of a served job measures the client alone.
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import os
import pickle
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from axisrl.threads import limit_threads

PRELOAD = ("numpy", "scipy.optimize", "scipy.stats", "torch", "matplotlib.pyplot")
IDLE_SECONDS = 120.0
CLUSTER_VARIABLES = ("SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID")
IMPORT_VARIABLES = ("OMP_", "MKL_", "OPENBLAS_", "TORCH", "PYTHON", "MPL")
"""Prefixes of the environment variables that change what a preloaded module did at import."""
_INT = struct.Struct("!q")

log = logging.getLogger("axisrl")


def enabled(threads: int) -> bool:
    """Whether a job with ``threads`` threads may run in a child of the warm server."""
    return (
        sys.platform == "linux"
        and threads == 1
        and os.environ.get("AXISRL_WARM", "1") != "0"
        and not any(name in os.environ for name in CLUSTER_VARIABLES)
    )


def address() -> Path:
    """The socket of the server that can run this process's jobs exactly as this process would."""
    digest = hashlib.sha256()
    parts = (
        sys.executable,
        sys.version,
        *sys.path,
        *sorted(f"{k}={v}" for k, v in os.environ.items() if k.startswith(IMPORT_VARIABLES)),
    )
    for part in parts:
        digest.update(part.encode() + b"\0")
    for path in sorted(Path(__file__).parent.rglob("*.py")):
        digest.update(str(path).encode() + b"\0" + path.read_bytes())
    return Path(tempfile.gettempdir()) / f"axisrl-warm-{os.getuid()}-{digest.hexdigest()[:16]}.sock"


def run(target: str, args: Sequence[Any], log_path: str) -> int | None:
    """Run ``module:function(*args)`` in a child of the warm server, logging to ``log_path``, and
    return its exit status; None when no server answers (one is started for the next jobs, and the
    caller runs the job itself)."""
    path = address()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(str(path))
    except OSError:
        conn.close()
        _start_server(path)
        return None
    with conn:
        request = pickle.dumps(
            {"target": target, "args": tuple(args), "log": log_path, "cwd": os.getcwd(), "env": dict(os.environ)}
        )
        try:
            socket.send_fds(conn, [_INT.pack(len(request))], [sys.stdout.fileno(), sys.stderr.fileno()])
            conn.sendall(request)
            pid = _receive_int(conn)
        except OSError:
            pid = None
        if pid is None:  # the server went away before forking (it idled out): nothing ran
            return None

        def forward(signum: int, _frame: object) -> None:
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass

        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, forward)
        status = _receive_int(conn)
    if status is None:
        print(f"axisrl.warm: job process {pid} ended without an exit status (killed?)", file=sys.stderr)
        return 1
    return status


def run_here(target: str, args: Sequence[Any], log_path: str) -> None:
    """Call ``module:function(*args)`` in this process, logging to ``log_path`` and stderr."""
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(message)s",
        handlers=[logging.FileHandler(log_path, mode="w"), logging.StreamHandler(sys.stderr)],
        force=True,
    )
    module, name = target.split(":")
    function: Callable[..., None] = getattr(importlib.import_module(module), name)
    function(*args)


def serve(path: str | Path) -> None:
    """Preload ``PRELOAD``, then fork a child for every connection until ``IDLE_SECONDS`` pass
    without one. Returns at once when another server holds the address or it is not this
    process's own (``address()``), so that a server never runs a job differently."""
    import fcntl

    path = Path(path)
    if address() != path:
        print(f"axisrl.warm: {path} is not this interpreter's address; not serving", file=sys.stderr)
        return
    lock = open(f"{path}.lock", "a+")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return
    lock.truncate(0)
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    path.unlink(missing_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(64)
    limit_threads(1)  # what the preloaded math libraries start with; a job may only ever have one
    for module in PRELOAD:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            print(f"axisrl.warm: not preloading {module}: {exc}", file=sys.stderr)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    listener.settimeout(IDLE_SECONDS)
    try:
        while True:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                break
            sys.stdout.flush()
            sys.stderr.flush()
            if os.fork() == 0:
                listener.close()
                lock.close()
                _child(conn)
            conn.close()
    finally:
        listener.close()
        for leftover in (path, Path(lock.name)):
            leftover.unlink(missing_ok=True)
        server_log = path.with_suffix(".log")
        if server_log.exists() and not server_log.stat().st_size:
            server_log.unlink()


def _child(conn: socket.socket) -> None:
    """Take the client's stdout/stderr, run its job and send the exit status; never returns."""
    status = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        header, fds, _, _ = socket.recv_fds(conn, _INT.size, 2)
        (size,) = _INT.unpack(header)
        request = pickle.loads(_receive_exactly(conn, size))
        for fd, target in zip(fds, (1, 2)):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        conn.sendall(_INT.pack(os.getpid()))
        threading.Thread(target=_end_with_client, args=(conn,), daemon=True).start()
        run_here(request["target"], request["args"], request["log"])
        status = 0
    except SystemExit as exc:  # as Python exits: None is success, any other non-integer a failure
        status = 0 if exc.code is None else exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            conn.sendall(_INT.pack(status))
        finally:
            os._exit(status)


def _end_with_client(conn: socket.socket) -> None:
    """Kill this child as soon as its client's end of the connection closes."""
    try:
        conn.recv(1)
    finally:
        os.kill(os.getpid(), signal.SIGKILL)


def _start_server(path: Path) -> None:
    """Start a server in its own session (so killing a job's process group spares it) with this
    process's interpreter, ``sys.path`` and environment, logging next to its socket."""
    code = f"import sys; sys.path[:] = {sys.path!r}; from axisrl.warm import serve; serve({str(path)!r})"
    try:
        with open(path.with_suffix(".log"), "a") as out:
            subprocess.Popen(
                [sys.executable, "-c", code],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                cwd="/",
                start_new_session=True,
            )
    except OSError as exc:
        log.debug("no warm server: %s", exc)


def _receive_exactly(conn: socket.socket, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = conn.recv(min(left, 1 << 20))
        if not chunk:
            raise ConnectionError("connection closed mid-message")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _receive_int(conn: socket.socket) -> int | None:
    try:
        return _INT.unpack(_receive_exactly(conn, _INT.size))[0]
    except (ConnectionError, OSError):
        return None
