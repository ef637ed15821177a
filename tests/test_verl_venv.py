"""The verl backend's CPU tests (tests/verl), run by the main `pytest`: verl 0.9.1 pins transformers<5.11, which
the main environment's sentence-transformers does not accept, so they run in a venv of their own.
tests/verl/setup_venv.sh builds it from this interpreter (so it sees this environment's packages), its pytest runs
tests/verl once for the module, and each tests/verl module is one test here that fails with its inner failures'
text. Skipped where the venv cannot be built (pip cannot fetch verl), and where verl is installed in this
interpreter: there tests/conftest.py collects tests/verl directly."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import ROOT, verl_installed

VERL_TESTS = ROOT / "tests" / "verl"
CANNOT_BUILD = 77
"""setup_venv.sh's exit status where pip cannot fetch verl, so the venv cannot be built."""
INNER_TIMEOUT_S = 30 * 60
"""The verl suite takes about three minutes on two cores (two of them the workflow resume test); a run past this
has hung."""
MODULES = sorted(path.stem for path in VERL_TESTS.glob("test_*.py"))

pytestmark = pytest.mark.xdist_group("verl-venv")  # one worker builds .venv-verl in the checkout and runs tests/verl


@dataclass(frozen=True)
class InnerTest:
    """One test of the inner run, from its JUnit XML: ``outcome`` is passed, failed, error or skipped; ``text``
    is pytest's report of a failure or error, or a skip's reason."""

    name: str
    outcome: str
    text: str


def inner_tests(junit_xml: Path) -> dict[str, list[InnerTest]]:
    """The inner run's tests by tests/verl module. JUnit's classname is ``tests.verl.<module>[.<class>]``; a
    module skipped or broken at collection has an empty classname and the module as its name."""
    by_module: dict[str, list[InnerTest]] = {}
    for case in ET.parse(junit_xml).iter("testcase"):
        address = case.get("classname") or case.get("name", "")
        module = address.removeprefix("tests.verl.").split(".")[0]
        reports = [child for child in case if child.tag in ("failure", "error", "skipped")]
        tags = {child.tag for child in reports}
        outcome = "error" if "error" in tags else "failed" if "failure" in tags else "skipped" if tags else "passed"
        # a skip's text is where and why (a skipped module's message says only "collection skipped");
        # a failure's or error's adds pytest's traceback to its message
        text = "\n".join(
            (child.text or child.get("message", ""))
            if child.tag == "skipped"
            else f"{child.get('message', '')}\n{child.text or ''}"
            for child in reports
        ).strip()
        by_module.setdefault(module, []).append(InnerTest(case.get("name", ""), outcome, text))
    return by_module


@pytest.fixture(scope="module")
def verl_run(tmp_path_factory) -> dict[str, list[InnerTest]]:
    """Build (or reuse) the verl venv from this interpreter, then run tests/verl in it once."""
    if verl_installed():
        pytest.skip("verl is installed in this interpreter, so tests/conftest.py collects tests/verl directly")
    setup = subprocess.run(
        ["bash", str(VERL_TESTS / "setup_venv.sh")],
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
    )
    if setup.returncode == CANNOT_BUILD:
        pytest.skip(setup.stdout.strip())
    assert setup.returncode == 0, f"tests/verl/setup_venv.sh failed:\n{setup.stdout}\n{setup.stderr}"
    venv = ROOT / os.environ.get("VERL_VENV", ".venv-verl")
    scratch = tmp_path_factory.mktemp("verl")
    junit_xml = scratch / "junit.xml"
    # -n 0: the inner run is one test of the outer run, in one process, also where the outer run is parallel (the
    # venv sees this environment's pytest-xdist)
    command = [str(venv / "bin" / "python"), "-m", "pytest", str(VERL_TESTS), "-q", "-p", "no:cacheprovider", "-n", "0"]
    inner = subprocess.run(
        [*command, f"--junitxml={junit_xml}", f"--basetemp={scratch / 'tmp'}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=INNER_TIMEOUT_S,
    )
    # 0: all passed, 1: some failed; anything else (a collection error, a usage error) stopped the run.
    assert inner.returncode in (0, 1), (
        f"pytest tests/verl in {venv} exited {inner.returncode}:\n{inner.stdout[-20000:]}"
    )
    return inner_tests(junit_xml)


@pytest.mark.slow
@pytest.mark.parametrize("module", MODULES)
def test_verl_module(verl_run: dict[str, list[InnerTest]], module: str):
    tests = verl_run.get(module, [])
    assert tests, f"the verl venv's pytest ran no test of tests/verl/{module}.py"
    broken = [test for test in tests if test.outcome in ("failed", "error")]
    assert not broken, "\n\n".join(
        f"tests/verl/{module}.py::{test.name} {test.outcome}:\n{test.text}" for test in broken
    )
    if all(test.outcome == "skipped" for test in tests):
        pytest.skip("; ".join(sorted({test.text for test in tests})))


def test_inner_tests_reads_pytest_junit(tmp_path: Path):
    """What the per-module tests above read: a passing, a failing, an erroring and a skipped inner test, and a
    module skipped at collection, from the JUnit XML of a real pytest run of a tests/verl of its own."""
    verl_tests = tmp_path / "tests" / "verl"
    verl_tests.mkdir(parents=True)
    (verl_tests / "test_mixed.py").write_text(
        "import pytest\n\n"
        "@pytest.fixture\ndef broken():\n    raise RuntimeError('fixture broke')\n\n"
        "class TestGroup:\n    def test_passes(self):\n        pass\n\n"
        "def test_fails():\n    assert 1 == 2, 'one is not two'\n\n"
        "def test_errs(broken):\n    pass\n\n"
        "@pytest.mark.skip(reason='skipped on purpose')\ndef test_skips():\n    pass\n"
    )
    (verl_tests / "test_absent.py").write_text("import pytest\n\npytest.importorskip('no_such_module')\n")
    junit_xml = tmp_path / "junit.xml"
    isolated = ["-p", "no:cacheprovider", "-c", os.devnull, f"--rootdir={tmp_path}"]
    subprocess.run(
        [sys.executable, "-m", "pytest", "tests/verl", *isolated, f"--junitxml={junit_xml}"],
        cwd=tmp_path,
        capture_output=True,
    )
    found = {module: {test.name: test for test in tests} for module, tests in inner_tests(junit_xml).items()}
    assert set(found) == {"test_mixed", "test_absent"}
    mixed = found["test_mixed"]
    assert {name: test.outcome for name, test in mixed.items()} == {
        "test_passes": "passed",
        "test_fails": "failed",
        "test_errs": "error",
        "test_skips": "skipped",
    }
    assert "one is not two" in mixed["test_fails"].text
    assert "fixture broke" in mixed["test_errs"].text
    assert "skipped on purpose" in mixed["test_skips"].text
    assert [test.outcome for test in found["test_absent"].values()] == ["skipped"]
    assert "no_such_module" in next(iter(found["test_absent"].values())).text
