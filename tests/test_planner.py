"""The power planner: its noise model from a noise frame, its designs, its costs and its predictions."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from typing import NamedTuple

import numpy as np
import polars as pl
import pytest

from axisrl import planner
from axisrl.laws import Law, simulate_study, success_trends
from axisrl.laws.noise import noise_frame
from axisrl.laws.simulate import DEFAULT_CENTRE, DEFAULT_GRIDS, NoiseModel, SweepNoise, expected_success
from axisrl.planner import STATED_NOISE as NOISE
from axisrl.planner import SweepDesign, candidates, from_noise_frame, measured_cpu_cost, predict
from conftest import ROOT

LAW = Law(E=0.6, A={"d_env": 0.7, "d_task": 1.0, "d_traj": 0.5}, alpha={"d_env": 0.4, "d_task": 0.15, "d_traj": 0.25})
DESIGN = SweepDesign(DEFAULT_GRIDS, DEFAULT_CENTRE, seeds=4, episodes=118)


UNEVEN = SweepNoise(NOISE, {"d_env": replace(NOISE, no_take_off=0.5)})
"""A study whose one-environment end fails more often: the d_env sweep's seeds take off less."""


def _study(seed: int, seeds: int = 4, noise: NoiseModel | SweepNoise = NOISE) -> pl.DataFrame:
    return simulate_study(
        LAW, seeds=tuple(range(seeds)), n_tasks=3 * 118, noise=noise, seed=seed, with_episodes=False
    ).runs


class ReadPilot(NamedTuple):
    """A finished (simulated) 12-seed pilot whose d_env sweep takes off less often, as the planner reads it."""

    truth: planner.Truth
    model: SweepNoise
    episodes: int


@pytest.fixture(scope="module")
def pilot() -> ReadPilot:
    """Read once for the module (the science check of predicted widths and the mechanism tests share it): matching
    each sweep's seed SD by simulation takes 20-45 s."""
    return ReadPilot(
        *from_noise_frame(
            noise_frame(_study(0, seeds=12, noise=UNEVEN), ["T2"], take_off=0.08), DEFAULT_CENTRE, 0.08, tier="T2"
        )
    )


@pytest.mark.science
def test_the_noise_model_read_from_a_noise_frame_is_the_simulated_one() -> None:
    runs = pl.concat(
        [_study(seed, seeds=12, noise=UNEVEN).with_columns(pl.col("seed") + 100 * seed) for seed in range(3)]
    )
    # a threshold between stuck runs (0.05) and trained ones (0.12 and up): the share below it is theirs
    truth, model, episodes = from_noise_frame(noise_frame(runs, ["T2"], take_off=0.08), DEFAULT_CENTRE, 0.08, tier="T2")
    assert episodes == 118
    for axis in ("d_task", "d_traj"):
        # next to the bimodal part the seed SD is weakly identified: the widths it gives are what counts
        assert model.sweeps[axis].seed_sd == pytest.approx(NOISE.seed_sd, abs=0.1)
        # trained runs that happen to fall under the threshold count too: at least the stuck share, not much more
        assert NOISE.no_take_off - 0.03 <= model.sweeps[axis].no_take_off <= NOISE.no_take_off + 0.06
    assert model.sweeps["d_env"].no_take_off == pytest.approx(0.5, abs=0.06)
    assert model.sweeps["d_env"].no_take_off > model.centre.no_take_off > model.sweeps["d_task"].no_take_off
    # the centre's seed-pooled loss, stuck seeds included
    pooled = expected_success(np.array([1.8]), np.array([NOISE.seed_sd]), NOISE.no_take_off, NOISE.untrained_success)
    assert truth.centre_loss == pytest.approx(float(-np.log(pooled[0])), rel=0.15)


