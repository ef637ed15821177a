"""Every input to the CLI gets an answer or one line (issue 61): each command is given generated tables and
files, well-formed and malformed (wrong types, empty cells, no rows, huge values, unicode names, numbers stored
as text, CSV and Parquet) and paths that are no file (a folder, a symbolic link loop or to nothing, an
unreadable file). Each must exit 0 with an answer, or 2 with one stderr line ``axisrl: error: ...`` that names
the input (its path or flag): never a traceback, never an exception's class name, never a flag ignored.

Commands run in-process (``axisrl.cli.main``), so an exception a check missed fails the test with its
traceback; what a terminal or pipe sees (``show`` piped) runs the installed command."""

from __future__ import annotations

import contextlib
import io
import math
import os
import re
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from axisrl.artifacts import write_artifact
from axisrl.cli import main
from axisrl.config import StageSpec
from axisrl.laws.joint import Law
from axisrl.recipe import RECIPE_AXES, CostModel
from axisrl.recipe.study import cost_frame
from axisrl.report.compact import compact_table, markdown

ROOT = Path(__file__).resolve().parents[1]
SWEEPS = [(1, 8, 4), (2, 8, 4), (4, 8, 4), (2, 4, 4), (2, 16, 4), (2, 8, 2), (2, 8, 8)]
"""(d_env, d_task, d_traj) of three one-axis sweeps through (2, 8, 4)."""
CLASS_NAME = re.compile(r"\b\w*(Error|Exception|Warning)\b|Traceback")
"""What a message must not show: an exception's class name (``ColumnNotFoundError``, ``KeyError``)."""
ROOT_USER = hasattr(os, "geteuid") and os.geteuid() == 0
"""root reads a file whatever its permissions: there an unreadable file cannot be made."""
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
"""The same examples on every run, so a run's verdict is the code's, not the draw's (CI cannot fail on a draw
that the previous run did not make); to search further, change a test's examples or run hypothesis by hand."""


def answer(*argv: str, cwd: Path | None = None) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``axisrl ARGV`` run in-process; an exception escaping ``main`` fails."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.ExitStack() as stack:
        if cwd is not None:
            stack.enter_context(contextlib.chdir(cwd))
        stack.enter_context(contextlib.redirect_stdout(out))
        stack.enter_context(contextlib.redirect_stderr(err))
        try:
            code = main(list(argv))
        except SystemExit as exc:  # argparse's refusals, and --version
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def check(done: tuple[int, str, str], *names: str) -> str | None:
    """An answer (status 0, something on stdout, only warnings on stderr), or one error line naming one of
    ``names`` (argparse's refusal of a flag's value: its usage, then a line naming the flag). The error line,
    None for an answer."""
    code, out, err = done
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err, err
    if code == 0:
        assert out.strip(), err
        assert all(line.startswith("axisrl: warning: ") for line in lines), err
        return None
    assert code == 2, (code, err)
    if lines and lines[0].startswith("usage: "):  # argparse: the usage, then "axisrl CMD: error: argument X: ..."
        lines = [line for line in lines if ": error: " in line]
        assert len(lines) == 1 and re.match(r"axisrl( \w+)*: error: ", lines[0]), err
    else:
        assert len(lines) == 1 and lines[0].startswith("axisrl: error: "), err
    line = lines[0]
    assert not CLASS_NAME.search(line), line
    assert any(name in line for name in names), (names, line)
    return line


def folder() -> Path:
    """A fresh folder per example (a function-scoped tmp_path would be one folder for all of them)."""
    return Path(tempfile.mkdtemp(prefix="axisrl-fuzz-"))


# --- paths that are no file -----------------------------------------------------------------------------------

PATH_KINDS = ["missing", "directory", "loop", "dangling", "empty", "bytes", "unreadable", "text"]


