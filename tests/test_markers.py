"""The suite's markers as pytest reads them (README, Test): ``pytest`` leaves the science checks out, ``pytest -m
science`` runs them, and ``pytest -m "not slow"`` (which replaces addopts' ``-m``) leaves them out too."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import ROOT

MODULE = "tests/test_laws_calibration.py"
"""A module with science checks and a test of their mechanism beside them."""
SCIENCE = {
    "test_coverage_300_studies_is_neither_too_narrow_nor_too_wide",
    "test_coverage_2000_studies_within_93_to_97_percent",
}


def collected(*marker: str) -> set[str]:
    """The names of ``MODULE``'s tests that ``pytest --collect-only`` with these options collects, in one process."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", "-p", "no:cacheprovider", *marker, MODULE],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return {line.split("::")[1] for line in done.stdout.splitlines() if "::" in line}


@pytest.mark.parametrize(
    ("marker", "science"),
    [((), False), (("-m", "science"), True), (("-m", "not slow"), False)],
    ids=["default", "science", "not slow"],
)
def test_the_science_checks_run_only_when_asked_for(marker: tuple[str, ...], science: bool):
    names = collected(*marker)
    assert names, marker
    assert (SCIENCE <= names) if science else not (SCIENCE & names), names
    if marker == ("-m", "science"):
        assert names == SCIENCE  # and nothing else of the module