@pytest.mark.slow  # the pilot read: 20-45 s
def test_the_noise_model_gives_each_sweep_its_own_take_off_share(pilot: ReadPilot) -> None:
    """The mechanism of the check above, on one pilot: the T2 episodes are the pilot's, the sweep whose seeds are
    stuck half the time reads far more of them stuck than the centre and the other sweeps (0.47 against 0.03-0.17
    measured), and every seed SD is finite and under 1. Catches a reader that pools the sweeps into one model, or
    that reads the take-off share off the wrong side of the threshold."""
    model = pilot.model
    assert pilot.episodes == 118
    assert model.sweeps["d_env"].no_take_off > 0.3 > model.centre.no_take_off
    assert model.sweeps["d_env"].no_take_off > 2 * max(model.sweeps[axis].no_take_off for axis in ("d_task", "d_traj"))
    assert all(0 <= sweep.seed_sd < 1 for sweep in (model.centre, *model.sweeps.values()))


@pytest.mark.science
def test_predicted_trend_half_widths_match_fresh_studies(pilot: ReadPilot) -> None:
    """From a finished (simulated) pilot's noise frame, the planner predicts the trend intervals that
    independent 6-seed studies then report, within 25 %, also for the sweep whose seeds take off
    less often. The pilot has 12 seeds: a 6-seed pilot's own noise estimate is off by 10-25 % by
    chance."""
    both = trend_widths(pilot, 60, range(1, 41))
    assert ((both["half_width"] / both["measured"] - 1).abs() < 0.25).all(), both


def trend_widths(pilot: ReadPilot, n_sims: int, studies: range) -> pl.DataFrame:
    """Per sweep, the trend half-width the planner predicts for 6 seeds (``half_width``, from ``n_sims``
    simulations) and the mean one of fresh 6-seed studies with these seeds (``measured``)."""
    design = SweepDesign(DEFAULT_GRIDS, DEFAULT_CENTRE, 6, pilot.episodes)
    predicted = predict(design, pilot.truth, pilot.model, n_sims=n_sims)
    measured = (
        pl.concat([success_trends(_study(seed, seeds=6, noise=UNEVEN), tier="T2") for seed in studies])
        .group_by("axis")
        .agg(((pl.col("slope_hi") - pl.col("slope_lo")) / 2).mean().alias("measured"))
    )
    both = predicted.filter(pl.col("quantity") == "trend").join(measured, left_on="name", right_on="axis")
    assert both.height == 3
    return both


@pytest.mark.slow  # the pilot read: 20-45 s
def test_predicted_trend_half_widths_are_near_those_of_a_few_fresh_studies(pilot: ReadPilot) -> None:
    """The mechanism of the check above, on 20 simulations and 10 fresh 6-seed studies: each predicted trend
    half-width within 35 % of the studies' mean (0.84-1.03 of it measured). Catches a prediction for another
    design than the one asked for (2 seeds instead of 6 is a factor 1.7) or one that ignores a sweep's own noise."""
    both = trend_widths(pilot, 20, range(1, 11))
    assert ((both["half_width"] / both["measured"] - 1).abs() < 0.35).all(), both


@pytest.mark.slow  # the pilot read: 20-45 s
def test_more_seeds_buy_narrower_intervals(pilot: ReadPilot) -> None:
    few = predict(SweepDesign(DEFAULT_GRIDS, DEFAULT_CENTRE, 2, 118), pilot.truth, pilot.model, n_sims=30)
    many = predict(SweepDesign(DEFAULT_GRIDS, DEFAULT_CENTRE, 8, 118), pilot.truth, pilot.model, n_sims=30)
    assert (many["half_width"] < few["half_width"]).all()
    assert set(many["quantity"]) == {"alpha", "trend", "alpha_diff"} and many.height == 9


def test_candidates_keep_the_range_and_the_centre() -> None:
    designs = candidates(DESIGN, seeds=(2, 4))
    assert {d.seeds for d in designs} == {2, 4}
    for design in designs:
        for axis, values in design.grids.items():
            assert DEFAULT_CENTRE[axis] in values
            assert (min(values), max(values)) == (min(DEFAULT_GRIDS[axis]), max(DEFAULT_GRIDS[axis]))
            assert len(values) >= 3
    assert DESIGN.runs == 4 * 16


