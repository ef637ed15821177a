"""A tiny train job's learning curves on V: where they are read, what their points are, and that
their ends are the run's own numbers (``axisrl.stages.learning_curves``)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from test_tiny_train import POOL as TRAIN_POOL

from axisrl.backends import tiny
from axisrl.config import validate_config
from axisrl.domains import toolworld as tw
from axisrl.stages.learning_curves import CURVE_COLUMNS, curve_updates, curves

POOL = {**TRAIN_POOL, "heldout": {**TRAIN_POOL["heldout"], "validation_worlds": 2}}
"""The tiny-backend tests' pool, with a validation tier to draw curves on."""
SETTINGS = tiny.TrainSettings.from_dict({"updates": 5, "visits_per_update": 4, "d_traj": 4, "width": 16})

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def pool(schema) -> tw.Pool:
    return tw.generate_pool(validate_config({"synthesize": POOL}, schema)["synthesize"])


def test_a_curve_is_read_at_the_start_and_every_fraction_of_the_updates():
    assert curve_updates(40, 10) == [0, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40]
    assert curve_updates(4, 10) == [0, 1, 2, 3, 4]  # fewer updates than points: each update once
    assert curve_updates(5, 2) == [0, 2, 5]


def test_a_subset_of_the_starts_plays_each_task_as_the_whole_pool_does(pool):
    policy = tiny.policy_of(tiny.checkpoint(tiny.train(pool.envs, pool.tasks, SETTINGS, seed=0)))
    starts = tiny.HeldoutStarts(pool.heldout_envs, pool.heldout_tasks, seed=0, leak_primitive_role=False)
    whole = tiny.evaluate(policy, pool.heldout_envs, pool.heldout_tasks, seed=0, starts=starts)
    keep = [k for k, task in enumerate(pool.heldout_tasks) if task["tier"] == "V"]
    part = tiny.evaluate(
        policy, pool.heldout_envs, [pool.heldout_tasks[k] for k in keep], seed=0, starts=starts.subset(keep)
    )
    assert len(keep) > 1 and part == [whole[k] for k in keep]
    with pytest.raises(ValueError, match="other tasks"):  # the subset's starts are not the whole pool's
        tiny.evaluate(policy, pool.heldout_envs, pool.heldout_tasks, seed=0, starts=starts.subset(keep))


def test_a_curve_starts_at_the_base_ends_at_the_run_and_counts_what_the_run_spent(pool):
    base = tiny.train(pool.envs, pool.tasks, SETTINGS, seed=7).state
    wanted = curve_updates(SETTINGS.updates, 2)
    results = tiny.train_seeds(pool.envs, pool.tasks, SETTINGS, [0, 1], init=base, snapshots=wanted)
    starts = tiny.HeldoutStarts(pool.heldout_envs, pool.heldout_tasks, seed=0, leak_primitive_role=False)
    policies = [tiny.policy_of(tiny.checkpoint(result)) for result in results]
    evaluated = [tiny.evaluate(policy, pool.heldout_envs, pool.heldout_tasks, 0, starts=starts) for policy in policies]
    frame, seconds = curves(
        results, ["a", "b"], [0, 1], evaluated, starts, pool.heldout_envs, pool.heldout_tasks, 0, 0.25, "toolworld"
    )
    assert frame.schema == pl.Schema(CURVE_COLUMNS) and seconds > 0
    assert frame["update"].to_list() == wanted * 2
    v = [task for task in pool.heldout_tasks if task["tier"] == "V"]
    for run, result, records in zip(["a", "b"], results, evaluated):
        curve = frame.filter(pl.col("run_key") == run)
        spent = np.cumsum([0] + [row["rollout_flops"] + row["train_flops"] for row in result.metrics])
        assert curve["compute"].to_list() == [float(spent[u]) for u in wanted]
        assert curve["compute"][-1] == result.compute["rollout_flops"] + result.compute["train_flops"]
        assert curve["p_V"][0] == 0.25  # the base's own V success, as given
        assert curve["p_V"][-1] == np.mean([r["success"] for r in records if r["tier"] == "V"])
        middle = tiny.make_policy(SETTINGS)
        middle.load_state_dict(result.snapshots[wanted[1]])
        played = tiny.evaluate(middle, pool.heldout_envs, v, seed=0, starts=starts.subset(_v_rows(pool)))
        assert curve["p_V"][1] == np.mean([r["success"] for r in played])
        assert (curve["n_V"] == len(v)).all()


