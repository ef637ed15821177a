"""Shared fixtures: the repository's config and schema, a copy of the workflow in a temp dir, the smoke study run
once per test session and shared by every test (and every xdist worker) that only reads it; and whether this
interpreter collects tests/verl (only where verl is installed)."""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from filelock import FileLock

from axisrl.config import load_config, load_yaml

ROOT = Path(__file__).resolve().parents[1]
SCHEMA_PATH = ROOT / "config" / "schema.yaml"
DEFAULT_CONFIG = ROOT / "config" / "config.yaml"
SMOKE_CONFIG = ROOT / "config" / "studies" / "smoke.yaml"
SMOKE = ("--configfile", "config/studies/smoke.yaml")
"""The smoke preset, as Snakemake's arguments in a workflow copy."""


def verl_installed() -> bool:
    """Whether verl is installed in this interpreter (as in the verl venv). Only there is tests/verl collected
    directly; elsewhere tests/test_verl_venv.py runs it in the verl venv, so each test runs once either way."""
    try:
        importlib.metadata.version("verl")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


collect_ignore = [] if verl_installed() else ["verl"]


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto``: a worker per core and one more. The Slurm and verl tests' worker
    spends most of its time waiting on other processes (Slurm's status polls, the verl venv's pytest), and the
    extra worker keeps both cores busy meanwhile. ``PYTEST_XDIST_AUTO_NUM_WORKERS`` still sets the count."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return len(os.sched_getaffinity(0)) + 1


def module_fixture_users(item: pytest.Item) -> bool:
    """Whether ``item`` uses a module-scoped fixture, which pytest makes once per module and worker."""
    info = getattr(item, "_fixtureinfo", None)  # test functions have it; other items (doctests) share nothing
    return info is not None and any(defs[-1].scope == "module" for defs in info.name2fixturedefs.values() if defs)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every science check is marked slow too; then how pytest-xdist hands the tests out (``--dist loadgroup
    --no-loadscope-reorder``: README, Test). A test that uses a module-scoped fixture (a pool, a trained policy, a
    browser) joins its module's group, so the fixture is made once, on one worker, instead of once per worker;
    every other test goes out alone. Slow groups come first (a trained module, the Slurm cluster, the verl venv:
    the longest units), then slow tests, so that the long work starts early and the short unit tests fill the gaps
    at the end instead of one study running alone on the last busy worker."""
    for item in items:  # a science check is slow too, so that `-m "not slow"` (which replaces addopts' -m) skips it
        if item.get_closest_marker("science") and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    for item in items:
        if module_fixture_users(item) and not any(item.iter_markers("xdist_group")):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
    items.sort(
        key=lambda item: (item.get_closest_marker("slow") is None, item.get_closest_marker("xdist_group") is None)
    )


@pytest.fixture(scope="session")
def schema() -> dict:
    return load_yaml(SCHEMA_PATH)


@pytest.fixture(scope="session")
def smoke_config() -> dict:
    return load_config(DEFAULT_CONFIG, SMOKE_CONFIG, schema_path=SCHEMA_PATH)


def copy_workflow(dest: Path) -> Path:
    """A runnable copy of the workflow (what a clean clone holds), without results."""
    shutil.copy(ROOT / "Snakefile", dest / "Snakefile")
    for folder in ("config", "workflow", "envs", "profiles"):
        shutil.copytree(ROOT / folder, dest / folder, ignore=shutil.ignore_patterns("__pycache__", "axisrl"))
    return dest


def snakemake(
    workdir: Path, *args: str, check: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """Run the real Snakemake CLI in ``workdir`` (``env``: extra environment variables); output
    (Snakemake logs to stdout) is returned."""
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "--directory",
        str(workdir),
        "--snakefile",
        str(workdir / "Snakefile"),
        *args,
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=workdir, env={**os.environ, **(env or {})})
    if check and done.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done


@pytest.fixture()
def workflow_copy(tmp_path: Path) -> Path:
    return copy_workflow(tmp_path)


def copy_study(study: Path, dest: Path) -> Path:
    """A copy of a finished study (workflow, results and Snakemake's metadata, file times kept), so that Snakemake
    sees its jobs as done there: for a test that changes, kills or reruns part of a study without paying for the
    jobs before it, and leaves the shared run as it was."""
    shutil.copytree(study, dest, symlinks=True, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".made", ".failed"))
    return dest


def shared_study(tmp_path_factory: pytest.TempPathFactory, name: str, *args: str) -> Path:
    """A workflow copy with ``snakemake --cores 2 *args`` run in it once per test session. Under pytest-xdist
    every worker asks for it: the first makes it in the session's shared temp folder under a file lock, the
    others wait for the lock and read it, so two workers never write one folder. A run that failed is not
    made again: every later asker fails with its output. Tests must treat the folder as read-only (a test that
    writes takes a ``copy_study`` of it)."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the session's folder, above every worker's own
    folder = root / f"shared-{name}"
    made, failed = folder / ".made", folder / ".failed"
    with FileLock(root / f"shared-{name}.lock"):
        if failed.exists():
            raise AssertionError(f"the shared {name} study failed in another worker:\n{failed.read_text()}")
        if not made.exists():
            folder.mkdir()
            try:
                snakemake(copy_workflow(folder), "--cores", "2", *args)
            except AssertionError as error:
                failed.write_text(str(error))
                raise
            made.touch()
    return folder


@pytest.fixture(scope="session")
def smoke_study(tmp_path_factory) -> Path:
    """The whole smoke study (every stage to the report's tables and figures), run once per session."""
    return shared_study(tmp_path_factory, "smoke", *SMOKE)


@pytest.fixture(scope="session")
def smoke_upstream(tmp_path_factory) -> Path:
    """The smoke study to ``dedup``, run a second time apart from ``smoke_study`` (its pools are compared with
    that run's) and the start that tests which kill or break a study copy."""
    return shared_study(tmp_path_factory, "smoke-upstream", "dedup", *SMOKE)


@contextlib.contextmanager
def torch_on_one_thread():
    """Torch's in-process work on one thread, and its thread count as it was afterwards."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="session", autouse=True)
def one_thread_per_worker():
    """Under pytest-xdist the workers share the cores: torch's in-process work runs on one thread a worker, so
    that the workers do not each start a thread per core and stall each other. Serial runs keep torch's default."""
    with torch_on_one_thread() if os.environ.get("PYTEST_XDIST_WORKER") else contextlib.nullcontext():
        yield


@pytest.fixture(scope="module")
def one_thread():
    """As the workflow runs a training job: one thread (two threads stall when the other core is busy)."""
    with torch_on_one_thread():
        yield


@pytest.fixture
def captured(monkeypatch):
    """Keep the figure handed to ``style.save`` (still saved) so tests can inspect it."""
    from axisrl.report import style

    kept = []
    real = style.save

    def save(fig, png, pdf):
        kept.append(fig)
        real(fig, png, pdf)

    monkeypatch.setattr(style, "save", save)
    return kept
