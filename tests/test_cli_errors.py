"""Every ``axisrl`` command answers a missing, truncated or mistyped input file as a new user meets
them: one line on stderr naming the file and what is wrong, and exit status 2 (no traceback)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from axisrl.artifacts import write_artifact
from axisrl.cli import main
from axisrl.config import StageSpec


@pytest.fixture()
def files(tmp_path: Path) -> dict[str, Path]:
    """Bad inputs of each kind, and a good Parquet artifact of the wrong stage and columns."""
    text = tmp_path / "notes.parquet"
    text.write_text("run_key,p_T2\nabc,0.5\n")
    good = tmp_path / "plan.parquet"
    write_artifact(pl.DataFrame({"x": [1, 2, 3]}), good, StageSpec("plan", {}))
    truncated = tmp_path / "truncated.parquet"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    plain = tmp_path / "plain.parquet"
    pl.DataFrame({"colour": ["red"], "size": [3]}).write_parquet(plain)
    return {
        "missing": tmp_path / "absent.parquet",
        "not_parquet": text,
        "truncated": truncated,
        "wrong_columns": plain,
        "wrong_stage": good,
        "out": tmp_path / "out",
    }


CASES = {
    "fit of a missing file": (["fit", "{missing}", "--out", "{out}"], "absent.parquet"),
    "fit of a file that is not Parquet": (["fit", "{not_parquet}", "--out", "{out}"], "notes.parquet"),
    "fit of a truncated file": (["fit", "{truncated}", "--out", "{out}"], "truncated.parquet"),
    "fit of a table of other columns": (["fit", "{wrong_columns}", "--out", "{out}"], "plain.parquet"),
    "fit with bad episodes": (["fit", "{wrong_columns}", "--episodes", "{not_parquet}", "--out", "{out}"], "parquet"),
    "show of a missing file": (["show", "{missing}"], "absent.parquet"),
    "show of a file that is not Parquet": (["show", "{not_parquet}"], "notes.parquet"),
    "show of a truncated file": (["show", "{truncated}"], "truncated.parquet"),
    "show of a Parquet file axisrl did not write": (["show", "{wrong_columns}"], "plain.parquet"),
    "recipe with a law that is not Parquet": (
        ["recipe", "--budget", "1e10", "--law", "{not_parquet}"],
        "notes.parquet",
    ),
    "recipe with a law of another stage": (["recipe", "--budget", "1e10", "--law", "{wrong_stage}"], "plan.parquet"),
    "power with noise that is not Parquet": (
        ["power", "config/config.yaml", "--noise", "{not_parquet}"],
        "notes.parquet",
    ),
    "power with a missing config": (["power", "{missing}"], "absent.parquet"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_input_file_gets_one_line_and_status_2(case, files, capsys, monkeypatch):
    monkeypatch.chdir(Path(__file__).resolve().parents[1])  # power reads config/ from the repository
    argv, named = CASES[case]
    status = main([part.format(**files) for part in argv])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert status == 2, err
    assert len(lines) == 1 and lines[0].startswith("axisrl: error: ") and named in lines[0], err
