"""Every ``axisrl`` command answers a bad input as a new user meets it (a missing, truncated or
mistyped file, a runs table no fit should read, a config Snakemake would refuse, a number out of
range): one line on stderr naming the input and what is wrong, and exit status 2 (no traceback, no
numpy or polars warning). Each case runs the installed ``axisrl`` command."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import polars as pl
import pytest

from axisrl.artifacts import write_artifact
from axisrl.budget import visits_per_run
from axisrl.config import StageSpec, load_config, load_yaml
from axisrl.planner import RunCost, design_of
from axisrl.stages.registry import train_keys

ROOT = Path(__file__).resolve().parents[1]
SWEEPS = [(1, 8, 4), (2, 8, 4), (4, 8, 4), (2, 4, 4), (2, 16, 4), (2, 8, 2), (2, 8, 8)]
"""(d_env, d_task, d_traj) of three one-axis sweeps through (2, 8, 4): a runs table every check but one passes."""
SMALL_STUDY = "study:\n  families:\n    mixtures:\n      enabled: false\n"
"""The default study without the mixtures family, whose kappa simulations take half a minute."""


def axisrl(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """The installed command, in the repository unless ``cwd`` says otherwise (power reads config/ there)."""
    return subprocess.run(["axisrl", *args], capture_output=True, text=True, cwd=cwd)


def edited(runs: pl.DataFrame, row: int, **cells: object) -> pl.DataFrame:
    """``runs`` with the cells of one row (0-based) replaced."""
    rows = runs.to_dicts()
    rows[row].update(cells)
    return pl.DataFrame(rows, infer_schema_length=None)


def one_error_line(done: subprocess.CompletedProcess) -> str:
    """The error line of a refused command: status 2 and nothing else on stderr."""
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and lines[0].startswith("axisrl: error: "), done.stderr
    return lines[0]


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
    cost = tmp_path / "cost.parquet"
    write_artifact(pl.DataFrame({"domain": ["toolworld"], "currency": ["flops"]}), cost, StageSpec("recipe", {}))
    paths = {
        "missing": tmp_path / "absent.parquet",
        "not_parquet": text,
        "truncated": truncated,
        "wrong_columns": plain,
        "wrong_stage": good,
        "recipe_cost": cost,
        "out": tmp_path / "out",
        "folder": tmp_path,
    }
    runs = pl.DataFrame(
        [
            {"d_env": e, "d_task": t, "d_traj": j, "seed": s, "successes": 20 + s, "trials": 100}
            for e, t, j in SWEEPS
            for s in (0, 1)
        ]
    )
    tables = {
        "runs": runs,
        "more_successes": edited(runs, 3, successes=120),
        "no_trials": edited(runs, 2, trials=0),
        "negative_trials": edited(runs, 2, trials=-5),
        "nan_successes": edited(runs, 4, successes=float("nan")),
        "empty_trials": edited(runs, 5, trials=None),
        "d_env_zero": edited(runs, 0, d_env=0),
        "d_env_negative": edited(runs, 0, d_env=-2),
        "d_env_fraction": edited(runs, 0, d_env=1.5),
        "repeated": pl.concat([runs, runs[6:7]]),
        "tiers": runs.select(
            "d_env", "d_task", "d_traj", "seed", p_T0=pl.lit(0.2), n_T0="trials", p_T2=pl.lit(0.3), n_T2="trials"
        ),
        "episodes": pl.DataFrame({"run": ["a"], "solved": [True]}),
    }
    for name, table in tables.items():
        paths[name] = tmp_path / f"{name}.csv"
        table.write_csv(paths[name])
    configs = {
        "malformed": "study: [\n  a: 1\n",
        "a_list": "- study\n- laws\n",
        "empty": "",
        "unknown_key": "study:\n  seedz: [0, 1]\n",
        "fewer_tasks": "study:\n  grids:\n    d_env: [4, 8, 16]\n    d_task: [2, 4, 8]\n",
    }
    for name, text in configs.items():
        paths[name] = tmp_path / f"{name}.yaml"
        paths[name].write_text(text)
    return paths


CASES = {
    "fit of a missing file": (["fit", "{missing}", "--out", "{out}"], ["absent.parquet"]),
    "fit of a file that is not Parquet": (["fit", "{not_parquet}", "--out", "{out}"], ["notes.parquet"]),
    "fit of a truncated file": (["fit", "{truncated}", "--out", "{out}"], ["truncated.parquet"]),
    "fit of a table of other columns": (["fit", "{wrong_columns}", "--out", "{out}"], ["plain.parquet"]),
    "fit with bad episodes": (["fit", "{wrong_columns}", "--episodes", "{not_parquet}", "--out", "{out}"], ["parquet"]),
    "fit of more successes than trials": (
        ["fit", "{more_successes}", "--out", "{out}"],
        ["more_successes.csv", "column successes, row 4", "at most its trials"],
    ),
    "fit of a run with no trials": (
        ["fit", "{no_trials}", "--out", "{out}"],
        ["no_trials.csv", "column trials, row 3", "at least 1, got 0"],
    ),
    "fit of negative trials": (
        ["fit", "{negative_trials}", "--out", "{out}"],
        ["negative_trials.csv", "column trials", "got -5"],
    ),
    "fit of NaN successes": (
        ["fit", "{nan_successes}", "--out", "{out}"],
        ["nan_successes.csv", "column successes, row 5", "finite"],
    ),
    "fit of a run whose trials are missing": (
        ["fit", "{empty_trials}", "--out", "{out}"],
        ["empty_trials.csv", "column trials, row 6", "empty"],
    ),
    "fit of d_env 0": (["fit", "{d_env_zero}", "--out", "{out}"], ["d_env_zero.csv", "column d_env", "at least 1"]),
    "fit of a negative d_env": (["fit", "{d_env_negative}", "--out", "{out}"], ["d_env_negative.csv", "got -2"]),
    "fit of a fractional d_env": (
        ["fit", "{d_env_fraction}", "--out", "{out}"],
        ["d_env_fraction.csv", "column d_env", "whole number"],
    ),
    "fit of one run twice": (["fit", "{repeated}", "--out", "{out}"], ["repeated.csv", "rows 7 and 15", "one run"]),
    "fit with episodes of other columns": (
        ["fit", "{runs}", "--episodes", "{episodes}", "--out", "{out}"],
        ["episodes.csv", "run_key", "task_id"],
    ),
    "fit of an unknown tier": (
        ["fit", "{tiers}", "--tier", "T9", "--out", "{out}"],
        ["tiers.csv", "'T9'", "the table has tiers T0, T2"],
    ),
    "show of a missing file": (["show", "{missing}"], ["absent.parquet"]),
    "show of a file that is not Parquet": (["show", "{not_parquet}"], ["notes.parquet"]),
    "show of a truncated file": (["show", "{truncated}"], ["truncated.parquet"]),
    "show of a Parquet file axisrl did not write": (["show", "{wrong_columns}"], ["plain.parquet"]),
    "show of a folder": (["show", "{folder}"], ["{folder}", "a folder", "axisrl catalog"]),
    "catalog of a missing folder": (["catalog", "{missing}"], ["absent.parquet", "no such folder"]),
    "catalog of a file": (["catalog", "{runs}"], ["runs.csv", "not a folder"]),
    "recipe with a law that is not Parquet": (
        ["recipe", "--budget", "1e10", "--law", "{not_parquet}"],
        ["notes.parquet"],
    ),
    "recipe with a law of another stage": (["recipe", "--budget", "1e10", "--law", "{wrong_stage}"], ["plan.parquet"]),
    "recipe with a law that does not exist": (["recipe", "--budget", "1e10", "--law", "{missing}"], ["absent.parquet"]),
    "recipe with a recipe artifact that is not its law": (
        ["recipe", "--budget", "1e10", "--law", "{recipe_cost}"],
        ["cost.parquet", "not its law"],
    ),
    "where of an unknown target": (["where", "fig99"], ["'fig99'"]),
    "power with noise that is not Parquet": (
        ["power", "config/config.yaml", "--noise", "{not_parquet}"],
        ["notes.parquet"],
    ),
    "power with a missing config": (["power", "{missing}"], ["absent.parquet"]),
    "power with malformed YAML": (["power", "{malformed}"], ["malformed.yaml", "not valid YAML", "line 3"]),
    "power with a YAML list": (["power", "{a_list}"], ["a_list.yaml", "list", "mapping"]),
    "power with an empty config": (["power", "{empty}"], ["empty.yaml", "is empty"]),
    "power with a key the schema refuses": (
        ["power", "{unknown_key}"],
        ["unknown_key.yaml", "invalid config", "seedz"],
    ),
    "power with a study Snakemake refuses": (
        ["power", "{fewer_tasks}"],
        ["fewer_tasks.yaml", "cannot honour", "d_env=8 d_task=4"],
    ),
    "power with a missing results folder": (
        ["power", "config/config.yaml", "--results", "{missing}"],
        ["absent.parquet", "no such folder"],
    ),
    "power with a target that is no number": (["power", "config/config.yaml", "--target", "alpha=x"], ["alpha=x"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_input_gets_one_line_and_status_2(case, files):
    argv, named = CASES[case]
    line = one_error_line(axisrl(*(part.format(**files) for part in argv)))
    for part in named:
        assert part.format(**files) in line, line


OUTSIDE = {
    "power outside the workflow's folder": (
        ["power", "config/config.yaml"],
        ["config/config.yaml", "workflow's folder"],
    ),
    "catalog without results": (["catalog"], ["results", "no such folder"]),
    "recipe without results": (["recipe", "--budget", "1e10"], ["results/recipe", "--law"]),
}


@pytest.mark.parametrize("case", list(OUTSIDE))
def test_a_command_run_outside_the_workflow_says_what_is_missing(case, tmp_path):
    argv, named = OUTSIDE[case]
    line = one_error_line(axisrl(*argv, cwd=tmp_path))
    assert all(part in line for part in named), line


NUMBERS = {
    "power --budget -1": ["power", "config/config.yaml", "--budget", "-1"],
    "power --budget 0": ["power", "config/config.yaml", "--budget", "0"],
    "power --sims 0": ["power", "config/config.yaml", "--sims", "0"],
    "recipe --budget 0": ["recipe", "--budget", "0"],
    "recipe --budget nan": ["recipe", "--budget", "nan"],
    "fit --n-boot 0": ["fit", "runs.csv", "--out", "out", "--n-boot", "0"],
    "fit --n-boot -3": ["fit", "runs.csv", "--out", "out", "--n-boot", "-3"],
    "show -n -3": ["show", "-n", "-3", "x.parquet"],
}


@pytest.mark.parametrize("case", list(NUMBERS))
def test_a_number_out_of_range_is_refused_by_argparse(case):
    """argparse's own answer: its usage, then one error line naming the option."""
    argv = NUMBERS[case]
    done = axisrl(*argv)
    errors = [line for line in done.stderr.splitlines() if "error:" in line]
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert len(errors) == 1 and errors[0].startswith(f"axisrl {argv[0]}: error: argument "), done.stderr
    assert case.split()[1] in errors[0], done.stderr


