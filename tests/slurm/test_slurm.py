"""Two train jobs of the smoke study and every job before them (pool, embeddings, dedup, base) on a real
single-node Slurm (tests/slurm/cluster.sh) through the CI profile workflow/profiles/slurm-ci: where each
job ran, that the results equal a local run's, and that a cancelled train job is run again. The smoke
study's other train jobs, tables and figures are jobs of the same kinds and are left out: each Slurm job
parses the workflow again and waits for the executor's status polls, about 25 s of a loaded machine each.
Skipped only where Slurm cannot be set up (not root, or no apt-get to install it); the cluster is started
once for the module and stopped by PID afterwards.
By hand: tests/slurm/cluster.sh up; eval "$(tests/slurm/cluster.sh env)"; snakemake --profile
workflow/profiles/slurm-ci --configfile config/studies/smoke.yaml; tests/slurm/cluster.sh down."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest

from conftest import SMOKE, copy_workflow, snakemake

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.xdist_group("slurm")]  # one cluster, one worker

CLUSTER = Path(__file__).with_name("cluster.sh")
CANNOT_SET_UP = 77
"""cluster.sh's exit status where Slurm is missing and cannot be installed."""
PROFILE = ("--profile", "workflow/profiles/slurm-ci")
TRAIN_JOBS = 2
"""Train jobs of the smoke study that go through Slurm (two: one GPU must run them one after the other)."""
SUBMITTED = re.compile(r"has been submitted with SLURM jobid (\d+) \(log: \S*/slurm_logs/rule_([^/]+)/")


def wall_time(column: str) -> bool:
    """Columns measured in wall time (per-call seconds, utilization): they differ between any two runs."""
    return "seconds" in column or column == "utilization"


def slurm(*args: str) -> str:
    done = subprocess.run(args, capture_output=True, text=True)
    assert done.returncode == 0, f"{' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def slurm_jobs() -> dict[str, dict[str, str]]:
    """Every job slurmctld still knows (MinJobAge keeps finished ones an hour), as scontrol's fields."""
    jobs = {}
    for line in slurm("scontrol", "-o", "show", "job").splitlines():
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        if "JobId" in fields:
            jobs[fields["JobId"]] = fields
    return jobs


def submitted(output: str) -> list[tuple[str, str]]:
    """(Slurm job id, rule) for each submission Snakemake reported, in order."""
    return SUBMITTED.findall(output)


def job_stats(output: str) -> dict[str, int]:
    """Snakemake's first 'Job stats' table: jobs per rule."""
    table = output.split("Job stats:")[1].split("total")[0]
    return {rule: int(count) for rule, count in re.findall(r"^(\w+)\s+(\d+)$", table, flags=re.M)}


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for sock in sockets:
        sock.bind(("127.0.0.1", 0))
    ports = [sock.getsockname()[1] for sock in sockets]
    for sock in sockets:
        sock.close()
    return ports


