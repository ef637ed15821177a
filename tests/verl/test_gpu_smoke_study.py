"""The ten-minute GPU check's study, run whole on CPU: Snakemake runs config/studies/gpu-smoke.yaml on the tiny
model ``axisrl model tiny`` writes, every job as on a GPU machine but for two: the scripted ``main_ppo``
(tests/verl/scripted_main_ppo.py, named by ``AXISRL_MAIN_PPO``) stands in for verl's trainer, and the
evaluate jobs play the held-out pool with the transformers engine on the CPU (``evaluate.backend: hf``, an
overlay that moves no train key) instead of vLLM. Everything else is real: the train jobs' launcher (their
exported data, the agent-loop config, verl's own validation of every override, the prompt-length check),
verl's model merger, collect, the laws, every table and figure, ``snakemake --report`` and
bench/gpu_smoke_summary.py. A recorder in front of the stand-in keeps the override list each train job
handed the trainer: the command line a GPU node runs, but for its first words."""

from __future__ import annotations

import json
import subprocess
import sys
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

from axisrl.backends.verl.config import RunLayout, validate_overrides  # noqa: E402
from axisrl.backends.verl.launch import MAIN_PPO, main_ppo_command  # noqa: E402
from axisrl.config import load_config, load_yaml  # noqa: E402
from axisrl.stages import study  # noqa: E402
from axisrl.targets import study_targets  # noqa: E402
from conftest import ROOT, copy_workflow, snakemake  # noqa: E402

pytestmark = pytest.mark.slow  # the whole study: about five minutes on two loaded cores

STAND_IN = Path(__file__).with_name("scripted_main_ppo.py")
RECORDER = f"""\
import json, os, runpy, sys
from pathlib import Path

record = Path(os.environ["GPU_SMOKE_RECORD"])
record.mkdir(exist_ok=True)
(record / f"{{os.getpid()}}.json").write_text(json.dumps(sys.argv[1:]))
sys.argv = [{str(STAND_IN)!r}, *sys.argv[1:]]
runpy.run_path(sys.argv[0], run_name="__main__")
"""
"""Keeps the overrides a train job hands the trainer, then runs the scripted ``main_ppo`` with them."""
CPU = {"evaluate": {"backend": "hf", "hf": {"device": "cpu", "dtype": "float32", "max_tokens": 8}}}
"""The CPU's evaluation: transformers instead of vLLM, eight tokens a turn (evaluate keys only)."""
CONFIG = ("--configfile", "config/studies/gpu-smoke.yaml", "cpu.yaml")
UPDATES = 3