def cost_line(stdout: str) -> tuple[float, str]:
    """The cost ``axisrl power`` prints, and what it says priced it."""
    match = re.search(r"^cost: (\S+) cpu-seconds .*\n  priced by (.*)$", stdout, re.MULTILINE)
    assert match, stdout
    return float(match[1]), match[2]


def results_with_jobs(results: Path, jobs: dict[str, tuple[float, list[int]]]) -> Path:
    """A results folder of train jobs as the workflow writes them: key -> (wall seconds, each run's rollouts)."""
    for key, (seconds, rollouts) in jobs.items():
        (results / "benchmarks" / "train").mkdir(parents=True, exist_ok=True)
        (results / "benchmarks" / "train" / f"{key}.tsv").write_text(f"s\th:m:s\n{seconds}\t0:00:01\n")
        (results / "train" / key).mkdir(parents=True)
        pl.DataFrame({"episodes": rollouts}).write_parquet(results / "train" / key / "runs.parquet")
    return results


@pytest.fixture()
def small_study(tmp_path: Path) -> tuple[Path, dict, list[str]]:
    """The overlay of a quick study, its config and three of its train keys."""
    overlay = tmp_path / "small.yaml"
    overlay.write_text(SMALL_STUDY)
    config = load_config(ROOT / "config" / "config.yaml", overlay, schema_path=ROOT / "config" / "schema.yaml")
    return overlay, config, sorted(train_keys(config, load_yaml(ROOT / "config" / "schema.yaml")))[:3]


