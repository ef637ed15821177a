"""The noise frame (seed spread per axis-sweep point and tier) on a hand-made study, and fig_noise."""

from __future__ import annotations

import polars as pl
import pytest

from axisrl.laws.noise import NOISE_SCHEMA, noise_frame
from axisrl.report.noise_figure import noise_figure
from axisrl.report.panels import wilson_interval

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# (d_env, d_task): T2 (successes, trials) of seeds 0, 1, 2. The d_env sweep holds d_task at 16, the
# d_task sweep d_env at 2; (2, 16) is the centre, in both.
COUNTS = {
    (1, 16): [(0, 20), (2, 20), (4, 20)],
    (2, 16): [(10, 20), (10, 20), (10, 20)],
    (4, 16): [(2, 10), (15, 30), (16, 20)],
    (2, 8): [(0, 20), (0, 20), (0, 20)],
    (2, 32): [(20, 20), (4, 20), (20, 20)],
}


def hand_runs(counts: dict = COUNTS) -> pl.DataFrame:
    """The collect schema: p_/n_ per tier (T0: every run 5 of 10), seed, status."""
    rows = [
        {
            "d_env": e,
            "d_task": t,
            "d_traj": 4,
            "seed": seed,
            "status": "ok",
            "p_T2": k / n,
            "n_T2": n,
            "p_T0": 0.5,
            "n_T0": 10,
        }
        for (e, t), seeds in counts.items()
        for seed, (k, n) in enumerate(seeds)
    ]
    return pl.DataFrame(rows)


def row(frame: pl.DataFrame, axis: str, x: float, tier: str = "T2") -> dict:
    (found,) = frame.filter(pl.col("axis") == axis, pl.col("x") == x, pl.col("tier") == tier).iter_rows(named=True)
    return found


def test_noise_frame_by_hand() -> None:
    failed = pl.DataFrame(
        [{"d_env": 1, "d_task": 16, "d_traj": 4, "seed": 3, "status": "failed", "p_T2": None, "n_T2": 0}]
    )
    runs = pl.concat([hand_runs(), failed], how="diagonal_relaxed")
    with pytest.warns(UserWarning, match="1 failed runs excluded"):
        frame = noise_frame(runs, ["T0", "T2"], take_off=0.1)
    assert frame.schema == pl.Schema(NOISE_SCHEMA)
    # two axes x three points x two tiers; d_traj is not swept, the failed run is no seed
    assert frame.height == 12
    assert set(frame["axis"]) == {"d_env", "d_task"} and (frame["n_seeds"] == 3).all()

    # p_i = 0, 0.1, 0.2 (20 trials each): s^2 = 0.01; binomial at the pooled 0.1: 0.09 / 20
    low = row(frame, "d_env", 1)
    assert (low["successes"], low["trials"], low["p"]) == (6, 60, pytest.approx(0.1))
    assert low["between_seed_var"] == pytest.approx(0.01)
    assert low["binomial_var"] == pytest.approx(0.0045)
    assert low["design_effect"] == pytest.approx(0.01 / 0.0045)
    assert low["take_off_share"] == pytest.approx(1 / 3)  # 0.1 itself has not taken off

    centre = row(frame, "d_env", 2)
    assert centre == {**row(frame, "d_task", 16), "axis": "d_env", "x": 2.0}
    assert centre["between_seed_var"] == 0 and centre["binomial_var"] == pytest.approx(0.25 / 20)
    assert centre["design_effect"] == 0 and centre["take_off_share"] == 1

    # p_i = 0.2, 0.5, 0.8 on 10, 30, 20 trials: pooled 33/60, s^2 = 0.09
    high = row(frame, "d_env", 4)
    binomial = 0.55 * 0.45 * (1 / 10 + 1 / 30 + 1 / 20) / 3
    assert high["p"] == pytest.approx(33 / 60)
    assert high["between_seed_var"] == pytest.approx(0.09)
    assert high["binomial_var"] == pytest.approx(binomial)
    assert high["design_effect"] == pytest.approx(0.09 / binomial)
    assert high["take_off_share"] == 1

    zero = row(frame, "d_task", 8)  # every seed at 0: no binomial variance, no design effect
    assert (zero["p"], zero["between_seed_var"], zero["binomial_var"], zero["take_off_share"]) == (0, 0, 0, 0)
    assert zero["design_effect"] is None

    # p_i = 1, 0.2, 1: s^2 = ((4/15)^2 * 2 + (8/15)^2) / 2 = 16/75; binomial at the pooled 11/15: (11/15)(4/15)/20
    top = row(frame, "d_task", 32)
    assert top["p"] == pytest.approx(44 / 60)
    assert top["between_seed_var"] == pytest.approx(16 / 75)
    assert top["binomial_var"] == pytest.approx(44 / 225 / 20)
    assert top["design_effect"] == pytest.approx((16 / 75) / (44 / 225 / 20))
    assert top["take_off_share"] == pytest.approx(2 / 3 + 1 / 3)

    t0 = frame.filter(pl.col("tier") == "T0")
    assert t0.height == 6 and (t0["p"] == 0.5).all() and (t0["between_seed_var"] == 0).all()
    assert t0["binomial_var"].to_list() == pytest.approx([0.025] * 6)


def test_one_seed_has_no_between_seed_variance() -> None:
    one = {point: seeds[:1] for point, seeds in COUNTS.items()}
    frame = noise_frame(hand_runs(one), ["T2"], take_off=0.1)
    assert frame.height == 6 and (frame["n_seeds"] == 1).all()
    assert frame["between_seed_var"].null_count() == 6 and frame["design_effect"].null_count() == 6
    assert row(frame, "d_env", 4)["binomial_var"] == pytest.approx(0.016)


def test_noise_frame_reads_successes_and_trials_of_a_user_table() -> None:
    runs = hand_runs().select(
        "d_env", "d_task", "d_traj", "seed", successes=(pl.col("p_T2") * pl.col("n_T2")).round(), trials="n_T2"
    )
    frame = noise_frame(runs, ["T2"], take_off=0.1)
    assert row(frame, "d_env", 4)["between_seed_var"] == pytest.approx(0.09)


def test_wilson_interval_stays_inside_the_unit_interval() -> None:
    lo, hi = wilson_interval(pl.Series([0, 10, 20]).to_numpy(), pl.Series([20, 20, 20]).to_numpy())
    assert lo[0] == 0 and hi[2] == 1 and 0 < hi[0] < 0.2 and lo[1] < 0.5 < hi[1]


def test_noise_figure_draws_a_png(tmp_path) -> None:
    runs = hand_runs().with_columns(families=pl.lit(["axis_sweeps"]))
    noise = noise_frame(runs, ["T0", "T2"], take_off=0.1)
    png, pdf = tmp_path / "fig_noise.png", tmp_path / "fig_noise.pdf"
    noise_figure(runs, noise, "T2", png, pdf, take_off=0.1)
    assert png.read_bytes().startswith(PNG_SIGNATURE) and pdf.stat().st_size > 0


def test_noise_figure_without_sweep_runs_says_so(tmp_path) -> None:
    runs = hand_runs().with_columns(families=pl.lit(["interaction"]))
    png, pdf = tmp_path / "fig_noise.png", tmp_path / "fig_noise.pdf"
    noise_figure(runs, pl.DataFrame(schema=NOISE_SCHEMA), "T2", png, pdf)
    assert png.read_bytes().startswith(PNG_SIGNATURE)