def test_cpu_seconds_per_run_are_fitted_to_measured_jobs(tmp_path) -> None:
    """Jobs of 2 and 4 runs whose seconds are 1.5 per run plus 0.01 per rollout: the fit recovers both."""
    (tmp_path / "benchmarks" / "train").mkdir(parents=True)
    for key, episodes in {"a": [100, 200], "b": [400, 400, 800, 50], "c": [1000, 10]}.items():
        seconds = 1.5 * len(episodes) + 0.01 * sum(episodes)
        (tmp_path / "benchmarks" / "train" / f"{key}.tsv").write_text(f"s\th:m:s\n{seconds}\t0:00:01\n")
        (tmp_path / "train" / key).mkdir(parents=True)
        pl.DataFrame({"episodes": episodes}).write_parquet(tmp_path / "train" / key / "runs.parquet")
    cost = measured_cpu_cost(tmp_path, visits=10.0)
    assert (cost.base, cost.per_rollout) == pytest.approx((1.5, 0.01))
    design = SweepDesign({"d_traj": (2, 4)}, {"d_traj": 2}, seeds=3, episodes=10)
    assert cost.of(design) == pytest.approx(3 * ((1.5 + 0.01 * 20) + (1.5 + 0.01 * 40)))
    with pytest.raises(ValueError, match="fewer than 2 measured train jobs"):
        measured_cpu_cost(tmp_path / "nothing", visits=10.0)


def test_a_larger_held_out_pool_is_priced_at_what_evaluation_measured(tmp_path) -> None:
    """Runs that measured 0.004 CPU seconds per held-out episode, 6 of them T2 a run: a design with 10
    T2 episodes a run pays 4 more per run; candidates try the pools asked for."""
    (tmp_path / "benchmarks" / "train").mkdir(parents=True)
    for key, episodes in {"a": [100, 200], "b": [400, 400, 800, 50]}.items():
        (tmp_path / "benchmarks" / "train" / f"{key}.tsv").write_text(f"s\th:m:s\n{2.0 * len(episodes)}\t0:00:01\n")
        (tmp_path / "train" / key).mkdir(parents=True)
        pl.DataFrame({"episodes": episodes, "heldout_seconds_per_episode": 0.004}).write_parquet(
            tmp_path / "train" / key / "runs.parquet"
        )
        tiers = ["T2"] * 6 + ["T0", "V"]
        pl.DataFrame({"tier": tiers * len(episodes)}).write_parquet(tmp_path / "train" / key / "episodes.parquet")
    cost = measured_cpu_cost(tmp_path, visits=10.0)
    assert (cost.per_episode, cost.episodes) == pytest.approx((0.004, 6))
    design = SweepDesign({"d_traj": (2, 4)}, {"d_traj": 2}, seeds=3, episodes=6)
    assert cost.of(replace(design, episodes=10)) - cost.of(design) == pytest.approx(3 * 2 * 4 * 0.004)
    pools = {d.episodes for d in candidates(DESIGN, seeds=(4,), pools=(0.5, 1.0, 2.0))}
    assert pools == {59, 118, 236}


def test_power_command_answers_for_the_8b_study() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "axisrl.cli", "power", "config/studies/qwen3-8b.yaml", "--sims", "20"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert "gpu-hours" in done.stdout and "| alpha_diff | d_env - d_task" in done.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "axisrl.cli", "power", "config/studies/qwen3-8b.yaml", "--target", "slope=1"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert bad.returncode == 2 and "expected QUANTITY=HALF_WIDTH" in bad.stderr


def test_kappa_intervals_narrow_with_quieter_runs() -> None:
    """Kappa at r = 1 of the three representative methods: quieter runs (no seed spread, more
    episodes) give narrower and more often bounded intervals than the default study's noise."""
    from axisrl.config import load_config
    from axisrl.planner import predict_kappa, stated_truth

    study = load_config(ROOT / "config" / "config.yaml", schema_path=ROOT / "config" / "schema.yaml")["study"]
    truth = stated_truth(SweepDesign(DEFAULT_GRIDS, DEFAULT_CENTRE, 4, 118))
    noisy = predict_kappa(study, truth, NOISE, 118, n_sims=12, n_boot=60)
    quiet = predict_kappa(study, truth, NoiseModel(), 4000, n_sims=12, n_boot=60)
    assert noisy["source"].to_list() == quiet["source"].to_list() == ["awm", "autoplay", "swirl"]
    assert (quiet["half_width"] < noisy["half_width"]).all()
    assert (quiet["p_bounded"] >= noisy["p_bounded"]).all() and quiet["p_bounded"].min() == 1.0