@pytest.fixture(scope="module")
def cluster(request):
    """A cluster of cluster.sh of this test run's own (folder, ports), so that two test runs on one
    machine do not stop each other's; SLURM_CONF and PATH (its srun shim) are set for every Snakemake
    run. The folder is in /tmp, not under pytest's tmp (0700: the munge user could not reach its
    socket), and is removed at the end unless a test failed: then its logs are kept there."""
    state = Path(tempfile.mkdtemp(prefix="axisrl-slurm-", dir="/tmp"))
    ctld_port, slurmd_port = free_ports(2)
    env = {
        **os.environ,
        "SLURM_CI_DIR": str(state),
        "SLURM_CI_CTLD_PORT": str(ctld_port),
        "SLURM_CI_SLURMD_PORT": str(slurmd_port),
    }

    def cluster_sh(command: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", str(CLUSTER), command], env=env, capture_output=True, text=True)

    up = cluster_sh("up")
    if up.returncode == CANNOT_SET_UP:
        shutil.rmtree(state, ignore_errors=True)
        pytest.skip(f"no Slurm here: {up.stdout.strip().splitlines()[-1]}")
    failed_before = request.session.testsfailed
    try:
        assert up.returncode == 0, f"cluster.sh up failed (logs in {state}):\n{up.stdout}\n{up.stderr}"
        exports = dict(re.findall(r"^export (\w+)=(\S+)$", cluster_sh("env").stdout, flags=re.M))
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("SLURM_CONF", exports["SLURM_CONF"])
            patch.setenv("PATH", exports["PATH"].replace("$PATH", os.environ["PATH"]))
            yield
    finally:
        down = cluster_sh("down")
        assert down.returncode == 0, f"cluster.sh down failed (logs in {state}):\n{down.stdout}\n{down.stderr}"
        if request.session.testsfailed == failed_before and up.returncode == 0:
            shutil.rmtree(state, ignore_errors=True)


@dataclass
class SlurmRun:
    workdir: Path
    output: str
    jobs: list[tuple[str, dict[str, str]]]
    """(rule, scontrol fields) for each Slurm job of the run."""


@pytest.fixture(scope="module")
def local_run(cluster, smoke_study) -> Path:
    """The same study with the local executor: the session's shared smoke study (it asks for the cluster
    only so that it is skipped along with the Slurm tests)."""
    return smoke_study


@pytest.fixture(scope="module")
def targets(local_run) -> tuple[str, ...]:
    """The runs files of the smoke study's first ``TRAIN_JOBS`` train jobs (by key)."""
    keys = sorted(path.name for path in (local_run / "results" / "train").iterdir())[:TRAIN_JOBS]
    return tuple(f"results/train/{key}/runs.parquet" for key in keys)


@pytest.fixture(scope="module")
def slurm_run(cluster, targets, tmp_path_factory) -> SlurmRun:
    """The ``targets`` and their upstream jobs through the CI profile; its Slurm jobs as slurmctld recorded them."""
    workdir = copy_workflow(tmp_path_factory.mktemp("slurm"))
    done = snakemake(workdir, *targets, *PROFILE, *SMOKE)
    output = done.stdout + done.stderr  # a run logs to stderr (a dry run to stdout)
    known = slurm_jobs()
    return SlurmRun(workdir, output, [(rule, known[job]) for job, rule in submitted(output)])


def test_train_jobs_ran_on_the_gpu_partition_with_a_gpu_and_the_rest_on_cpu(slurm_run):
    local = set(re.findall(r"^localrule (\w+):", slurm_run.output, flags=re.M))  # none before train, today
    assert "train" not in local, local
    expected = {rule: n for rule, n in job_stats(slurm_run.output).items() if rule not in local}
    ran: dict[str, int] = {}
    for rule, _ in slurm_run.jobs:
        ran[rule] = ran.get(rule, 0) + 1
    assert ran == expected  # every job but the local rules went through Slurm, once
    assert ran["train"] == TRAIN_JOBS
    for rule, job in slurm_run.jobs:
        assert (job["JobState"], job["ExitCode"]) == ("COMPLETED", "0:0"), (rule, job)
        assert job["Comment"].startswith(f"rule_{rule}"), (rule, job)
        if rule == "train":
            assert job["Partition"] == "gpu" and re.fullmatch(r"gres[:/]gpu:1", job.get("TresPerNode", "")), job
        else:
            assert job["Partition"] == "cpu" and "gpu" not in job.get("TresPerNode", ""), (rule, job)
    # The node has one GPU, so Slurm ran the train jobs one after another: the GPU was allocated, not just asked for.
    spans = sorted((job["StartTime"], job["EndTime"]) for rule, job in slurm_run.jobs if rule == "train")
    assert all(start >= previous_end for (_, previous_end), (start, _) in zip(spans, spans[1:])), spans


def test_slurm_train_jobs_give_a_local_runs_results(slurm_run, local_run, targets):
    for target in targets:
        on_slurm, local = (pl.read_parquet(root / target).sort("run_key") for root in (slurm_run.workdir, local_run))
        assert on_slurm.columns == local.columns and on_slurm.height == local.height > 0
        assert (on_slurm["status"] == "ok").all()
        compared = [c for c in local.columns if not wall_time(c)]
        for column in compared:
            assert on_slurm[column].equals(local[column]), column
        for name in ("metrics.parquet", "episodes.parquet"):
            theirs, ours = (
                pl.read_parquet(root / target.replace("runs.parquet", name)) for root in (slurm_run.workdir, local_run)
            )
            assert theirs.equals(ours), (target, name)
    # Remote jobs left complete metadata: the same profile sees nothing to do.
    assert "Nothing to be done" in snakemake(slurm_run.workdir, "-n", *targets, *PROFILE, *SMOKE).stdout


def copy_of(run: SlurmRun, dest: Path) -> tuple[Path, str]:
    """A copy of the finished Slurm run and the runs file of one of its train jobs."""
    workdir = dest / "workdir"
    shutil.copytree(run.workdir, workdir, symlinks=True)
    key = sorted(p.name for p in (workdir / "results" / "train").iterdir())[0]
    return workdir, f"results/train/{key}/runs.parquet"


def start_and_cancel_train_job(workdir: Path, target: str, *args: str) -> tuple[subprocess.Popen, Path, str]:
    """Force the train job behind ``target`` through Slurm and scancel it once its training has
    started (its stage log, removed beforehand, reappears); returns Snakemake, its log, the job id."""
    stage_log = workdir / "results" / "logs" / "train" / f"{Path(target).parent.name}.log"
    stage_log.unlink(missing_ok=True)
    before = set(slurm_jobs())
    log = workdir.parent / "snakemake.log"
    with log.open("w") as out:
        study = subprocess.Popen(
            [sys.executable, "-m", "snakemake", target, "--force", *PROFILE, *SMOKE, *args],
            cwd=workdir,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        assert study.poll() is None, f"Snakemake ended before its train job was cancelled:\n{log.read_text()}"
        running = [line.split("|", 1) for line in slurm("squeue", "-h", "-t", "running", "-o", "%i|%k").splitlines()]
        ours = [job for job, comment in running if job not in before and comment.startswith("rule_train_")]
        if ours and stage_log.exists():
            slurm("scancel", ours[0])
            return study, log, ours[0]
        time.sleep(0.1)
    study.kill()
    raise AssertionError(f"no train job seen training within 300 s:\n{log.read_text()}")


def same_training(workdir: Path, original: Path, target: str) -> None:
    """Training is deterministic per run key: the rerun gives the original metrics and runs."""
    again, first = (pl.read_parquet(root / target) for root in (workdir, original))
    compared = [c for c in first.columns if not wall_time(c)]
    assert again.select(compared).equals(first.select(compared))
    metrics = target.replace("runs.parquet", "metrics.parquet")
    assert pl.read_parquet(workdir / metrics).equals(pl.read_parquet(original / metrics))


def test_a_cancelled_train_job_fails_the_run_and_is_resubmitted_on_rerun(slurm_run, tmp_path):
    workdir, target = copy_of(slurm_run, tmp_path)
    study, log, job = start_and_cancel_train_job(workdir, target, "--retries", "0")
    assert study.wait(timeout=300) != 0, log.read_text()
    assert f"SLURM-job '{job}' failed, SLURM status is: 'CANCELLED'" in log.read_text()
    assert slurm_jobs()[job]["JobState"] == "CANCELLED"
    assert not (workdir / target).exists()  # Snakemake removed the cancelled job's outputs

    rerun = snakemake(workdir, target, *PROFILE, *SMOKE)
    ((again, rule),) = submitted(rerun.stdout + rerun.stderr)
    assert rule == "train" and again != job
    assert slurm_jobs()[again]["JobState"] == "COMPLETED"
    same_training(workdir, slurm_run.workdir, target)


def test_a_cancelled_train_job_is_resubmitted_within_the_run_by_the_profiles_retries(slurm_run, tmp_path):
    workdir, target = copy_of(slurm_run, tmp_path)
    study, log, job = start_and_cancel_train_job(workdir, target)
    assert study.wait(timeout=300) == 0, log.read_text()
    output = log.read_text()
    assert f"SLURM-job '{job}' failed, SLURM status is: 'CANCELLED'" in output
    attempts = submitted(output)
    assert [rule for _, rule in attempts] == ["train", "train"] and attempts[0][0] == job, attempts
    assert slurm_jobs()[attempts[1][0]]["JobState"] == "COMPLETED"
    same_training(workdir, slurm_run.workdir, target)