def test_power_prices_results_of_another_study_by_the_cost_model(small_study, tmp_path):
    """Train jobs of another study (keys not this study's) fit to a negative cost: the stated model prices
    the design instead, and the output says so."""
    overlay, _, _ = small_study
    other = results_with_jobs(
        tmp_path / "results", {"a" * 12: (5.0, [10_000]), "b" * 12: (1.0, [5_000, 5_000]), "c" * 12: (2, [9_000])}
    )
    done = axisrl("power", str(overlay), "--results", str(other), "--sims", "3")
    assert done.returncode == 0 and not done.stderr, done.stderr
    cost, source = cost_line(done.stdout)
    assert cost > 0
    assert "stated cost model" in source and "holds 3 measured train jobs, 0 of this study" in source


def test_power_prices_the_studys_own_jobs(small_study, tmp_path):
    """Three of this study's train jobs measured at 2 s a run + 0.001 s a rollout: the design is priced at that."""
    overlay, config, keys = small_study
    jobs = {key: [1000 * (i + 1), 500] for i, key in enumerate(keys)}
    results = results_with_jobs(tmp_path / "results", {k: (2 * len(r) + 0.001 * sum(r), r) for k, r in jobs.items()})
    done = axisrl("power", str(overlay), "--results", str(results), "--sims", "3")
    assert done.returncode == 0, done.stderr
    cost, source = cost_line(done.stdout)
    assert source.startswith("CPU-seconds fitted to 3 measured train jobs of this study")
    measured = RunCost("cpu_seconds", base=2.0, per_rollout=0.001, visits=visits_per_run(config["train"]))
    assert cost == pytest.approx(measured.of(design_of(config)), rel=0.01)


