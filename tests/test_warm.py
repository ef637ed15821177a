"""The warm server (``axisrl.warm``) against real forked children: status, stderr, cwd, kills."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from axisrl import warm

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the warm server is Linux-only")


def note(path: str, seconds: float = 0.0) -> None:
    """A job: record where it ran, say so on stderr, then take ``seconds``."""
    Path(path).write_text(f"{os.getpid()} {os.getcwd()} {'torch' in sys.modules}")
    print("note written", file=sys.stderr)
    time.sleep(seconds)


def fail(code: int | None) -> None:
    """A job that raises (``code`` None) or exits with ``code``."""
    if code is None:
        raise ValueError("a broken job")
    sys.exit(code)


def _wait_for(condition, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.fixture
def server(monkeypatch, tmp_path):
    """A warm server of this test's own (a short temp dir: socket paths are limited to 107 bytes)."""
    home = Path(tempfile.mkdtemp(prefix="axw"))
    monkeypatch.setenv("TMPDIR", str(home))
    monkeypatch.setattr(tempfile, "tempdir", None)
    monkeypatch.chdir(tmp_path)
    assert warm.run(f"{__name__}:note", ("cold",), "cold.log") is None  # nobody answers: one is started
    assert not Path("cold").exists()
    lock = Path(f"{warm.address()}.lock")
    _wait_for(lambda: warm.address().exists() and lock.exists() and lock.read_text().strip(), "the server")
    yield warm.address()
    os.kill(int(lock.read_text()), signal.SIGTERM)
    shutil.rmtree(home)


def test_a_job_runs_in_a_preloaded_child_with_our_cwd_and_stderr(server, tmp_path, capfd):
    assert warm.run(f"{__name__}:note", ("done",), "job.log") == 0
    pid, cwd, preloaded = (tmp_path / "done").read_text().split()
    assert int(pid) != os.getpid() and cwd == str(tmp_path) and preloaded == "True"
    assert "note written" in capfd.readouterr().err
    assert (tmp_path / "job.log").exists()


def test_failures_come_back_as_exit_status_with_the_traceback(server, capfd):
    assert warm.run(f"{__name__}:fail", (None,), "job.log") == 1
    assert "ValueError: a broken job" in capfd.readouterr().err
    assert warm.run(f"{__name__}:fail", (3,), "job.log") == 3
    assert warm.run(f"{__name__}:fail", (0,), "job.log") == 0


def test_a_killed_client_takes_its_job_along(server, tmp_path):
    client = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                f"import sys; sys.path[:] = {sys.path!r}; from axisrl import warm; "
                f"sys.exit(warm.run('{__name__}:note', ('long', 60), 'long.log') or 0)"
            ),
        ],
        cwd=tmp_path,
    )
    _wait_for(lambda: (tmp_path / "long").exists() and (tmp_path / "long").read_text(), "the job to start")
    job = int((tmp_path / "long").read_text().split()[0])
    client.kill()
    client.wait()

    def gone() -> bool:
        try:
            os.kill(job, 0)
        except ProcessLookupError:
            return True
        return False

    _wait_for(gone, "the job to end", timeout=5.0)


def test_only_safe_jobs_are_served_and_the_address_follows_the_environment(monkeypatch):
    monkeypatch.delenv("AXISRL_WARM", raising=False)
    for name in warm.CLUSTER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert warm.enabled(1) and not warm.enabled(2)
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    assert not warm.enabled(1)
    monkeypatch.delenv("SLURM_JOB_ID")
    monkeypatch.setenv("AXISRL_WARM", "0")
    assert not warm.enabled(1)
    before = warm.address()
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert warm.address() != before


def test_a_script_job_gets_the_threads_it_claimed_unless_the_environment_says_otherwise(monkeypatch):
    """torch and BLAS default to every core of the machine; a job that claimed 2 must use 2."""
    from types import SimpleNamespace

    from axisrl import scripting, threads

    seen = []
    monkeypatch.setattr(
        warm,
        "run_here",
        lambda target, args, log: seen.append({name: os.environ.get(name) for name in threads.THREAD_VARIABLES}),
    )
    monkeypatch.setitem(sys.modules, "torch", SimpleNamespace(set_num_threads=lambda n: seen.append(n)))
    job = SimpleNamespace(
        rule="plan", threads=2, params=SimpleNamespace(spec=None, settings={}), input={}, output={}, log=["job.log"]
    )
    for name in threads.THREAD_VARIABLES:  # set first, so that teardown restores what run_stage sets
        monkeypatch.setenv(name, "unset")
        monkeypatch.delenv(name)
    monkeypatch.setenv("MKL_NUM_THREADS", "5")
    scripting.run_stage(job)
    assert seen == [2, {"OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "5", "OPENBLAS_NUM_THREADS": "2"}]
