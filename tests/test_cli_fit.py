"""``axisrl fit``: the analysis on a runs table the user brings, without the workflow."""

from __future__ import annotations

import subprocess
import sys

import polars as pl

from axisrl.laws import simulate_study


def test_fit_reads_a_plain_csv_of_successes_and_trials(tmp_path):
    runs, _ = simulate_study(
        lambda designs: (
            2.0
            * designs["d_env"].to_numpy() ** -0.4
            * designs["d_task"].to_numpy() ** -0.25
            * designs["d_traj"].to_numpy() ** -0.1
        )
    )
    user = runs.select(
        "d_env",
        "d_task",
        "d_traj",
        "seed",
        successes=(pl.col("p_all") * pl.col("n_all")).round().cast(pl.Int64),
        trials="n_all",
    )
    user = pl.concat(
        [user, user.head(1).with_columns(trials=pl.lit(0, dtype=user["trials"].dtype))]
    )  # a run without trials: excluded
    user.write_csv(tmp_path / "runs.csv")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "axisrl.cli",
            "fit",
            str(tmp_path / "runs.csv"),
            "--out",
            str(tmp_path / "fit"),
            "--n-boot",
            "50",
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert "1 failed runs excluded" in done.stderr
    fits = pl.read_parquet(tmp_path / "fit" / "axis_fits.parquet").filter(pl.col("selected"))
    alpha = dict(zip(fits["axis"], fits["alpha"]))
    assert abs(alpha["d_env"] - 0.4) < 0.1 and abs(alpha["d_task"] - 0.25) < 0.1
    assert (tmp_path / "fit" / "fig2.png").stat().st_size > 10_000
    assert "d_env: alpha = " in done.stdout


def test_fit_names_what_is_missing(tmp_path):
    pl.DataFrame({"d_env": [1, 2], "seed": [0, 0]}).write_csv(tmp_path / "runs.csv")
    done = subprocess.run(
        [sys.executable, "-m", "axisrl.cli", "fit", str(tmp_path / "runs.csv"), "--out", str(tmp_path / "fit")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and "successes/trials" in done.stderr