def odd_path(kind: str, name: str, suffix: str) -> Path:
    """A path of ``kind`` named ``name`` + ``suffix`` in a fresh folder: none of them a table."""
    path = folder() / f"{name}{suffix}"
    if kind == "directory":
        path.mkdir()
        (path / "inside.parquet").write_bytes(b"x")
    elif kind == "loop":
        other = path.with_name(f"{name}-other{suffix}")
        path.symlink_to(other)
        other.symlink_to(path)
    elif kind == "dangling":
        path.symlink_to(path.with_name("nowhere"))
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "bytes":
        path.write_bytes(bytes(range(256)) * 3)
    elif kind == "unreadable":
        pl.DataFrame({"d_env": [1]}).write_parquet(path)
        path.chmod(0)
    elif kind == "text":
        path.write_text("stage: nothing\n\u00e9t\u00e9,\u4e2d\u6587\n")
    return path


NAMES = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Zl", "Zp")), min_size=1, max_size=12
).filter(lambda name: "/" not in name and name not in (".", "..") and not name.startswith("-"))
"""File names a user may type: unicode, spaces, no slash."""
KINDS = st.sampled_from([k for k in PATH_KINDS if not (ROOT_USER and k == "unreadable")])


@FUZZ
@given(kind=KINDS, name=NAMES, suffix=st.sampled_from([".parquet", ".csv", ".yaml", ""]))
def test_every_command_names_a_path_that_is_no_file(kind, name, suffix):
    """A missing, folder, looping, dangling, empty, binary, unreadable or text path, to each command that reads
    a file: one error line naming it (``show`` and ``catalog`` of a folder say what to do instead)."""
    path = str(odd_path(kind, name, suffix))
    out = str(folder() / "out")
    good_runs = runs_file(folder(), base_runs(), ".csv")
    cases = [
        ["show", path],
        ["fit", path, "--out", out, "--n-boot", "5"],
        ["fit", "--curves", path, "--out", out],
        ["fit", good_runs, "--episodes", path, "--out", out],
        ["recipe", "--budget", "1e10", "--law", path],
        ["power", "config/studies/smoke.yaml", "--noise", path, "--sims", "2"],
        ["power", path, "--sims", "2"],
    ]
    for argv in cases:
        line = check(answer(*argv, cwd=ROOT), path)
        assert line is not None, argv
        if kind in ("directory", "loop", "dangling") and argv[0] != "show":
            assert {"directory": "a directory", "loop": "symbolic link loop", "dangling": "to nothing"}[kind] in line
    catalogued = check(answer("catalog", path), path)
    assert (catalogued is None) == (kind == "directory")


@FUZZ
@given(kind=KINDS, name=NAMES)
def test_model_tiny_refuses_a_path_that_is_no_new_folder(kind, name):
    """``axisrl model tiny DIR`` where DIR is a file, a link to nothing or a loop, or a folder with files in it:
    one line naming it, before any model is written (a missing DIR, the one it writes, is left out: slow)."""
    if kind == "missing":
        kind = "text"
    path = odd_path(kind, name, "")
    assert check(answer("model", "tiny", str(path)), str(path)) is not None
    assert check(answer("model", "tiny", ""), "empty path") is not None


# --- runs tables ----------------------------------------------------------------------------------------------


def base_runs() -> pl.DataFrame:
    """A runs table every check passes: three sweeps, two seeds."""
    return pl.DataFrame(
        [
            {"d_env": e, "d_task": t, "d_traj": j, "seed": s, "successes": 20 + 5 * s + e + t % 3, "trials": 100}
            for e, t, j in SWEEPS
            for s in (0, 1)
        ]
    )


def runs_file(where: Path, table: pl.DataFrame, suffix: str, name: str = "runs") -> str:
    path = where / f"{name}{suffix}"
    if suffix == ".csv":
        table.write_csv(path)
    else:
        table.write_parquet(path)
    return str(path)


ODD_VALUES = st.sampled_from(
    [None, "", "abc", "\u00e9\u4e2d", "1e400", 10**20, -1, 0, 1.5, math.inf, math.nan, 1e300, True, "  7 "]
)
COLUMNS = ("d_env", "d_task", "d_traj", "seed", "successes", "trials", "status")