def test_a_run_from_random_weights_plays_its_start_and_a_failed_run_has_no_curve(pool):
    results = tiny.train_seeds(pool.envs, pool.tasks, SETTINGS, [0, 1], snapshots=curve_updates(SETTINGS.updates, 5))
    results[1].status = "failed"
    starts = tiny.HeldoutStarts(pool.heldout_envs, pool.heldout_tasks, seed=0, leak_primitive_role=False)
    evaluated = [
        tiny.evaluate(tiny.policy_of(tiny.checkpoint(r)), pool.heldout_envs, pool.heldout_tasks, 0, starts=starts)
        for r in results
    ]
    frame, _ = curves(
        results, ["a", "b"], [0, 1], evaluated, starts, pool.heldout_envs, pool.heldout_tasks, 0, None, "toolworld"
    )
    assert set(frame["run_key"]) == {"a"} and frame.height == 6 and frame["compute"][0] == 0.0
    start = tiny.make_policy(SETTINGS)
    start.load_state_dict(results[0].snapshots[0])
    v = [task for task in pool.heldout_tasks if task["tier"] == "V"]
    played = tiny.evaluate(start, pool.heldout_envs, v, seed=0, starts=starts.subset(_v_rows(pool)))
    assert frame["p_V"][0] == np.mean([r["success"] for r in played])


def _v_rows(pool: tw.Pool) -> list[int]:
    return [k for k, task in enumerate(pool.heldout_tasks) if task["tier"] == "V"]


CURVED = "learning_curves: {points: 4}\n"


@pytest.mark.slow
def test_a_study_with_curves_fits_them_and_leaves_the_study_without_them_as_it_was(smoke_study, tmp_path):
    """Issue 51: the smoke study with curves on trains its points again (their keys hold the curves),
    every run's curve runs from its base's V success to its own, the curve_fits stage and its tables
    and figure are made in the study's own folder, and the smoke study without curves has nothing to do. On a copy of
    the smoke study, whose runs it trains again with curves."""
    from test_workflow import study_dir

    from axisrl.targets import CURVE_FRAMES
    from conftest import SMOKE, copy_study, snakemake

    workdir = copy_study(smoke_study, tmp_path)
    (workdir / "curved.yaml").write_text(CURVED)
    curved = (*SMOKE, "curved.yaml")
    snakemake(workdir, "--cores", "2", *curved)

    collect = [d for d in (workdir / "results" / "collect").iterdir() if (d / "learning_curves.parquet").exists()]
    (folder,) = collect
    runs = pl.read_parquet(folder / "runs.parquet").filter(pl.col("status") == "ok")
    frame = pl.read_parquet(folder / "learning_curves.parquet")
    assert set(frame["run_key"]) == set(runs["run_key"]) and (runs["curve_seconds"] > 0).all()
    ends = (
        frame.sort("update")
        .group_by("run_key")
        .agg(
            points=pl.len(),
            first=pl.col("p_V").first(),
            last=pl.col("p_V").last(),
            rising=pl.col("compute").diff().min(),
        )
    )
    ends = ends.join(runs.select("run_key", "p_V", "p_V_base", "executed_compute"), on="run_key")
    assert (ends["points"] == 5).all() and (ends["rising"] > 0).all()
    assert ends["last"].to_list() == ends["p_V"].to_list()
    based = ends.filter(pl.col("p_V_base").is_not_null())
    assert based.height and based["first"].to_list() == based["p_V_base"].to_list()

    (fits,) = (workdir / "results" / "curve_fits").iterdir()
    assert {p.stem for p in fits.iterdir()} == set(CURVE_FRAMES)
    own = study_dir(workdir, *curved)
    for name in ("table2_asymptote", "table_extrapolation"):
        assert (own / "tables" / f"{name}.md").read_text().startswith("# ")
    assert (own / "figures" / "fig_curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (study_dir(workdir, *SMOKE) / "figures" / "fig_curves.png").exists()
    assert "Nothing to be done" in snakemake(workdir, "-n", *SMOKE).stdout