@pytest.mark.slow  # simulated studies: 20-70 s each
def test_the_power_table_of_a_study_with_mixtures() -> None:
    """The ``power`` target's frame: the nine headline rows, then kappa at r = 1 of the three
    representative methods, in one schema."""
    from axisrl.config import load_config
    from axisrl.planner import POWER_SCHEMA, power_table

    study = load_config(ROOT / "config" / "config.yaml", schema_path=ROOT / "config" / "schema.yaml")["study"]
    t2 = noise_frame(_study(0), ["T2"], take_off=0.1)
    frame = power_table(pl.concat([t2, t2.with_columns(tier=pl.lit("V"))]), study, 0.1, n_sims=8, kappa_sims=4)
    assert frame.schema == pl.Schema(POWER_SCHEMA)
    assert frame["quantity"].to_list() == ["alpha"] * 3 + ["trend"] * 3 + ["alpha_diff"] * 3 + ["kappa_r1"] * 3
    assert (frame["status"] == "ok").all() and frame["half_width"].head(9).is_not_null().all()
    assert frame.filter(pl.col("quantity") == "kappa_r1")["p_bounded"].is_not_null().all()
    # the noise is read off the validation tier, never off T2 (the test set) alone
    assert power_table(t2, study, 0.1, n_sims=8, kappa_sims=4)["status"].to_list() == ["not_run"]
    without = {
        **study,
        "families": {**study["families"], "mixtures": {**study["families"]["mixtures"], "enabled": False}},
    }
    frame = power_table(pl.concat([t2, t2.with_columns(tier=pl.lit("V"))]), without, 0.1, n_sims=8)
    assert (
        frame.schema == pl.Schema(POWER_SCHEMA)
        and frame["quantity"].to_list() == ["alpha"] * 3 + ["trend"] * 3 + ["alpha_diff"] * 3
    )
    assert frame["p_bounded"].is_null().all()


def test_a_noise_frame_point_at_0_success_has_a_finite_line_and_no_numpy_warning() -> None:
    """A sweep point whose seeds all scored 0 (``log(0)`` in ``_sweep_line`` warned and gave an
    infinite ``ln L`` before): clipped as the fits clip it, with its binomial variance there; the
    other points are as they were. Run with numpy warnings as errors."""
    sweep = pl.DataFrame(
        {
            "x": [1.0, 2.0, 4.0, 8.0],
            "n_seeds": [4, 4, 4, 4],
            "successes": [0, 12, 30, 52],
            "trials": [400, 400, 400, 400],
            "between_seed_var": [0.0, 0.002, 0.004, 0.005],
            "binomial_var": [0.0, 0.0029, 0.0066, 0.0113],
        }
    ).with_columns(p=pl.col("successes") / pl.col("trials"))
    with np.errstate(all="raise"):
        line = planner.model._sweep_line(sweep)
        kept = planner.model._offsets_kept([line])
    clipped = 0.5 / 400
    assert line.log_loss[0] == pytest.approx(np.log(-np.log(clipped)))
    assert line.variance[0] == pytest.approx(clipped * (1 - clipped) / 400 / (clipped * np.log(clipped)) ** 2)
    p = sweep["p"].to_numpy()[1:]
    np.testing.assert_array_equal(line.log_loss[1:], np.log(-np.log(p)))
    np.testing.assert_allclose(line.variance[1:], sweep["between_seed_var"][1:] / 4 / (p * np.log(p)) ** 2)
    assert np.isfinite(line.line).all() and np.isfinite(line.variance).all() and 0 <= kept <= 1