def test_power_refuses_a_fit_that_prices_a_run_below_zero(small_study, tmp_path):
    overlay, _, keys = small_study
    jobs = dict(zip(keys, [(5.0, [10_000]), (1.0, [5_000, 5_000]), (3.0, [10_000])], strict=True))
    line = one_error_line(axisrl("power", str(overlay), "--results", str(results_with_jobs(tmp_path / "r", jobs))))
    assert "fitted to 3 measured train jobs" in line and "must be positive" in line


@pytest.fixture()
def curve_files(tmp_path: Path) -> dict[str, Path]:
    """Learning-curve tables (``axisrl fit --curves``) a fit must not read, beside a good one."""
    good = pl.DataFrame(
        {
            "run": ["a"] * 3 + ["b"] * 3,
            "design": "d",
            "seed": [0] * 3 + [1] * 3,
            "compute": [0.0, 1e9, 2e9] * 2,
            "success": [0.1, 0.2, 0.3] * 2,
        }
    )
    tables = {
        "curves_good": good,
        "curves_empty": good.head(0),
        "curves_no_compute": good.drop("compute"),
        "curves_success_above_1": edited(good, 4, success=1.5),
        "curves_negative_compute": edited(good, 1, compute=-3.0),
        "curves_text_compute": edited(good.with_columns(pl.col("compute").cast(pl.String)), 2, compute="lots"),
        "curves_one_point": pl.concat([good, good.head(1).with_columns(run=pl.lit("c"))]),
        "curves_repeated": pl.concat([good, good[2:3]]),
    }
    paths = {"out": tmp_path / "out", "missing": tmp_path / "absent.csv"}
    for name, table in tables.items():
        paths[name] = tmp_path / f"{name}.csv"
        table.write_csv(paths[name])
    return paths


