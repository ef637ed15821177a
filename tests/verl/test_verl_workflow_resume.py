"""verl backend, resume through the real workflow: Snakemake runs a tiny verl study's train job with
the scripted ``main_ppo`` (tests/verl/scripted_main_ppo.py, named by ``AXISRL_MAIN_PPO``), the
stand-in kills itself twice so two invocations fail, and the third finishes the run from its
checkpoints: the real ``verl.model_merger`` merges its last actor checkpoint, and its metrics equal an
uninterrupted run's (another copy of the workflow) step for step."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pytest
import yaml

# verl.trainer, not verl: with tests/ on sys.path this folder is itself importable as a namespace package "verl"
pytest.importorskip(
    "verl.trainer",
    reason="verl is not installed here; run bash tests/verl/setup_venv.sh and "
    "use .venv-verl/bin/python -m pytest tests/verl",
)

from axisrl.backends.verl.config import RunLayout  # noqa: E402
from axisrl.backends.verl.launch import MAIN_PPO  # noqa: E402
from axisrl.backends.verl.tiny_model import write_tiny_model  # noqa: E402
from conftest import copy_workflow, snakemake  # noqa: E402

STAND_IN = Path(__file__).with_name("scripted_main_ppo.py")
UPDATES = 10


def first_step(attempt: RunLayout) -> int:
    """The first training step an attempt's file logger logged."""
    entries = [json.loads(line)["data"] for line in attempt.metrics_log.read_text().splitlines()]
    return min(data["training/global_step"] for data in entries if "training/global_step" in data)


def study(model: Path) -> dict:
    """An overlay on the smoke study: verl training of the tiny model on the smallest axis sweeps
    (four train jobs; the test runs one), a checkpoint every 3 updates, and resources a
    two-core machine holds."""
    return {
        "study": {
            "seeds": [0],
            "centre": {"d_env": 2, "d_task": 4, "d_traj": 2},
            "grids": {"d_env": [1, 2], "d_task": [2, 4], "d_traj": [2, 4]},
            "family_points": None,
            "families": {
                "axis_sweeps": {"enabled": True, "extra_seeds": []},
                "pool_construction": {"enabled": False},
                "algorithms": {"enabled": False},
                "base_strength": {"enabled": False},  # tiny-only: a verl study's base is its model
            },
        },
        "train": {
            "backend": "verl",
            "updates": UPDATES,
            "visits_per_update": 2,
            "episodes_per_update": 4,
            "llm": {"model": str(model), "max_prompt_length": 16384, "save_every": 3, "keep_checkpoints": 2},
        },
        "evaluate": {"backend": "hf"},  # not run: the test targets the train job's outputs
        "resources": {
            "train": {"gpus": 1, "cpus": 2, "mem_mb": 1000, "runtime": 10},
            "evaluate": {"gpus": 1, "cpus": 1, "mem_mb": 1000, "runtime": 10},
        },
    }


def workflow(folder: Path, model: Path) -> Path:
    folder.mkdir()
    copy_workflow(folder)
    (folder / "verl.yaml").write_text(yaml.safe_dump(study(model)))
    return folder


CONFIG = ("--configfile", "config/studies/smoke.yaml", "verl.yaml")


def train_job(workdir: Path) -> str:
    """The first (by key) train job's metrics path, from a dry run."""
    done = snakemake(workdir, "-n", "--cores", "2", *CONFIG, "--until", "train")
    return sorted(set(re.findall(r"results/train/\w+/seed0/metrics\.parquet", done.stdout)))[0]


def run(workdir: Path, target: str, kill: str = "", check: bool = True):
    # --resources gpu=1: a local run that grants the job its GPU request
    env = {MAIN_PPO: str(STAND_IN), "SCRIPTED_MAIN_PPO_KILL": kill}
    return snakemake(workdir, target, "--cores", "2", "--resources", "gpu=1", *CONFIG, env=env, check=check)


@pytest.mark.slow
def test_a_workflow_train_job_killed_twice_finishes_like_an_uninterrupted_run(tmp_path):
    model = write_tiny_model(tmp_path / "model")
    once, killed = workflow(tmp_path / "once", model), workflow(tmp_path / "killed", model)
    target = train_job(once)
    assert train_job(killed) == target
    run(once, target)

    verl_dir = killed / Path(target).parent / "verl"
    for kill, newest in (("in_save:6", 3), ("after_step:8", 6)):
        failed = run(killed, target, kill, check=False)
        assert failed.returncode != 0, failed.stdout
        assert not (killed / target).exists()  # a job that died leaves no outputs
        assert f"the newest complete checkpoint is step {newest} of {UPDATES}" in (
            failed.stdout + failed.stderr + "".join(p.read_text() for p in (killed / "results" / "logs").rglob("*.log"))
        )
        assert (verl_dir / "checkpoints" / f"global_step_{newest}").is_dir()  # kept for the rerun
    run(killed, target)

    first, second = (pl.read_parquet(root / target) for root in (once, killed))
    assert first["update"].to_list() == list(range(UPDATES))
    assert first.equals(second)  # step for step
    assert first["reward_mean"].n_unique() > 5  # the scripted model's state moves step by step
    runs = [pl.read_parquet(root / target.replace("metrics", "runs")) for root in (once, killed)]
    assert runs[0].equals(runs[1]) and runs[1]["updates"].to_list() == [UPDATES]
    first_steps = [first_step(attempt) for attempt in RunLayout(verl_dir).attempts()]
    assert first_steps == [1, 4, 7]  # each rerun resumed after its newest complete checkpoint (3, then 6)

    # the real verl.model_merger merged the last checkpoint: a Hugging Face directory whose norm
    # holds the scripted model's final number
    from safetensors.torch import load_file

    final = json.loads((verl_dir / "checkpoints" / f"global_step_{UPDATES}" / "actor" / "model.json").read_text())
    merged = [load_file(root / Path(target).parent / "model" / "model.safetensors") for root in (once, killed)]
    assert merged[0]["model.norm.weight"].float().allclose(merged[1]["model.norm.weight"].float())
    assert abs(merged[1]["model.norm.weight"].float()[0].item() - final["weight"]) < 1e-2
    assert (killed / Path(target).parent / "model" / "tokenizer_config.json").exists()
