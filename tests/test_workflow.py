"""Real Snakemake runs of the workflow in a temp dir (no mocks): dry runs, bad config, the smoke study."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import polars as pl
import pytest
import yaml

from axisrl.artifacts import read_meta
from axisrl.config import StageSpec, domain_configs, load_config, load_yaml
from axisrl.diagnostics import STEP_COLUMNS
from axisrl.stages import study
from axisrl.targets import FIGURES, TABLES, domains_spec, study_spec, study_targets
from conftest import SMOKE, copy_study, copy_workflow, snakemake

MIXTURES = ("--configfile", "config/studies/smoke.yaml", "config/studies/smoke-mixtures.yaml")
ACROSS_DOMAINS = ("--configfile", "config/studies/smoke.yaml", "config/studies/smoke-domains.yaml")
POOLS = ("envs", "tasks", "heldout_envs", "heldout_tasks", "placebo_envs", "placebo_tasks")
STAGE_FILES = {
    "synthesize": POOLS,
    "embed": ("task_embeddings",),
    "dedup": (*POOLS, "pool_stats", "task_dedup"),
}
"""Single-key stages; train (which also evaluates) has one key per grid point."""


def study_dir(workdir: Path, *args: str) -> Path:
    """``results/studies/<key>/`` of the study that Snakemake's ``args`` (``--configfile`` and its files)
    make in a workflow copy: where its tables and figures are, by the key the workflow gives it."""
    schema = load_yaml(workdir / "config" / "schema.yaml")
    files = [workdir / arg for arg in args if arg != "--configfile"]
    config = load_config(workdir / "config" / "config.yaml", *files, schema_path=workdir / "config" / "schema.yaml")
    if config["domains"]:
        keys = {name: study_spec(study(domain, schema)).key for name, domain in domain_configs(config, schema).items()}
        return workdir / domains_spec(keys).directory("results")
    return workdir / study_spec(study(config, schema)).directory("results")


def artifacts(workdir: Path) -> dict[str, Path]:
    found = {}
    for stage, names in STAGE_FILES.items():
        (key_dir,) = (workdir / "results" / stage).iterdir()
        found.update({f"{stage}/{name}": key_dir / f"{name}.parquet" for name in names})
    return found


def test_dry_run_of_the_cluster_study_lists_gpu_train_and_evaluate_jobs(workflow_copy):
    """The Qwen3-8B study (verl training, vLLM evaluation, math+code) plans on CPU: every grid point
    gets a train job per seed on 8 GPUs and one evaluate job on 1 GPU."""
    done = snakemake(workflow_copy, "-n", "--cores", "64", "--configfile", "config/studies/qwen3-8b.yaml")
    jobs = re.findall(r"^rule (\w+):\n(?:    .*\n)*?    resources: (.*)$", done.stdout, flags=re.M)
    gpus = {rule: {r for name, r in jobs if name == rule} for rule in ("train", "evaluate")}
    count = {rule: len([name for name, _ in jobs if name == rule]) for rule in ("train", "evaluate")}
    assert count["train"] == 3 * count["evaluate"] > 150  # three seeds
    assert all("gpu=8" in r for r in gpus["train"]) and all("gpu=1" in r for r in gpus["evaluate"])
    assert "rule synthesize:" in done.stdout and "rule sources:" not in done.stdout  # no mixtures on the cluster
    assert "training runs cannot finish within one allocation" in done.stdout + done.stderr  # d_traj 64 > 4 days
    assert not (workflow_copy / "results").exists()


def test_dry_run_of_the_default_config(workflow_copy):
    done = snakemake(workflow_copy, "-n", "--cores", "2")
    for rule in ("synthesize", "embed", "dedup", "plan", "train", "collect", "catalog"):
        assert f"rule {rule}:" in done.stdout
    assert "allocation" not in done.stdout + done.stderr  # the tiny backend has no time limit to warn of
    assert not (workflow_copy / "results").exists()


def _planned_jobs(stdout: str, rule: str) -> int:
    """A rule's job count in a dry run's ``Job stats`` table (printed before and after the jobs)."""
    counts = set(re.findall(rf"^{rule}\s+(\d+)$", stdout, flags=re.MULTILINE))
    assert len(counts) == 1, counts
    return int(counts.pop())


def test_dry_run_of_the_full_study_plans_every_family_at_full_size(workflow_copy):
    """config/studies/full.yaml (hours on 2 cores) plans on a laptop: more train jobs than the
    default, every table and figure target, and no table labelled reduced."""
    default = snakemake(workflow_copy, "-n", "--cores", "2").stdout
    full = snakemake(workflow_copy, "-n", "--cores", "2", "--configfile", "config/studies/full.yaml").stdout
    assert _planned_jobs(full, "train") > _planned_jobs(default, "train")
    for target in ("table2", "table3", "table9", "table16", "fig2", "fig4", "validate"):
        assert _planned_jobs(full, target) == 1
    config = yaml.safe_load((workflow_copy / "config" / "studies" / "full.yaml").read_text())
    assert config["report"]["reduced"] == []
    assert not (workflow_copy / "results").exists()


def test_bad_config_is_rejected_before_any_job_with_the_key_named(workflow_copy):
    overlay = workflow_copy / "bad.yaml"
    overlay.write_text(yaml.safe_dump({"synthesize": {"n_worlds": -2, "rows_per_tabel": 3}}))
    done = snakemake(workflow_copy, "--cores", "1", "--configfile", str(overlay), check=False)
    output = done.stdout + done.stderr
    assert done.returncode != 0
    assert "synthesize.n_worlds: -2 is less than the minimum of 1" in output
    assert "'rows_per_tabel' was unexpected" in output
    assert not (workflow_copy / "results").exists()


def test_nested_config_flag_values_work(workflow_copy):
    done = snakemake(workflow_copy, "-n", "--cores", "1", "--config", "synthesize={n_worlds: 2, seed: 5}")
    assert "rule synthesize:" in done.stdout


@pytest.mark.slow
def test_smoke_study_writes_readable_artifacts_with_their_config(smoke_study):
    found = artifacts(smoke_study)
    for name, path in found.items():
        frame = pl.read_parquet(path)
        assert frame.height > 0, name
        meta = read_meta(path)
        assert StageSpec(meta.stage, meta.config, meta.inputs).key == meta.key == path.parent.name
    synth_meta = read_meta(found["synthesize/envs"])
    smoke = yaml.safe_load((smoke_study / "config/studies/smoke.yaml").read_text())
    assert synth_meta.config["synthesize"]["n_worlds"] == smoke["synthesize"]["n_worlds"]
    dedup_meta = read_meta(found["dedup/tasks"])
    assert dedup_meta.inputs == {"synthesize": synth_meta.key, "embed": read_meta(found["embed/task_embeddings"]).key}
    (catalog_dir,) = (smoke_study / "results" / "catalog").iterdir()
    listed = pl.read_parquet(catalog_dir / "catalog.parquet")
    assert set(listed["path"].str.replace(str(smoke_study) + "/", "", literal=True)) >= {
        str(p.relative_to(smoke_study)) for p in found.values()
    }


@pytest.mark.slow
def test_cli_reads_the_artifacts(smoke_study):
    path = artifacts(smoke_study)["dedup/pool_stats"]
    done = subprocess.run([sys.executable, "-m", "axisrl.cli", "show", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "stage dedup" in done.stdout and "jaccard_tools" in done.stdout
    done = subprocess.run(
        [sys.executable, "-m", "axisrl.cli", "catalog", str(smoke_study / "results")], capture_output=True, text=True
    )
    assert done.returncode == 0 and "synthesize" in done.stdout


@pytest.mark.slow
def test_dedup_change_reruns_dedup_only(smoke_study, tmp_path):
    overlay = tmp_path / "thetas.yaml"
    overlay.write_text(yaml.safe_dump({"dedup": {"thetas": [0.1, 0.15], "theta": 0.1}}))
    done = snakemake(smoke_study, "-n", "--cores", "1", *SMOKE, str(overlay))  # --configfile takes several files
    assert "rule dedup:" in done.stdout
    assert "rule synthesize:" not in done.stdout and "rule embed:" not in done.stdout
    unchanged = snakemake(smoke_study, "-n", "--cores", "1", *SMOKE)
    assert "Nothing to be done" in unchanged.stdout


@pytest.mark.slow
def test_same_config_twice_gives_identical_artifact_contents(smoke_study, smoke_upstream):
    first, second = artifacts(smoke_study), artifacts(smoke_upstream)
    for name in first:
        assert first[name].parent.name == second[name].parent.name
        assert pl.read_parquet(first[name]).equals(pl.read_parquet(second[name])), name


WALL_TIME_SUFFIXES = ("_seconds_per_call", "_per_trajectory", "_seconds_per_episode", "_cpu_seconds")
"""The measured, machine-dependent columns of ``runs.parquet`` (cost drivers and evaluation time)."""


@pytest.mark.slow
def test_same_run_key_twice_gives_identical_metrics_and_parameters(smoke_study, smoke_upstream, tmp_path):
    """Training is deterministic per run key: a GRPO and a PPO grid point trained again from scratch
    in another folder (from the pools of the second upstream run), in fresh processes instead of the
    warm server's children, give bit-identical metrics and parameter hashes. Its own training, on a copy of the
    upstream run: the claim is about a second training."""
    (collect_dir,) = (smoke_study / "results" / "collect").iterdir()
    runs = pl.read_parquet(collect_dir / "runs.parquet")
    again = copy_study(smoke_upstream, tmp_path)
    for algo in ("grpo", "ppo"):
        point = runs.filter(pl.col("algo") == algo)["point_key"][0]
        train_dirs = [
            d
            for d in (smoke_study / "results" / "train").iterdir()
            if pl.read_parquet(d / "runs.parquet")["run_key"]
            .is_in(runs.filter(pl.col("point_key") == point)["run_key"].implode())
            .all()
        ]
        assert train_dirs, algo
        for train_dir in train_dirs:  # an axis-sweep point has a second job for its extra seeds
            target = f"results/train/{train_dir.name}/runs.parquet"
            snakemake(again, target, "--cores", "2", *SMOKE, env={"AXISRL_WARM": "0"})
            first, second = (pl.read_parquet(root / target) for root in (smoke_study, again))
            assert first["param_hash"].to_list() == second["param_hash"].to_list(), algo
            deterministic = [c for c in first.columns if not c.endswith(WALL_TIME_SUFFIXES) and c != "utilization"]
            assert first.select(deterministic).equals(second.select(deterministic)), algo
            metrics = target.replace("runs.parquet", "metrics.parquet")
            assert pl.read_parquet(smoke_study / metrics).equals(pl.read_parquet(again / metrics)), algo


@pytest.mark.slow
def test_corrupt_upstream_gives_one_error_line_and_no_partial_output(smoke_upstream, tmp_path):
    """On a copy of the upstream run, since it breaks a file there."""
    workdir = copy_study(smoke_upstream, tmp_path)
    found = artifacts(workdir)
    envs = found["synthesize/envs"]
    envs.write_bytes(envs.read_bytes()[:200])
    done = snakemake(workdir, "dedup", "--cores", "1", *SMOKE, check=False)
    assert done.returncode != 0
    lines = [
        line
        for line in (done.stdout + done.stderr).splitlines()
        if str(envs.relative_to(workdir)) in line and "truncated or corrupt" in line
    ]
    assert lines, done.stdout + done.stderr
    assert not any(found[f"dedup/{name}"].exists() for name in STAGE_FILES["dedup"])


@pytest.mark.slow
def test_smoke_study_collects_one_row_per_planned_run(smoke_study):
    (plan_dir,) = (smoke_study / "results" / "plan").iterdir()
    (collect_dir,) = (smoke_study / "results" / "collect").iterdir()
    planned = pl.read_parquet(plan_dir / "runs.parquet")
    runs = pl.read_parquet(collect_dir / "runs.parquet")
    assert runs.height == planned.height > 0
    assert set(runs["run_key"]) == set(planned["run_key"])
    assert (runs["status"] == "ok").all()
    assert runs["p_T2"].is_between(0, 1).all() and runs["n_T2"].min() > 0
    assert (runs["env_steps"] > 0).all() and (runs["rollout_flops"] > 0).all()
    trained = list((smoke_study / "results" / "train").iterdir())
    on_sweeps = planned.filter(pl.col("families").list.contains("axis_sweeps"))
    assert len(trained) == planned["point_key"].n_unique() + on_sweeps["point_key"].n_unique()  # extra_seeds' jobs
    assert (
        on_sweeps.group_by("point_key").agg(pl.col("seed").sort())["seed"].to_list()
        == [[0, 1]] * on_sweeps["point_key"].n_unique()
    )
    assert set(planned.filter(~pl.col("families").list.contains("axis_sweeps"))["seed"]) == {0}
    drivers = (
        "horizon",
        "rollout_steps_per_trajectory",
        "env_seconds_per_call",
        "verifier_seconds_per_trajectory",
        "failed_rollout_fraction",
        "utilization",
        "heldout_seconds_per_episode",
    )
    assert runs.select(drivers).null_count().sum_horizontal().item() == 0
    assert runs["utilization"].is_between(0, 1).all() and runs["failed_rollout_fraction"].is_between(0, 1).all()
    assert runs.select(STEP_COLUMNS).null_count().sum_horizontal().item() == 0  # the collapse diagnostics
    assert runs["tool_use_collapsed"].is_null().all()  # 4 updates: too few for tenths
    placebo = runs.filter(pl.col("env_level") == "placebo")
    assert placebo.height > 0 and (placebo["distinct_envs_seen"] <= placebo["d_env"]).all()


@pytest.mark.slow
def test_table9_accounts_for_every_sweep_point(smoke_study):
    tables = study_dir(smoke_study, *SMOKE) / "tables"
    table = pl.read_csv(tables / "table9.csv")
    smoke = yaml.safe_load((smoke_study / "config" / "studies" / "smoke.yaml").read_text())
    d_env = table.filter(pl.col("row") == "axis_sweeps:d_env")
    assert d_env["d_env"].to_list() == smoke["study"]["grids"]["d_env"]
    train = smoke["train"]
    fixed = table.filter(pl.col("budget") == "fixed_visits")
    # every fixed-visits point played its visits, d_traj rollouts each, and was charged for them
    assert (fixed["visits"] == train["updates"] * train["visits_per_update"]).all()
    assert (fixed["trajectories"] == fixed["visits"] * fixed["d_traj"]).all()
    assert (fixed["updates"] == train["updates"]).all()
    assert (fixed["charged_compute"] > 0).all() and (fixed["executed_over_charged"] > 0).all()
    assert set(table["row"]) >= {f"axis_sweeps:{axis}" for axis in ("d_env", "d_task", "d_traj")}
    assert (tables / "table9.md").read_text().startswith("# Table 9")


@pytest.mark.slow
def test_a_study_across_domains_runs_each_as_its_own_and_sets_them_side_by_side(smoke_study, tmp_path):
    """``domains:`` runs the smoke study once per domain, each with the keys its own config has (the
    toolworld one is the plain smoke study, key for key): the learner acts through each domain's
    compact view and starts from a base cloned on that domain's pretraining pool. One job writes
    Tables 2, 6 and 18 and Figure 2 with a row per domain. Its own study: no other test runs the preset, and its
    toolworld study is made again here so that the module's keys are seen to be the smoke study's."""
    workdir = copy_workflow(tmp_path)
    snakemake(workdir, "--cores", "2", *ACROSS_DOMAINS)
    named = ("toolworld", "webworld", "repoworld")
    for domain in named:
        results = workdir / "domains" / domain / "results"
        (collect_dir,) = (results / "collect").iterdir()
        (plan_dir,) = (results / "plan").iterdir()
        runs = pl.read_parquet(collect_dir / "runs.parquet")
        assert runs.height == pl.read_parquet(plan_dir / "runs.parquet").height > 0
        assert (runs["status"] == "ok").all() and (runs["domain"] == domain).all()
        assert runs["p_T2"].is_between(0, 1).all() and (runs["env_steps"] > 0).all()
        from_base = runs.filter(pl.col("base_param_hash").is_not_null())
        assert from_base.height > 0 and from_base["p_V_base"].is_between(0, 1).all()
    (alone,) = (smoke_study / "results" / "collect").iterdir()
    toolworld = workdir / "domains" / "toolworld" / "results"
    assert (toolworld / "collect" / alone.name).is_dir()
    # each domain's own tables in its study's folder (toolworld's is the smoke study's), the side-by-side
    # ones in this study's, and nothing else under results/studies/ but the name of the latter
    assert (toolworld / "studies" / study_dir(smoke_study, *SMOKE).name / "tables" / "table2.md").is_file()
    own = study_dir(workdir, *ACROSS_DOMAINS)
    assert {p.name for p in (workdir / "results" / "studies").iterdir()} == {own.name, "smoke+smoke-domains"}
    assert (workdir / "results" / "studies" / "smoke+smoke-domains").resolve() == own.resolve()
    side = own / "tables"
    table2 = pl.read_csv(side / "table2.csv")
    assert table2["domain"].to_list() == list(named)
    assert set(table2.columns) >= {"alpha_d_env", "trend_d_traj_p_value", "status_d_task"}
    assert pl.read_csv(side / "table6.csv").filter(pl.col("split") == "train")["domain"].to_list() == list(named)
    drivers = pl.read_csv(side / "table18.csv")
    assert drivers["domain"].to_list() == list(named) and (drivers["horizon"] > 0).all()
    assert (drivers["verifier_seconds_per_trajectory"] > 0).all() and (drivers["n_runs"] > 0).all()
    against = pl.read_csv(side / "table_base.csv")  # the runs that start from their domain's base
    assert against["domain"].to_list() == list(named) and (against["n_runs"] == drivers["n_runs"]).all()
    assert ((against["n_from_base"] > 0) & (against["n_from_base"] <= against["n_runs"])).all()
    assert ((against["runs_above_base"] >= 0) & (against["runs_above_base"] <= against["n_from_base"])).all()
    gains = against["gain_V"] - (against["p_V"] - against["p_V_base"])
    assert (gains.abs() < 1e-9).all()  # the mean paired gain is the difference of the means
    for name in ("table2", "table6", "table18"):
        assert (side / f"{name}.md").read_text().startswith("# Table")
    assert (side / "table_base.md").read_text().startswith("# RL against its base")
    assert (own / "figures" / "fig2.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_laws_tables_and_figures_of_the_smoke_study(smoke_study):
    """Every laws frame, table and figure is written; analyses the smoke study cannot do say so."""
    from axisrl.targets import LAW_FRAMES, LAW_TABLES

    (laws_dir,) = (smoke_study / "results" / "laws").iterdir()
    assert {p.stem for p in laws_dir.iterdir()} == set(LAW_FRAMES)
    fits = pl.read_parquet(laws_dir / "axis_fits.parquet")
    assert (fits["status"] == "too_few_points").all()  # the smoke grids have 2 points per axis
    assert fits["reason"].str.contains("a fit needs at least 3").all()
    assert pl.read_parquet(laws_dir / "table8.parquet")["status"].to_list() == ["not_run"]
    own = study_dir(smoke_study, *SMOKE)
    for name in (*LAW_TABLES, "table9"):
        assert (own / "tables" / f"{name}.md").read_text().startswith("# Table")
    power = pl.read_csv(own / "tables" / "power.csv")  # 2-point sweeps: the planner says why not
    assert power["status"].to_list() == ["not_run"] and "a sweep's line needs 3" in power["reason"][0]
    noise = pl.read_parquet(laws_dir / "noise.parquet")  # two points per axis, four tiers and V
    assert noise.height == 30 and set(noise["tier"]) == {"T0", "T1", "T2", "all", "V"}
    for name in ("fig2", "fig3", "fig_noise"):
        png = own / "figures" / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and (png.with_suffix(".pdf")).stat().st_size > 0


@pytest.mark.slow
def test_a_fit_option_reruns_the_analysis_only(smoke_study):
    planned = snakemake(smoke_study, "-n", "--cores", "1", *SMOKE, "--config", "laws={n_boot: 100}")
    jobs = {line.split()[0] for line in planned.stdout.split("Job stats:")[1].splitlines()[2:] if line.strip()}
    assert "laws" in jobs and not jobs & {"train", "collect", "synthesize", "dedup"}


@pytest.mark.slow
def test_without_mixtures_pricing_says_not_run(smoke_study):
    (pricing_dir,) = (smoke_study / "results" / "pricing").iterdir()
    assert pl.read_parquet(pricing_dir / "table3.parquet")["status"].to_list() == ["not_run"]
    assert not (smoke_study / "results" / "sources").exists()  # a study without mixtures never synthesizes them


@pytest.mark.slow
def test_mixtures_flow_from_sources_to_pricing_tables_and_figure4(smoke_upstream, tmp_path):
    """Synthetic sources carry their source through dedup and training; pricing writes a row per
    source (saying why, where the smoke grid is too small for a fit) and Figure 4 is drawn. Its own study (the
    mixtures' sources and runs, which only this test reads), on a copy of the upstream pools."""
    from axisrl.targets import PRICING_FRAMES, PRICING_TABLES

    workdir = copy_study(smoke_upstream, tmp_path)  # the real pools are the smoke study's, key for key
    snakemake(workdir, "--cores", "2", *MIXTURES)

    (sources_dir,) = (workdir / "results" / "dedup_sources").iterdir()
    tasks = pl.read_parquet(sources_dir / "synthetic_tasks.parquet")
    assert set(tasks["source"]) == {"awm"} and "keep" in tasks.columns
    (collect_dir,) = (workdir / "results" / "collect").iterdir()
    runs = pl.read_parquet(collect_dir / "runs.parquet")
    swirl = runs.filter(pl.col("source") == "swirl")
    assert (swirl["synthetic_episodes"] > 0).all() and (swirl["d_traj_synthetic"] == swirl["ratio"] * 2).all()
    awm = runs.filter(pl.col("source") == "awm")
    assert (awm["distinct_envs_seen"] > 1).all()  # the real environment and synthetic ones
    (pricing_dir,) = (workdir / "results" / "pricing").iterdir()
    assert {p.stem for p in pricing_dir.iterdir()} == set(PRICING_FRAMES)
    pricing = pl.read_parquet(pricing_dir / "pricing.parquet")
    assert sorted(pricing["source"]) == ["awm", "swirl"]
    assert (pricing["kappa_status"] == "too few real-only grid points").all()  # 1x and 2x only: no law
    assert (pricing["collapse_status"].str.contains("too few ratios")).all()  # 2 ratios: no logistic fit
    own = study_dir(workdir, *MIXTURES)
    for name in PRICING_TABLES:
        assert (own / "tables" / f"{name}.md").read_text().startswith("# Table")
    png = own / "figures" / "fig4.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_editing_a_script_shim_does_not_rerun_the_study(smoke_study, tmp_path):
    """On a copy of the smoke study, since it edits a file of the workflow there (dry runs only)."""
    workdir = copy_study(smoke_study, tmp_path)
    script = workdir / "workflow" / "scripts" / "stage.py"
    script.write_text(script.read_text() + "# an edit that changes nothing\n")
    assert "Nothing to be done" in snakemake(workdir, "-n", *SMOKE).stdout
    # the trigger the default profile leaves out would have rerun every train job
    assert "rule train:" in snakemake(workdir, "-n", "--rerun-triggers", "code", *SMOKE).stdout


@pytest.mark.slow
def test_a_setting_that_never_changes_results_reruns_nothing(smoke_study, tmp_path):
    """An unhashed setting (here the embedding batch size) is handed to its job but moves no key,
    and Snakemake's params trigger does not see it: nothing reruns. A hashed one still reruns."""
    unhashed = tmp_path / "unhashed.yaml"
    unhashed.write_text("dedup: {embedding: {batch_size: 7}}\n")
    assert "Nothing to be done" in snakemake(smoke_study, "-n", *SMOKE, str(unhashed)).stdout
    hashed = tmp_path / "hashed.yaml"
    hashed.write_text("dedup: {thetas: [0.05, 0.1, 0.15, 0.2, 0.25, 0.3]}\n")
    assert "rule dedup:" in snakemake(smoke_study, "-n", *SMOKE, str(hashed)).stdout


NOTED = "report: {reduced: [{family: mixtures, note: a note of the second study alone}]}\n"
"""A second study that differs from the smoke study in one report option: a note in the titles of the
tables drawn from the mixtures (Tables 3, 16 and 17)."""


def _jobs(log: str) -> set[str]:
    """The rules of the ``Job stats`` table a run logs (to stderr; a dry run's to stdout)."""
    rows = log.split("Job stats:")[1].strip().split("\n\n")[0].splitlines()[2:]  # below "job count" and its rule
    return {row.split()[0] for row in rows} - {"total"}


def _files(folder: Path) -> dict[str, int]:
    return {str(path.relative_to(folder)): path.stat().st_mtime_ns for path in folder.rglob("*") if path.is_file()}


@pytest.mark.slow
def test_each_study_keeps_its_own_tables_and_figures(smoke_study, tmp_path):
    """Issue 48: studies run one after another in one folder never write each other's tables and
    figures (each has its own ``results/studies/<key>/``, named by the config files of its run), going
    back to a study already run reruns nothing, and its report holds its own figures alone. On a copy of the smoke
    study, since it writes a second study's tables beside the first's."""
    workdir = copy_study(smoke_study, tmp_path)
    (workdir / "noted.yaml").write_text(NOTED)
    noted = (*SMOKE, "noted.yaml")
    first, second = study_dir(workdir, *SMOKE), study_dir(workdir, *noted)
    assert first != second
    before = _files(first)

    done = snakemake(workdir, "--cores", "2", *noted)
    made = study_targets(recipe=False)
    assert _jobs(done.stderr) == {*made, "all"}  # every table and figure again, into the new folder; no stage
    assert _files(first) == before  # not one file of the first study written, added or removed
    expected = {
        *(f"tables/{name}.{ext}" for name in TABLES if name in made for ext in ("md", "csv")),
        *(f"figures/{name}.{ext}" for name in FIGURES if name in made for ext in ("png", "pdf")),
    }
    assert set(before) == set(_files(second)) == expected
    assert "a note of the second study alone" in (second / "tables" / "table3.md").read_text()
    assert "a note of the second study alone" not in (first / "tables" / "table3.md").read_text()
    studies = workdir / "results" / "studies"
    assert {path.name for path in studies.iterdir()} == {first.name, second.name, "smoke", "smoke+noted"}
    assert (studies / "smoke").resolve() == first.resolve() and (studies / "smoke+noted").resolve() == second.resolve()

    assert "Nothing to be done" in snakemake(workdir, "-n", *SMOKE).stdout
    report = snakemake(workdir, "--report", "report.html", *SMOKE)
    assert "Missing metadata" not in report.stdout + report.stderr
    html = (workdir / "report.html").read_text()
    assert f"results/studies/{first.name}/figures/fig2.png" in html and second.name not in html


def _train_jobs_running(session: int) -> list[int]:
    """PIDs in Snakemake's session running a train job. Every rule runs the one shim, from a
    temporary copy Snakemake writes with the job pickled into its preamble; a train job's holds its
    ``train_key`` wildcard."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and os.getsid(int(proc.name)) == session:
                args = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")
                scripts = [arg for arg in args if arg.endswith("stage.py")]
                cwd = (proc / "cwd").resolve()
                if scripts and "train_key" in (cwd / scripts[0]).read_text(errors="replace"):
                    found.append(int(proc.name))
        except (OSError, ProcessLookupError):
            continue
    return found


class Interrupted(NamedTuple):
    """A study trained to ``collect`` through two interruptions (``interrupted``): ``finished``, the train
    outputs complete when the first Snakemake was killed, with their times; ``victims``, the train job processes
    killed from outside in the second; ``log``, what the second logged; ``workdir``, the study."""

    workdir: Path
    finished: dict[Path, int]
    victims: list[int]
    log: str


@pytest.fixture(scope="module")
def interrupted(smoke_upstream, tmp_path_factory) -> Interrupted:
    """The smoke study's pools trained to ``collect`` as a cluster interrupts a study: Snakemake itself killed once a
    train job has finished, then resumed with ``--rerun-incomplete`` and the profile's retries, and in the resumed
    run a train job killed from outside (what a node failure, an OOM kill or a preemption does: it dies without a
    word). One study for both tests below, which only read it: a study each would train the smoke runs twice."""
    tmp_path = tmp_path_factory.mktemp("interrupted")
    workdir = copy_study(smoke_upstream, tmp_path / "study")
    first_log = tmp_path / "first.log"
    study = subprocess.Popen(
        [sys.executable, "-m", "snakemake", "collect", "--cores", "1", *SMOKE],
        cwd=workdir,
        stdout=first_log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    train_dir = workdir / "results" / "train"
    deadline = time.monotonic() + 300
    # One job at a time: once Snakemake reports a train job finished, its outputs are complete.
    while "(Rule: train)" not in first_log.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    finished = {path: path.stat().st_mtime_ns for path in train_dir.glob("*/*") if path.suffix in (".parquet", ".pt")}
    os.killpg(study.pid, signal.SIGKILL)
    study.wait()
    snakemake(workdir, "--unlock", *SMOKE)  # a killed Snakemake leaves its lock behind

    log_path = tmp_path / "resumed.log"
    resumed = [sys.executable, "-m", "snakemake", "collect", "--cores", "1", "--retries", "1", "--rerun-incomplete"]
    study = subprocess.Popen(
        [*resumed, *SMOKE], cwd=workdir, stdout=log_path.open("w"), stderr=subprocess.STDOUT, start_new_session=True
    )
    deadline = time.monotonic() + 300
    victims: list[int] = []
    while not victims and study.poll() is None and time.monotonic() < deadline:
        victims = _train_jobs_running(study.pid)
        time.sleep(0.05)
    for pid in victims:
        os.kill(pid, signal.SIGKILL)
    assert study.wait(timeout=600) == 0, log_path.read_text()
    return Interrupted(workdir, finished, victims, log_path.read_text())


@pytest.mark.slow
def test_killed_study_resumes_without_retraining_finished_runs(interrupted: Interrupted):
    assert interrupted.finished, "no training run finished before the kill"
    assert all(path.stat().st_mtime_ns == mtime for path, mtime in interrupted.finished.items())
    (collect_dir,) = (interrupted.workdir / "results" / "collect").iterdir()
    assert pl.read_parquet(collect_dir / "runs.parquet")["status"].eq("ok").all()


@pytest.mark.slow
def test_a_train_job_killed_from_outside_is_retried(interrupted: Interrupted):
    """The job dies without a word; the profile's ``retries`` resubmit it and the study finishes with every run
    trained."""
    assert interrupted.victims, "no train job seen running"
    assert "Trying to restart job" in interrupted.log
    (collect_dir,) = (interrupted.workdir / "results" / "collect").iterdir()
    assert pl.read_parquet(collect_dir / "runs.parquet")["status"].eq("ok").all()


RECIPE = ("--configfile", "config/studies/smoke.yaml", "config/studies/smoke-recipe.yaml")


@pytest.mark.slow
def test_recipe_preregisters_trains_and_validates_its_strategies(smoke_upstream, tmp_path):
    """Its own study (the recipe overlay's strategy runs, which only this test reads), on a copy of the upstream
    pools."""
    workdir = copy_study(smoke_upstream, tmp_path)  # the pools are the smoke study's, key for key
    snakemake(workdir, "--cores", "2", *RECIPE)
    (recipe_dir,) = (workdir / "results" / "recipe").iterdir()
    (validate_dir,) = (workdir / "results" / "validate").iterdir()
    strategies = pl.read_parquet(recipe_dir / "strategies.parquet")
    measured = pl.read_parquet(validate_dir / "measured.parquet")
    # every pre-registered run was trained and measured; the predictions were written before
    assert set(measured["point_key"]) == set(strategies["point_key"]) and measured["p"].is_not_null().all()
    assert read_meta(recipe_dir / "strategies.parquet").created <= read_meta(validate_dir / "measured.parquet").created
    assert measured.filter(pl.col("role") == "validation")["inside_interval"].is_not_null().all()
    # every strategy and validation run spent what it was charged, and its level's budget
    assert measured["executed_over_charged_min"].min() >= 0.95 and measured["executed_over_charged_max"].max() <= 1.05
    assert measured["total_over_budget"].is_between(0.9, 1.1).all()
    assert (measured["charged_compute"] + measured["declared_price"] - measured["compute"]).abs().max() < 1e-3
    efficiency = pl.read_parquet(validate_dir / "efficiency.parquet")
    assert set(efficiency["measured_status"]) <= {"measured", "below", "above"}
    assert (efficiency["measured_efficiency_lo"] <= efficiency["measured_efficiency_hi"]).all()
    own = study_dir(workdir, *RECIPE)
    table9 = pl.read_csv(own / "tables" / "table9.csv")
    assert table9.filter(pl.col("budget") == "charged_flops").height == measured.height
    assert set(pl.read_parquet(recipe_dir / "exponents.parquet")["axis"]) >= {"d_env", "d_task", "d_traj", "sum"}
    for name in ("table18", "table19", "table20", "table21"):
        assert (own / "tables" / f"{name}.md").stat().st_size > 0
    for name in ("fig1", "fig5"):
        assert (own / "figures" / f"{name}.png").stat().st_size > 0
    centre = float(pl.read_parquet(recipe_dir / "path.parquet")["compute"][0])
    done = subprocess.run(
        [sys.executable, "-m", "axisrl.cli", "recipe", "--budget", f"{2 * centre:g}"],
        cwd=workdir,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and "predicted held-out success" in done.stdout, done.stderr
    refused = subprocess.run(
        [sys.executable, "-m", "axisrl.cli", "recipe", "--budget", "1"], cwd=workdir, capture_output=True, text=True
    )
    assert refused.returncode == 2 and refused.stderr.startswith("axisrl: error: --budget 1: budget 1 flop is below")


ADAPTIVE = ("--configfile", "config/studies/smoke.yaml", "config/studies/smoke-adaptive.yaml")


def _train_outputs(workdir: Path) -> dict[Path, int]:
    return {path: path.stat().st_mtime_ns for path in (workdir / "results" / "train").glob("*/*.parquet")}


@pytest.mark.slow
def test_an_adaptive_study_places_a_second_wave_and_a_larger_budget_only_adds_runs(smoke_upstream, tmp_path):
    """Its own study (the adaptive overlay's two waves, which only this test reads), on a copy of the upstream
    pools."""
    workdir = copy_study(smoke_upstream, tmp_path)  # the pools are the smoke study's, key for key
    snakemake(workdir, "--cores", "2", *ADAPTIVE)
    (allocate_dir,) = (workdir / "results" / "allocate").iterdir()
    allocation = pl.read_parquet(allocate_dir / "allocation.parquet")
    assert allocation["extra_seeds"].sum() > 0 and allocation["cost"].sum() <= 1.0
    assert (allocation["first_seeds"] == 2).all() and (allocation["first_seeds"] + allocation["extra_seeds"] <= 6).all()
    placed = allocation.select("point_key", seed="seeds").explode("seed").drop_nulls()
    (collect_dir,) = (workdir / "results" / "collect").iterdir()
    runs = pl.read_parquet(collect_dir / "runs.parquet")
    second = runs.filter(pl.col("wave") == 2)
    assert second.height == placed.height and second["status"].eq("ok").all() and second["p_T2"].is_not_null().all()
    assert set(zip(second["point_key"], second["seed"], strict=True)) == set(placed.iter_rows())
    assert "Allocation of the second wave" in (allocate_dir / "allocation.md").read_text()

    before = _train_outputs(workdir)
    (workdir / "larger.yaml").write_text(yaml.safe_dump({"study": {"adaptive": {"budget": 4}}}))
    snakemake(workdir, "--cores", "2", *ADAPTIVE, "larger.yaml")
    assert all(path.stat().st_mtime_ns == mtime for path, mtime in before.items()), "a trained run was retrained"
    assert len(_train_outputs(workdir)) > len(before)
    (larger,) = (path for path in (workdir / "results" / "allocate").iterdir() if path != allocate_dir)
    grown = pl.read_parquet(larger / "allocation.parquet").select("point_key", seed="seeds").explode("seed")
    assert set(placed.iter_rows()) < set(grown.drop_nulls().iter_rows())