CURVE_CASES = {
    "fit --curves of a missing file": (["{missing}"], ["absent.csv", "no such file"]),
    "fit --curves of an empty table": (["{curves_empty}"], ["curves_empty.csv", "empty: no rows"]),
    "fit --curves without compute": (["{curves_no_compute}"], ["curves_no_compute.csv", "no column compute"]),
    "fit --curves of success above 1": (
        ["{curves_success_above_1}"],
        ["curves_success_above_1.csv", "column success, row 5", "must be in [0, 1], got 1.5"],
    ),
    "fit --curves of negative compute": (
        ["{curves_negative_compute}"],
        ["curves_negative_compute.csv", "column compute, row 2", "at least 0, got -3"],
    ),
    "fit --curves of compute that is no number": (
        ["{curves_text_compute}"],
        ["curves_text_compute.csv", "column compute, row 3", "must be a number, got 'lots'"],
    ),
    "fit --curves of a run of one point": (
        ["{curves_one_point}"],
        ["curves_one_point.csv", "run 'c' (row 7) has 1 point", "at least 2"],
    ),
    "fit --curves of one evaluation twice": (
        ["{curves_repeated}"],
        ["curves_repeated.csv", "rows 3 and 7 are one evaluation", "one row per compute"],
    ),
    "fit of both a runs table and --curves": (["{curves_good}", "{curves_good}"], ["runs table or --curves"]),
}


@pytest.mark.parametrize("case", list(CURVE_CASES))
def test_a_bad_curves_file_gets_one_line_and_status_2(case, curve_files):
    """``axisrl fit --curves FILE``: ``axisrl: error: FILE: problem`` and status 2 (the first part is the
    file, the second a runs table given as well)."""
    files, named = CURVE_CASES[case]
    file, *runs = (part.format(**curve_files) for part in files)
    line = one_error_line(axisrl("fit", *runs, "--curves", file, "--out", str(curve_files["out"])))
    for part in named:
        assert part.format(**curve_files) in line, line
    if not runs:
        assert line.startswith(f"axisrl: error: {file}: "), line


def test_the_version_is_printed():
    done = axisrl("--version")
    assert done.returncode == 0 and re.fullmatch(r"axisrl \d+\.\d+\.\d+\S*\n", done.stdout)


@pytest.mark.parametrize(
    ("args", "usage"),
    [(["show", "--bogus", "x"], "usage: axisrl show"), (["model", "tiny", "--zz", "d"], "usage: axisrl model tiny")],
)
def test_a_subcommands_unknown_flag_shows_that_subcommands_usage(args, usage):
    done = axisrl(*args)
    assert done.returncode == 2 and done.stderr.startswith(usage), done.stderr
    assert done.stderr.splitlines()[-1].endswith(f"error: unrecognized arguments: {args[-2]}")


def test_output_to_a_reader_that_went_away_ends_quietly():
    """``axisrl where | head -0``: the pipe's reader is gone before the first write (status 0, nothing on stderr)."""
    read, write = os.pipe()
    os.close(read)
    with os.fdopen(write, "w") as pipe:
        done = subprocess.run(["axisrl", "where"], stdout=pipe, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    assert (done.returncode, done.stderr) == (0, "")
