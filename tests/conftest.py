"""Shared fixtures: the repository's config and schema, and a copy of the workflow in a temp dir; and whether
this interpreter collects tests/verl (only where verl is installed)."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from axisrl.config import load_config, load_yaml

ROOT = Path(__file__).resolve().parents[1]
SCHEMA_PATH = ROOT / "config" / "schema.yaml"
DEFAULT_CONFIG = ROOT / "config" / "config.yaml"
SMOKE_CONFIG = ROOT / "config" / "studies" / "smoke.yaml"


def verl_installed() -> bool:
    """Whether verl is installed in this interpreter (as in the verl venv). Only there is tests/verl collected
    directly; elsewhere tests/test_verl_venv.py runs it in the verl venv, so each test runs once either way."""
    try:
        importlib.metadata.version("verl")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


collect_ignore = [] if verl_installed() else ["verl"]


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


@pytest.fixture(scope="module")
def one_thread():
    """As the workflow runs a training job: one thread (two threads stall when the other core is busy)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


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