@st.composite
def runs_tables(draw) -> pl.DataFrame:
    """``base_runs`` changed by a few of: a cell set to an odd value, a column dropped, renamed to unicode or
    stored as text, a unicode column added, a status column (some or all runs failed), only the header."""
    table = base_runs().with_columns(pl.all().cast(pl.String))  # cells of any kind, as text
    for _ in range(draw(st.integers(1, 3))):
        change = draw(
            st.sampled_from(["cell", "cell", "drop", "rename", "extra", "status", "header", "typed", "typed"])
        )
        column = draw(st.sampled_from(table.columns)) if table.columns else None
        if change == "cell" and table.height:
            row, value = draw(st.integers(0, table.height - 1)), draw(ODD_VALUES)
            table = table.with_columns(
                pl.when(pl.int_range(pl.len()) == row)
                .then(pl.lit(None if value is None else str(value)))
                .otherwise(pl.col(column).cast(pl.String))
                .alias(column)
            )
        elif change == "drop" and column:
            table = table.drop(column)
        elif change == "rename" and column:
            new = draw(NAMES)
            if new not in table.columns:
                table = table.rename({column: new})
        elif change == "extra":
            new = draw(NAMES)
            if new not in table.columns:
                table = table.with_columns(pl.lit(draw(st.sampled_from(["x", "1", "\u00fc"]))).alias(new))
        elif change == "status":
            failed = draw(st.sampled_from(["none", "some", "all"]))
            status = {"none": "ok", "all": "failed"}.get(failed)
            if status is None:
                status = pl.when(pl.int_range(pl.len()) % 2 == 0).then(pl.lit("ok")).otherwise(pl.lit("failed"))
            else:
                status = pl.lit(status)
            table = table.with_columns(status.alias("status"))
        elif change == "header":
            table = table.head(0)
        elif change == "typed":  # the numbers as numbers where they all are
            table = table.with_columns(pl.col(c).cast(pl.Float64, strict=False) for c in table.columns)
    return table


@pytest.mark.slow
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(table=runs_tables(), suffix=st.sampled_from([".csv", ".parquet"]), tier=st.sampled_from([None, "T2"]))
def test_fit_answers_or_names_the_runs_table(table, suffix, tier):
    """``axisrl fit RUNS``: an answer (the tables and fig2 written), or one line naming RUNS (or ``--tier``,
    where it would be ignored). A fit that succeeds takes seconds (the figure): slow."""
    where = folder()
    path = runs_file(where, table, suffix)
    argv = ["fit", path, "--out", str(where / "out"), "--n-boot", "5", *(["--tier", tier] if tier else [])]
    line = check(answer(*argv), path, "--tier")
    if line is None:
        assert (where / "out" / "axis_fits.parquet").is_file()
    if tier and {"successes", "trials"} <= set(table.columns):  # --tier on counts without tiers: never ignored
        assert line is not None and (line.startswith("axisrl: error: --tier T2: ") or path in line)


@FUZZ
@given(table=runs_tables(), suffix=st.sampled_from([".csv", ".parquet"]))
def test_fit_refuses_a_runs_table_without_a_run_to_fit(table, suffix):
    """The fast half of the above: tables with no row, or whose every run failed, or whose counts are
    unusable, refused naming the file (the header-only and all-failed tables raised IndexError before)."""
    table = table.head(0) if table.width % 2 else table.with_columns(status=pl.lit("crashed"))
    path = runs_file(folder(), table, suffix)
    line = check(answer("fit", path, "--out", str(folder() / "out")), path)
    assert line is not None and line.startswith(f"axisrl: error: {path}: ")


