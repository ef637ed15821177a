"""``axisrl fit``: the analysis on a runs table the user brings, without the workflow."""

from __future__ import annotations

import subprocess
import sys

import polars as pl

from axisrl.laws import simulate_study


def test_fit_reads_a_plain_csv_of_successes_and_trials(tmp_path):
    runs = simulate_study(
        lambda designs: (
            2.0
            * designs["d_env"].to_numpy() ** -0.4
            * designs["d_task"].to_numpy() ** -0.25
            * designs["d_traj"].to_numpy() ** -0.1
        )
    ).runs
    user = runs.select(
        "d_env",
        "d_task",
        "d_traj",
        "seed",
        successes=(pl.col("p_all") * pl.col("n_all")).round().cast(pl.Int64),
        trials="n_all",
        status=pl.lit("ok"),
    )
    user = pl.concat(
        [user, user.head(1).with_columns(trials=pl.lit(None, dtype=user["trials"].dtype), status=pl.lit("failed"))]
    )  # a failed run, without trials: excluded
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
    fits = pl.read_parquet(tmp_path / "fit" / "axis_fits.parquet")
    assert fits.height == 3  # one row per axis: alpha is the log-log slope whatever AICc prefers
    alpha = dict(zip(fits["axis"], fits["alpha"]))
    assert abs(alpha["d_env"] - 0.4) < 0.1 and abs(alpha["d_task"] - 0.25) < 0.1
    assert (tmp_path / "fit" / "fig2.png").stat().st_size > 10_000
    header, rule, row = done.stdout.splitlines()[1:4]
    assert [cell.strip() for cell in header.strip("|").split("|")] == [
        "model size",
        "alpha_E (d_env)",
        "alpha_T (d_task)",
        "alpha_tau (d_traj)",
    ]
    d_env = fits.filter(pl.col("axis") == "d_env").row(0, named=True)
    assert f"{d_env['alpha']:.3g} [{d_env['alpha_lo']:.3g}, {d_env['alpha_hi']:.3g}]" in row
    noise = pl.read_parquet(tmp_path / "fit" / "noise.parquet")  # seeds given: the spread per point
    assert noise["n_seeds"].max() == 3 and noise.height == 18  # 3 sweeps of 6 points


def test_fit_names_what_is_missing(tmp_path):
    pl.DataFrame({"d_env": [1, 2], "seed": [0, 0]}).write_csv(tmp_path / "runs.csv")
    done = subprocess.run(
        [sys.executable, "-m", "axisrl.cli", "fit", str(tmp_path / "runs.csv"), "--out", str(tmp_path / "fit")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and "successes/trials" in done.stderr