@pytest.fixture(scope="module")
def smoke(tmp_path_factory) -> Path:
    """The study run once: the workflow copy, with the run's log and the recorded overrides beside it."""
    workdir = copy_workflow(tmp_path_factory.mktemp("gpu-smoke"))
    written = [sys.executable, "-m", "axisrl.cli", "model", "tiny", "models/tiny-qwen2"]  # the preset's model
    done = subprocess.run(written, cwd=workdir, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    (workdir / "cpu.yaml").write_text(yaml.safe_dump(CPU))
    (workdir / "recorder.py").write_text(RECORDER)
    env = {
        MAIN_PPO: str(workdir / "recorder.py"),
        "GPU_SMOKE_RECORD": str(workdir / "overrides"),
        "HF_HUB_OFFLINE": "1",
    }
    run = snakemake(workdir, "--cores", "2", "--resources", "gpu=1", *CONFIG, env=env)
    out = workdir / "out"
    out.mkdir()
    (out / "snakemake.log").write_text(run.stdout + run.stderr)
    snakemake(workdir, "--report", "report.html", *CONFIG)
    return workdir


def jobs_of(workdir: Path):
    schema = load_yaml(workdir / "config" / "schema.yaml")
    files = [workdir / "config" / "studies" / "gpu-smoke.yaml", workdir / "cpu.yaml"]
    config = load_config(workdir / "config" / "config.yaml", *files, schema_path=workdir / "config" / "schema.yaml")
    return config, study(config, schema)


def test_every_job_of_the_study_ran_and_the_report_was_made(smoke):
    log = (smoke / "out" / "snakemake.log").read_text()
    stats = log.split("Job stats:")[1].strip().split("\n\n")[0].splitlines()[2:]
    ran = {row.split()[0]: int(row.split()[1]) for row in stats if not row.startswith("total")}
    assert {ran["train"], ran["evaluate"]} == {2}
    assert set(ran) >= {"synthesize", "dedup", "plan", "collect", "laws", "catalog", *study_targets(recipe=False)}
    assert (smoke / "report.html").stat().st_size > 0
    config, jobs = jobs_of(smoke)
    runs = pl.read_parquet(smoke / "results" / "collect" / jobs.specs["collect"].key / "runs.parquet")
    assert runs.select("d_env", "status", "updates").sort("d_env").rows() == [(1, "ok", UPDATES), (2, "ok", UPDATES)]
    assert runs["n_T2"].to_list() == [4, 4]  # every held-out T2 episode played
    table2 = next((smoke / "results" / "studies").glob("*/tables/table2.md")).read_text()
    assert "too_few_points" in table2  # two points fit no law, and say so


def test_each_train_job_handed_the_trainer_overrides_that_verl_validates(smoke, monkeypatch):
    config, jobs = jobs_of(smoke)
    recorded = [json.loads(path.read_text()) for path in sorted((smoke / "overrides").glob("*.json"))]
    assert len(recorded) == 2  # one start of main_ppo per train job: no retry
    llm = config["train"]["llm"]
    monkeypatch.chdir(smoke)  # the paths are the workflow's, relative to its directory
    monkeypatch.delenv(MAIN_PPO, raising=False)
    for override_list in recorded:
        cfg = validate_overrides(override_list)
        rollout = cfg.actor_rollout_ref.rollout
        assert cfg.actor_rollout_ref.model.path == llm["model"] == "models/tiny-qwen2"
        assert (rollout.name, rollout.n, cfg.data.train_batch_size) == ("vllm", 2, 2)
        assert (cfg.trainer.total_training_steps, cfg.trainer.save_freq, cfg.trainer.max_actor_ckpt_to_keep) == (
            UPDATES,
            1,
            2,
        )
        assert (cfg.trainer.resume_mode, cfg.trainer.n_gpus_per_node, cfg.ray_kwargs.ray_init.num_cpus) == (
            "auto",
            1,
            8,
        )
        assert (cfg.data.max_prompt_length, cfg.data.max_response_length) == (12288, 2048)
        assert rollout.multi_turn.max_assistant_turns == llm["max_turns"]
        assert main_ppo_command(override_list) == [sys.executable, "-m", "verl.trainer.main_ppo", *override_list]
    experiments = {dict(item.split("=", 1) for item in o)["trainer.experiment_name"] for o in recorded}
    assert experiments == {run for point in jobs.points.values() for run in point.run_keys}


def test_each_run_saved_a_checkpoint_every_update_and_its_merged_model_loads(smoke):
    from transformers import AutoModelForCausalLM

    _, jobs = jobs_of(smoke)
    for point in jobs.points.values():
        folder = smoke / "results" / "train" / point.train.key / "seed0"
        layout = RunLayout(folder / "verl")
        assert [attempt.attempt for attempt in layout.attempts()] == [1]
        steps = [json.loads(line)["step"] for line in layout.attempts()[0].metrics_log.read_text().splitlines()]
        assert steps == [0, 1, 2, 3]  # the validation before training, then every update
        kept = sorted(path.name for path in layout.checkpoints.glob("global_step_*"))
        assert kept == ["global_step_2", "global_step_3"]  # saved after every update, the newest two kept
        assert (layout.checkpoints / "latest_checkpointed_iteration.txt").read_text() == str(UPDATES)
        model = AutoModelForCausalLM.from_pretrained(folder / "model")  # verl's merger wrote it
        assert model.config.num_hidden_layers == 2


def test_the_summary_reads_what_the_study_did(smoke):
    (smoke / "out" / "gpu_memory.csv").write_text("")  # no GPU to sample here
    summary = ROOT / "bench" / "gpu_smoke_summary.py"
    done = subprocess.run(
        [sys.executable, str(summary), "--out", "out", "--status", "0", "--wall", "300", "--limit", "600"]
        + ["--configfile", "config/studies/gpu-smoke.yaml", "--config", "evaluate=" + json.dumps(CPU["evaluate"])],
        cwd=smoke,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"model: {smoke / 'models' / 'tiny-qwen2'} (Qwen2ForCausalLM, 2 layers")
    assert sum(line.startswith("train ") for line in lines) == 2
    assert sum(line.startswith("  3  1  ") for line in lines) == 2  # step 3 of each run: the stand-in's 1 s
    assert lines.count("  attempts 1; checkpoints kept: global_step_2, global_step_3") == 2
    assert sum("10 held-out episodes" in line for line in lines if line.startswith("evaluate ")) == 2
    assert lines[-1].startswith("PASS: every job ran")