def test_fit_reads_numbers_stored_as_text_and_prints_a_residue_as_0(tmp_path):
    """A runs table whose every column is text (a spreadsheet's export), of flat success: answered, and its
    slopes, 1e-16 residues of the fit, print 0 in Table 2 (they printed ``1.14e-16 [-0.176, 0.176]``)."""
    flat = base_runs().with_columns(successes=pl.lit(30), trials=pl.lit(100))
    path = runs_file(tmp_path, flat.with_columns(pl.all().cast(pl.String)), ".parquet")
    code, out, err = answer("fit", path, "--out", str(tmp_path / "out"), "--n-boot", "20")
    assert code == 0, err
    alphas = pl.read_parquet(tmp_path / "out" / "axis_fits.parquet")["alpha"]
    assert 0 < alphas.abs().max() < 1e-12  # residues, not zeros: what the table must show as 0
    row = next(line for line in out.splitlines() if line.startswith("| main"))
    assert [cell.split(" [")[0].strip() for cell in row.strip("|").split("|")[1:]] == ["0", "0", "0"], row
    assert not re.search(r"e-1\d", (tmp_path / "out" / "ordering.md").read_text())


def test_table2_prints_a_residue_as_0():
    """Table 2's cell of a slope that is a floating-point residue of its interval's scale: ``0 [lo, hi]``; a small
    slope that is no residue of its interval keeps its digits."""
    frame = pl.DataFrame(
        {
            "width": [64, 64, 64],
            "algo": "grpo",
            "reward_density": "sparse",
            "axis": ["d_env", "d_task", "d_traj"],
            "status": "ok",
            "alpha": [1.1379786002407855e-16, -9.7e-17, 3e-4],
            "alpha_lo": [-0.176, -0.2, 1e-4],
            "alpha_hi": [0.176, 0.2, 5e-4],
        }
    )
    cells = compact_table("table2", frame).row(0)
    assert cells[3:] == ("0 [-0.176, 0.176]", "0 [-0.2, 0.2]", "0.0003 [0.0001, 0.0005]")
    assert "e-1" not in markdown(compact_table("table2", frame))


@FUZZ
@given(
    success=st.lists(
        st.sampled_from([None, "yes", "0.5", "2", "-1", "nan", "\u00bd", 1.5, -0.1, math.inf]), min_size=1
    ),
    suffix=st.sampled_from([".csv", ".parquet"]),
)
def test_fit_refuses_episodes_whose_success_is_no_rate(success, suffix):
    """``--episodes`` with a success that is not a number in [0, 1] (text, empty, out of range) was accepted and
    ignored: refused, naming the file and the column."""
    where = folder()
    runs = runs_file(where, base_runs(), ".csv")
    n = len(success)
    episodes = pl.DataFrame(
        {
            "run_key": ["a"] * n,
            "task_id": [f"t{i}" for i in range(n)],
            "tier": "T2",
            "success": [None if v is None else str(v) for v in success],
        }
    )
    path = runs_file(where, episodes, suffix, "episodes")
    line = check(answer("fit", runs, "--episodes", path, "--out", str(where / "out")), path)
    usable = all(value == "0.5" for value in success)  # then refused as read by no table of these runs
    assert line is not None and (("column success" in line) != usable)


def test_fit_refuses_a_flag_it_would_ignore(tmp_path):
    """``--tier`` on a table of successes/trials (no tiers), ``--episodes`` that no table of the runs reads, and
    ``--tier``/``--episodes`` with ``--curves``: refused naming the flag (they were ignored)."""
    runs = runs_file(tmp_path, base_runs(), ".csv")
    episodes = runs_file(
        tmp_path, pl.DataFrame({"run_key": ["a"], "task_id": ["t"], "tier": ["T2"], "success": [1.0]}), ".csv", "ep"
    )
    out = str(tmp_path / "out")
    assert check(answer("fit", runs, "--tier", "T0", "--out", out), "--tier T0").startswith(
        "axisrl: error: --tier T0: "
    )
    line = check(answer("fit", runs, "--episodes", episodes, "--out", out), "--episodes")
    assert line.startswith(f"axisrl: error: --episodes {episodes}: {runs}: ") and "worlds_variants" in line
    for flag, value in (("--tier", "T2"), ("--episodes", episodes)):
        assert check(answer("fit", "--curves", runs, flag, value, "--out", out), flag) is not None
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("out", ["", "file", "loop"])
def test_fit_refuses_an_out_that_is_no_folder(out, tmp_path, monkeypatch):
    """``--out ""`` wrote into the current folder; a file or a symbolic link loop: refused before any work."""
    monkeypatch.chdir(tmp_path)
    runs = runs_file(tmp_path, base_runs(), ".csv")
    if out == "loop":
        Path("loop").symlink_to("loop2")
        Path("loop2").symlink_to("loop")
    if out == "file":
        out = runs
    line = check(answer("fit", runs, "--out", out), "--out")
    assert line.startswith("axisrl: error: --out") and (out or "empty path") in line
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["runs.csv", *(["loop", "loop2"] * (out == "loop"))])


