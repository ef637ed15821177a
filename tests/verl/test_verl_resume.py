"""verl backend, resume: the checkpoint and resume overrides through verl's own config, the launcher
on verl's checkpoint layout and two attempts' logs, and a train job killed twice and rerun against
a scripted ``main_ppo`` (tests/verl/scripted_main_ppo.py; only ``main_ppo`` needs a GPU)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import polars as pl
import pytest

# verl.trainer, not verl: with tests/ on sys.path this folder is itself importable as a namespace package "verl"
pytest.importorskip(
    "verl.trainer",
    reason="verl is not installed here; run bash tests/verl/setup_venv.sh and "
    "use .venv-verl/bin/python -m pytest tests/verl",
)

import torch  # noqa: E402
from verl.utils.checkpoint.checkpoint_manager import find_latest_ckpt_path  # noqa: E402
from verl.utils.tracking import FileLogger  # noqa: E402

from axisrl.backends.verl.config import RunLayout, overrides, validate_overrides  # noqa: E402
from axisrl.backends.verl.episode import append_episode_record  # noqa: E402
from axisrl.backends.verl.launch import (  # noqa: E402
    RunIncomplete,
    complete_checkpoints,
    keep_newest_checkpoints,
    latest_checkpoint,
    launch_env,
    read_metrics,
    train,
)
from axisrl.backends.verl.tiny_model import write_tiny_model  # noqa: E402
from verl_support import small_pool, tiny_job, train_settings  # noqa: E402

STAND_IN = Path(__file__).with_name("scripted_main_ppo.py")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return write_tiny_model(tmp_path_factory.mktemp("model"))


@pytest.mark.filterwarnings("ignore:Disabled critic")
@pytest.mark.parametrize("algo", ["grpo", "ppo"])
def test_resume_overrides_pass_verl_validation(schema, model_dir, tmp_path, algo):
    run = tiny_job(model_dir, tmp_path, save_every=25, keep_checkpoints=3)
    run.layout.agent_loop_config.write_text("[]")  # no agent loop to import: only the trainer keys matter here
    cfg = validate_overrides(overrides(train_settings(schema, algo), run))
    trainer = cfg.trainer
    assert (trainer.save_freq, trainer.resume_mode) == (25, "auto")
    assert (trainer.max_actor_ckpt_to_keep, trainer.max_critic_ckpt_to_keep) == (3, 3)
    assert trainer.default_local_dir == str(run.layout.checkpoints) and trainer.resume_from_path is None


def log_attempt(attempt: RunLayout, steps: range, resumed_from: int) -> None:
    """One attempt's files as verl writes them: the file logger (through verl's own class, at the
    path the launcher gives it) and the agent loop's episode records; scores say which attempt."""
    attempt.episode_dir.mkdir(parents=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("VERL_FILE_LOGGER_PATH", launch_env(attempt)["VERL_FILE_LOGGER_PATH"])
        logger = FileLogger("axisrl", "run")
    logger.log({"val-core/toolworld/acc/mean@1": 0.0}, step=resumed_from)
    for step in steps:
        record = {"global_steps": step, "uid": f"u{step}", "split": "train", "success": True, "env_steps": 2}
        record |= {"subgoals_met": 1, "subgoals_total": 1, "finished": True, "num_turns": 3, "turns": 1}
        record |= {"tool_calls": 1, "parse_failures": 0, "truncated": False}
        for _ in range(attempt.attempt):  # attempt k plays k trajectories a step
            append_episode_record(attempt.episode_dir, record)
        logger.log({"training/global_step": step, "critic/score/mean": 10.0 * attempt.attempt + step}, step=step)
    logger.finish()


def save_checkpoint(layout: RunLayout, step: int, *, complete: bool = True) -> None:
    """verl's ``global_step_<N>`` folder: the actor, then ``data.pt``, then the tracker; a
    checkpoint cut short by a kill has the actor only."""
    folder = layout.checkpoints / f"global_step_{step}"
    (folder / "actor").mkdir(parents=True)
    if complete:
        torch.save({}, folder / "data.pt")
        (layout.checkpoints / "latest_checkpointed_iteration.txt").write_text(str(step))


def test_launcher_resumes_from_the_newest_complete_checkpoint_and_merges_both_attempts(tmp_path):
    layout = RunLayout(tmp_path)
    first = layout.next_attempt()
    for step in (2, 4):
        save_checkpoint(layout, step)
    save_checkpoint(layout, 6, complete=False)  # the kill came while step 6 was being saved
    log_attempt(first, range(1, 6), resumed_from=0)
    with first.metrics_log.open("ab") as cut:
        cut.write(b'{"step": 6, "da')  # a line the kill cut short
    assert (complete_checkpoints(layout), latest_checkpoint(layout)) == (
        [2, 4],
        layout.checkpoints / "global_step_4" / "actor",
    )

    assert keep_newest_checkpoints(layout, 2) == 4
    assert sorted(path.name for path in layout.checkpoints.glob("global_step_*")) == ["global_step_2", "global_step_4"]
    assert find_latest_ckpt_path(str(layout.checkpoints)) == str(layout.checkpoints / "global_step_4")  # verl's own

    second = layout.next_attempt()
    assert second.attempt == 2 and second.metrics_log != first.metrics_log
    log_attempt(second, range(5, 8), resumed_from=4)
    save_checkpoint(layout, 6)
    rows = read_metrics(layout, "grpo", "sparse", "toolworld")
    assert [row["update"] for row in rows] == list(range(7))  # each step once
    assert [row["reward_mean"] for row in rows] == [11, 12, 13, 14, 25, 26, 27]  # steps 5+ from attempt 2
    assert [row["episodes"] for row in rows] == [1, 1, 1, 1, 2, 2, 2]  # and their episode records
    assert first.metrics_log.exists() and first.episode_dir.exists()  # what attempt 1 wrote is kept

    assert keep_newest_checkpoints(layout, 2) == 6
    assert sorted(path.name for path in layout.checkpoints.glob("global_step_*")) == ["global_step_4", "global_step_6"]


def test_a_tracker_pointing_at_a_pruned_checkpoint_is_moved_to_the_newest_complete_one(tmp_path):
    layout = RunLayout(tmp_path)
    save_checkpoint(layout, 3)
    save_checkpoint(layout, 6)
    (layout.checkpoints / "global_step_6" / "data.pt").unlink()  # as if verl's pruning had reached it
    assert keep_newest_checkpoints(layout, 2) == 3
    assert (layout.checkpoints / "latest_checkpointed_iteration.txt").read_text() == "3"
    assert not (layout.checkpoints / "global_step_6").exists()
    save_checkpoint(layout, 9)
    (layout.checkpoints / "latest_checkpointed_iteration.txt").write_text("")  # the kill came as verl wrote it
    assert keep_newest_checkpoints(layout, 1) == 9 and not (layout.checkpoints / "global_step_3").exists()
    (layout.checkpoints / "global_step_9" / "data.pt").unlink()
    assert keep_newest_checkpoints(layout, 2) == 0 and latest_checkpoint(layout) is None
    assert find_latest_ckpt_path(str(layout.checkpoints)) is None  # verl starts afresh


def first_step(attempt: RunLayout) -> int:
    """The first training step an attempt's file logger logged."""
    entries = [json.loads(line)["data"] for line in attempt.metrics_log.read_text().splitlines()]
    return min(data["training/global_step"] for data in entries if "training/global_step" in data)


def stand_in(override_list) -> list[str]:
    return [sys.executable, str(STAND_IN), *override_list]


def test_a_train_job_killed_twice_finishes_from_its_checkpoints_like_an_uninterrupted_run(
    schema, model_dir, tmp_path, monkeypatch
):
    """The stand-in SIGKILLs itself once mid-save and once after a step; each rerun of the job
    resumes from the newest complete checkpoint, and the result equals an uninterrupted run's."""
    pool = small_pool(schema)
    frames = [pl.DataFrame(getattr(pool, name)) for name in ("envs", "tasks", "heldout_envs", "heldout_tasks")]
    data = ((frames[0], frames[1]), (frames[2], frames[3]), "toolworld")
    settings = train_settings(schema, "grpo") | {"updates": 10}
    options = {"save_every": 3, "keep_checkpoints": 2}

    uninterrupted = train(settings, tiny_job(model_dir, tmp_path / "once", **options), *data, command=stand_in)

    resumed = tiny_job(model_dir, tmp_path / "killed", **options)
    monkeypatch.setenv("SCRIPTED_MAIN_PPO_KILL", "in_save:6")
    with pytest.raises(RunIncomplete, match="exited with -9; the newest complete checkpoint is step 3 of 10"):
        train(settings, resumed, *data, command=stand_in)
    assert [row["update"] for row in read_metrics(resumed.layout, "grpo", "sparse", "toolworld")] == list(range(5))
    monkeypatch.setenv("SCRIPTED_MAIN_PPO_KILL", "after_step:8")
    with pytest.raises(RunIncomplete, match="resumed from step 3\\) exited with -9; .* is step 6 of 10"):
        train(settings, resumed, *data, command=stand_in)
    monkeypatch.delenv("SCRIPTED_MAIN_PPO_KILL")
    result = train(settings, resumed, *data, command=stand_in)

    assert len(uninterrupted.metrics) == 10 and [row["update"] for row in result.metrics] == list(range(10))
    assert result.metrics == uninterrupted.metrics
    assert len({row["reward_mean"] for row in result.metrics}) > 5  # the model's state moves step by step
    assert result.checkpoint == resumed.layout.checkpoints / "global_step_10" / "actor"
    first_steps = [first_step(attempt) for attempt in resumed.layout.attempts()]
    assert first_steps == [1, 4, 7]  # each rerun resumed after its newest complete checkpoint (3, then 6)
    kept = sorted(path.name for path in resumed.layout.checkpoints.glob("global_step_*"))
    assert kept == ["global_step_10", "global_step_9"]
    model = json.loads((result.checkpoint / "model.json").read_text())
    assert model == json.loads((uninterrupted.checkpoint / "model.json").read_text())

    def never(override_list):
        raise AssertionError("a finished run is not started again")

    assert train(settings, resumed, *data, command=never).metrics == uninterrupted.metrics