# --- show and catalog -----------------------------------------------------------------------------------------

COLUMN_NAMES = st.lists(NAMES.map(lambda n: n * 3), min_size=1, max_size=6, unique=True)


@st.composite
def artifacts(draw) -> pl.DataFrame:
    """Artifact frames of unicode (and long) column names and cells of every kind: nulls, huge, text, lists."""
    names = draw(COLUMN_NAMES)
    height = draw(st.integers(0, 4))
    kinds = {
        "int": st.integers(-(2**63), 2**63 - 1),
        "float": st.floats(allow_nan=True, allow_infinity=True),
        "text": st.text(max_size=60),
        "null": st.none(),
    }
    columns = {}
    for name in names:
        kind = draw(st.sampled_from(sorted(kinds)))
        values = draw(st.lists(st.one_of(st.none(), kinds[kind]), min_size=height, max_size=height))
        dtype = {"int": pl.Int64, "float": pl.Float64, "text": pl.String, "null": pl.Null}[kind]
        columns[name] = pl.Series(name, values, dtype=dtype)
    return pl.DataFrame(columns)


@FUZZ
@given(frame=artifacts(), rows=st.one_of(st.integers(0, 10), st.integers(10, 10**40)))
def test_show_answers_any_artifact_and_any_row_count(frame, rows):
    """``axisrl show -n N``: any N (``-n 10**30`` raised OverflowError), any columns; every column is named in
    the schema on its own line."""
    path = folder() / "artifact.parquet"
    write_artifact(frame, path, StageSpec("plan", {"\u00e9": [1, None]}))
    code, out, err = answer("show", "-n", str(rows), str(path))
    assert check((code, out, err)) is None
    schema = out.split("schema:\n")[1].splitlines()
    for name in frame.columns:
        assert any(line == f"  {name}: {frame.schema[name]}" for line in schema), name


@pytest.mark.parametrize("rows", ["1e3", "x", "-2", "2.5"])
def test_show_refuses_a_row_count_that_is_no_count(rows):
    line = check(answer("show", "-n", rows, "x.parquet"), "-n")
    assert "_count" not in line and rows.lstrip("-") in line


@FUZZ
@given(
    entries=st.lists(st.sampled_from(["artifact", "corrupt", "loop", "folder", "foreign", "unreadable"]), max_size=5),
    name=NAMES,
)
def test_catalog_lists_any_results_folder(entries, name):
    """``axisrl catalog`` of a folder holding artifacts beside corrupt, looping, foreign or unreadable files:
    an answer, each file listed (an unreadable one with its error)."""
    results = folder() / name
    results.mkdir()
    for k, entry in enumerate(entries):
        path = results / f"{entry}{k}" / "frame.parquet"
        path.parent.mkdir()
        if entry == "artifact":
            write_artifact(pl.DataFrame({"x": [k]}), path, StageSpec("plan", {}))
        elif entry == "corrupt":
            path.write_bytes(b"PAR1 not really")
        elif entry == "loop":
            path.symlink_to(path)
        elif entry == "folder":
            path.mkdir()
        elif entry == "foreign":
            pl.DataFrame({"x": [k]}).write_parquet(path)
        elif entry == "unreadable" and not ROOT_USER:
            pl.DataFrame({"x": [k]}).write_parquet(path)
            path.chmod(0)
    assert check(answer("catalog", str(results))) is None


def test_show_does_not_wrap_a_table_piped():
    """``axisrl show`` into a pipe: the head's header line carries every long column name whole (polars wraps a
    table to 100 characters where there is no terminal, breaking names over lines)."""
    where = folder()
    names = [f"a_rather_long_column_name_{k}_\u00fc" for k in range(8)]
    write_artifact(pl.DataFrame({n: [1.5, 2.5] for n in names}), where / "wide.parquet", StageSpec("plan", {}))
    done = subprocess.run(["axisrl", "show", str(where / "wide.parquet")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    header = next(line for line in done.stdout.splitlines() if names[0] in line and "\u2506" in line)
    assert all(name in header for name in names), header


# --- recipe ---------------------------------------------------------------------------------------------------

LAW = Law(E=0.3, A={"d_env": 2.0, "d_task": 3.0, "d_traj": 1.0}, alpha={"d_env": 0.5, "d_task": 0.3, "d_traj": 0.2})
RANGES = {"d_env": (2.0, 64.0), "d_task": (8.0, 1024.0), "d_traj": (1.0, 32.0)}
CENTRE = {"width": 64.0, "d_env": 8.0, "d_task": 64.0, "d_traj": 4.0}
MODEL = CostModel("flop", visits=64.0, c_width=1e3, c_env=2e5, c_task=1e4, c_traj=100.0, c_token=1.0)
UNIT = float(MODEL.cost(CENTRE))


def law_frame(draws: int = 3) -> pl.DataFrame:
    """A recipe ``law.parquet``'s columns (``axisrl.recipe.fitted.law_frame``): the fit and a few draws."""
    rng = np.random.default_rng(0)
    rows = [
        {
            "draw": k - 1,
            "E": LAW.E,
            "m_star": None,
            "k_star": None,
            **{f"A_{a}": LAW.A.get(a) for a in RECIPE_AXES},
            **{
                f"alpha_{a}": None if a not in LAW.alpha else LAW.alpha[a] + 0.01 * rng.standard_normal()
                for a in RECIPE_AXES
            },
            **{f"lo_{a}": RANGES.get(a, (None, None))[0] for a in RECIPE_AXES},
            **{f"hi_{a}": RANGES.get(a, (None, None))[1] for a in RECIPE_AXES},
            **{f"centre_{a}": CENTRE[a] for a in RECIPE_AXES},
        }
        for k in range(draws + 1)
    ]
    return pl.DataFrame(rows, schema_overrides={name: pl.Float64 for name in rows[0] if name != "draw"})


@st.composite
def recipe_frames(draw) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(law, cost) frames, each perhaps with a column dropped, stored as text, a cell emptied or made huge or
    infinite, or no rows."""
    frames = [law_frame(), cost_frame(MODEL, "toolworld")]
    for _ in range(draw(st.integers(0, 3))):
        which = draw(st.integers(0, 1))
        frame = frames[which]
        column = draw(st.sampled_from(frame.columns))
        change = draw(st.sampled_from(["drop", "text", "null", "huge", "inf", "header"]))
        if change == "drop":
            frame = frame.drop(column)
        elif change == "text" and not isinstance(frame[column].dtype, pl.List):
            frame = frame.with_columns(pl.col(column).cast(pl.String))
        elif change == "header":
            frame = frame.head(0)
        elif change == "null" or (change in ("huge", "inf") and frame[column].dtype.is_float()):
            value = {"null": None, "huge": 1e300, "inf": math.inf}[change]
            frame = frame.with_columns(pl.lit(value, dtype=frame[column].dtype).alias(column))
        frames[which] = frame
    return frames[0], frames[1]


@FUZZ
@given(
    frames=recipe_frames(),
    budget=st.sampled_from(["1e-300", str(UNIT / 10), str(3 * UNIT), "1e300", "nan", "x"]),
)
def test_recipe_answers_or_names_the_law_or_cost_file(frames, budget):
    """``axisrl recipe --law LAW``: an answer, or one line naming law.parquet, cost.parquet or ``--budget``
    (a law whose numbers are text raised TypeError; one with no rows, IndexError)."""
    law, cost = frames
    where = folder()
    spec = StageSpec("recipe", {}, {})
    write_artifact(law, where / "law.parquet", spec)
    write_artifact(cost, where / "cost.parquet", spec)
    done = answer("recipe", "--budget", budget, "--law", str(where / "law.parquet"), "--starts", "2")
    check(done, str(where / "law.parquet"), str(where / "cost.parquet"), "--budget", "budget")


# --- power, where, the top level ------------------------------------------------------------------------------

OVERLAYS = st.sampled_from(
    [
        "",
        "study: null\n",
        "- a\n- b\n",
        "study: {seeds: []}\n",
        "study: {seeds: [0, 0]}\n",
        "study: {seeds: ['\u00e9']}\n",
        "study: {grids: {d_env: [1, 10000000000000000000000]}}\n",
        "study: {grids: {d_env: 'many'}}\n",
        "study: {width: -3}\n",
        "train: {updates: 1e400}\n",
        "\u00fcnknown: 1\n",
        "study: [\n",
        "preset: {name: smoke}\n",
        "study: {seeds: [3, 4]}\n",
        "train: {updates: 2}\n",
    ]
)


@pytest.mark.slow
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(overlay=OVERLAYS, search=st.sampled_from([[], ["--budget", "1e6"], ["--target", "alpha=0.1"]]))
def test_power_answers_or_names_the_config_or_flag(overlay, search):
    """``axisrl power smoke.yaml OVERLAY``: an answer, or one line naming the overlay or the search flag
    (``--budget`` on the smoke preset, whose grids leave no design to search, raised ColumnNotFoundError)."""
    path = folder() / "overlay.yaml"
    path.write_text(overlay)
    done = answer("power", "config/studies/smoke.yaml", str(path), "--sims", "2", *search, cwd=ROOT)
    check(done, str(path), *search[:1])
    if search:  # the smoke preset's grids have 2 points an axis: never searched
        assert done[0] == 2


def test_power_budget_on_the_smoke_preset_names_the_flag():
    line = check(answer("power", "config/studies/smoke.yaml", "--budget", "1e6", cwd=ROOT), "--budget")
    assert line.startswith("axisrl: error: --budget 1e+06: config/studies/smoke.yaml: ") and "3" in line


@FUZZ
@given(target=st.text(max_size=20).filter(lambda text: not text.startswith("-")))
def test_where_answers_any_target(target):
    done = answer("where", target)
    if check(done, repr(target)) is None:
        assert target in done[1]


FLAGS = ["--nope", "-x", "--out", "--tier", "--version", "-n", "3", "\u00e9", "--", "-"]


@FUZZ
@given(argv=st.lists(st.sampled_from(FLAGS), max_size=4), command=st.sampled_from([[], ["where"], ["model"]]))
def test_an_unknown_flag_is_named(argv, command):
    """Unknown flags, with no command or a cheap one: argparse's usage and one line; an unknown flag is named as
    one, never a missing command (``axisrl --nope`` said ``the following arguments are required: command``)."""
    code, out, err = answer(*argv, *command)
    assert "Traceback" not in err
    if code == 0:
        return
    lines = [line for line in err.splitlines() if ": error: " in line]
    assert code == 2 and len(lines) == 1, err
    unknown = [a for a in argv if a in ("--nope", "-x", "--out", "--tier")]
    if unknown and "--version" not in argv:
        assert "unrecognized arguments" in lines[0] or "invalid choice" in lines[0] or "expected" in lines[0], err


def test_an_unknown_flag_without_a_command_is_named():
    code, _, err = answer("--nope")
    assert code == 2 and err.splitlines()[-1] == "axisrl: error: unrecognized arguments: --nope"
    code, _, err = answer()
    assert code == 2 and err.splitlines()[-1] == "axisrl: error: the following arguments are required: command"
