"""The stage registry: what a stage reads is what its key covers, every rule reaches its function by
its name, every report target names functions that exist, and config/README.md's key table is the
registry's."""

import copy
import re

import pytest

from axisrl.config import hashed_part, load_config, load_yaml, project, validate_config
from axisrl.stages import STAGES, base_spec, job_function, key_table, study
from axisrl.stages.registry import resolve
from axisrl.targets import FIGURES, TABLES, study_spec
from conftest import DEFAULT_CONFIG
from conftest import ROOT as REPO

STUDY_LEVEL = [name for name in STAGES if name not in ("train", "evaluate", "pretrain", "allocate")]
"""Stages with one key per study (allocate reads the speed-only ``resources``, as train does: its test is below)."""


@pytest.fixture()
def config(schema) -> dict:
    return validate_config(load_yaml(DEFAULT_CONFIG), schema)


def _schema_has(schema: dict, path: str) -> bool:
    node = schema
    for part in path.split("."):
        properties = node.get("properties", {})
        if part == "*":
            node = node.get("additionalProperties") or next(iter(properties.values()), None)
        else:
            node = properties.get(part)
        if not isinstance(node, dict):
            return False
    return True


@pytest.mark.parametrize("name", list(STAGES))
def test_every_path_a_stage_reads_is_in_the_schema(name, schema):
    missing = [path for path in STAGES[name].reads if not _schema_has(schema, path)]
    assert not missing, f"{name} reads {missing}, which config/schema.yaml does not define"


@pytest.mark.parametrize("name", STUDY_LEVEL)
def test_a_job_is_handed_what_its_key_covers(name, config, schema):
    """The key hashes the job's settings as read from the hashed config: only speed-only options differ."""
    spec = study(config, schema).specs[name]
    assert STAGES[name].settings(hashed_part(config, schema)) == spec.config


def test_a_speed_only_option_reaches_the_job_but_not_the_key(config, schema):
    faster = copy.deepcopy(config)
    faster["dedup"]["block_size"] = 17
    assert STAGES["dedup"].settings(faster)["dedup"]["block_size"] == 17
    assert study(faster, schema).specs["dedup"].key == study(config, schema).specs["dedup"].key


def test_an_experiment_logger_reaches_the_verl_job_but_no_key(schema):
    cluster = load_config(
        DEFAULT_CONFIG, REPO / "config" / "studies" / "qwen3-8b.yaml", schema_path=REPO / "config" / "schema.yaml"
    )
    logged = copy.deepcopy(cluster)
    logged["train"]["llm"]["loggers"] = ["wandb", "tensorboard"]
    base, moved = study(cluster, schema), study(logged, schema)
    assert {n: s.key for n, s in base.specs.items()} == {n: s.key for n, s in moved.specs.items()}
    assert [(p.train.key, p.evaluate.key) for p in base.points.values()] == [
        (p.train.key, p.evaluate.key) for p in moved.points.values()
    ]
    point = next(iter(moved.points.values()))
    handed = STAGES["train"].settings(logged, design=point.design, seeds=point.seeds)
    assert handed["llm"]["loggers"] == ["wandb", "tensorboard"]


def test_a_stage_key_moves_with_what_it_reads_and_nothing_else(config, schema):
    base = study(config, schema).specs
    changed = copy.deepcopy(config)
    changed["laws"]["n_boot"] = 10
    moved = study(changed, schema).specs
    assert sorted(s for s in base if base[s].key != moved[s].key) == ["catalog", "laws"]
    changed = copy.deepcopy(config)
    changed["pricing"]["threshold"] = 0.6
    moved = study(changed, schema).specs
    assert sorted(s for s in base if base[s].key != moved[s].key) == ["catalog", "pricing"]


def test_a_study_folder_moves_with_what_its_tables_and_figures_read(config, schema):
    """A study's tables and figures go to ``results/studies/<key>/`` (``axisrl.targets.study_spec``): an
    option only a figure reads moves that folder and no stage, a fit option moves the laws stage and the
    folder, a speed-only option neither, and the recipe's own options move it only while the recipe is on."""
    base = study(config, schema)

    def moved(change, start=config):
        before, changed = study(start, schema), copy.deepcopy(start)
        change(changed)
        after = study(changed, schema)
        stages = sorted(name for name in before.specs if before.specs[name].key != after.specs[name].key)
        return study_spec(before).key != study_spec(after).key, stages

    assert moved(lambda c: c["report"].update(cost_per_env=5)) == (True, [])
    assert moved(lambda c: c["laws"].update(n_boot=10)) == (True, ["catalog", "laws"])
    assert moved(lambda c: c["dedup"].update(block_size=17)) == (False, [])
    assert moved(lambda c: c["recipe"].update(n_boot=10)) == (True, ["recipe", "validate"])
    assert set(study_spec(base).inputs) == {"collect", "laws", "pricing", "recipe", "validate"}
    off = copy.deepcopy(config)
    off["recipe"]["enabled"] = False
    assert study_spec(study(off, schema)).key != study_spec(base).key
    assert set(study_spec(study(off, schema)).inputs) == {"collect", "laws", "pricing"}
    assert moved(lambda c: c["recipe"].update(n_boot=10), start=off) == (False, ["recipe", "validate"])


def _rules() -> list[str]:
    text = "".join(path.read_text() for path in (REPO / "workflow" / "rules").glob("*.smk"))
    return sorted(set(re.findall(r"^\s*(?:rule|checkpoint) (\w+):", text, flags=re.M)))


def test_every_rule_runs_the_function_of_its_name():
    rules = _rules()
    assert {"synthesize", "dedup", "train", "collect", "recipe", "catalog"} <= set(rules)
    for rule in rules:
        settings = {"backend": "tiny"} if rule == "train" else {}
        assert callable(job_function(rule, settings)), rule
    assert job_function("train", {"backend": "verl"}).__name__ == "train_verl"
    for name in [*TABLES, *FIGURES]:
        assert callable(job_function(name, {}))
    with pytest.raises(KeyError, match="no stage or report target"):
        job_function("tabel2", {})


@pytest.mark.parametrize("name", [*TABLES, *FIGURES])
def test_every_target_names_functions_that_exist(name):
    target = {**TABLES, **FIGURES}[name]
    for ref in filter(None, (target.make, target.computed_by)):  # named where the code is, not where it is re-exported
        assert callable(resolve(ref)) and resolve(ref).__module__ == ref.split(":")[0], ref
    assert set(target.optional) <= set(target.frames)
    assert all(stage in STAGES for stage, _ in target.frames.values())
    if name in FIGURES:
        assert (REPO / "workflow" / "report" / f"{name}.rst").exists()


def test_the_readme_key_table_is_the_registry():
    text = (REPO / "config" / "README.md").read_text()
    table = re.search(r"<!-- key-table: [^\n]*-->\n(.*?)\n<!-- /key-table -->", text, flags=re.S)
    assert table, "config/README.md has lost its generated key table markers"
    assert table.group(1) == key_table(), (
        "config/README.md's key table differs from the registry; regenerate it with "
        "python -c 'from axisrl.stages import key_table; print(key_table())'"
    )


def test_a_registry_typo_is_an_error_not_an_empty_setting(config):
    with pytest.raises(KeyError, match="no 'dedup.thetaz'"):
        project(config, ("dedup.thetaz",))
    assert project(config, ("dedup.thetaz",), strict=False) == {}
    assert project(config, ("sources.methods.*.unit_cost",))["sources"]["methods"]["sca"] == {
        "unit_cost": config["sources"]["methods"]["sca"]["unit_cost"]
    }


def test_study_refuses_a_stage_that_claims_an_upstream_it_does_not_declare(config, schema):
    with pytest.raises(ValueError, match="does not hang off"):
        STAGES["laws"].spec(hashed_part(config, schema), {"dedup": "0" * 12})


def test_where_names_the_rule_and_the_function_behind_a_target(capsys):
    from axisrl.cli import main

    assert main(["where", "table8"]) == 0
    out = capsys.readouterr().out
    assert "rule table8" in out and "axisrl.laws.tables:worlds_variants_table" in out
    assert main(["where", "fig2"]) == 0
    assert "axisrl.report.figures:figure2(points=laws/points" in capsys.readouterr().out
    assert main(["where", "tabel8"]) == 2


def test_the_all_pool_is_the_test_tiers_and_validation_success_is_its_own_column():
    import polars as pl

    from axisrl.stages.collect import success_by_tier

    episodes = pl.DataFrame(
        {
            "run_key": ["r"] * 6,
            "tier": ["T0", "T1", "T2", "T2", "V", "V"],
            "success": [True, False, True, False, True, True],
        }
    )
    row = success_by_tier(episodes).row(0, named=True)
    assert (row["n_all"], row["p_all"]) == (4, 0.5)
    assert (row["n_V"], row["p_V"]) == (2, 1.0)


def test_a_base_is_keyed_by_what_its_job_reads_and_every_run_from_it_covers_its_key(config, schema):
    """One base per policy width; a run's key covers its width's base key, so retraining the base
    retrains every run, and only runs that start from a base have one."""
    keyed = study(config, schema)
    widths = {point.design.width for point in keyed.points.values()}
    bases = {width: base_spec(width, "base", keyed.hashed, keyed.specs) for width in widths}
    assert len({spec.key for spec in bases.values()}) == len(widths) > 1
    for width, spec in bases.items():
        assert STAGES["pretrain"].settings(hashed_part(config, schema), width=width, strength="base") == spec.config
    for point in keyed.points.values():
        if point.design.base is None:
            assert point.train.inputs["pretrain"] == bases[point.design.width].key
            assert point.train.config["init"] == "base"
    changed = copy.deepcopy(config)
    changed["pretrain"]["lr"] = 0.002
    moved = study(changed, schema)
    for job, point in keyed.points.items():  # every run from a base is retrained, and only those
        assert (moved.points[job].train.key != point.train.key) == ("pretrain" in point.train.inputs)
    upstream_of_runs = ("synthesize", "embed", "dedup", "sources", "dedup_sources", "plan")
    assert [moved.specs[n].key for n in upstream_of_runs] == [keyed.specs[n].key for n in upstream_of_runs]
    random = copy.deepcopy(config)
    random["train"]["init"] = "random"
    fresh = study(random, schema)
    for point in fresh.points.values():
        if point.design.base is None:
            assert "pretrain" not in point.train.inputs and "init" not in point.train.config
    random["pretrain"]["lr"] = 0.002
    unmoved = [job for job, point in fresh.points.items() if "pretrain" not in point.train.inputs]
    assert unmoved and all(
        study(random, schema).points[job].train.key == fresh.points[job].train.key for job in unmoved
    )


def test_an_adaptive_budget_moves_allocate_and_collect_and_no_train_key(config, schema):
    config["study"]["adaptive"].update(enabled=True, budget=100.0)
    larger = copy.deepcopy(config)
    larger["study"]["adaptive"]["budget"] = 400.0
    small, large = study(config, schema), study(larger, schema)
    assert small.specs["allocate"].key != large.specs["allocate"].key
    assert small.specs["collect"].key != large.specs["collect"].key
    assert {p.train.key for p in small.points.values()} == {p.train.key for p in large.points.values()}
    assert small.first_wave and all("allocate" not in s.inputs for s in small.specs.values() if s.stage != "collect")
    fixed = copy.deepcopy(config)
    fixed["study"]["adaptive"]["enabled"] = False
    assert "allocate" not in study(fixed, schema).specs


def test_a_train_job_reports_the_plans_runs_done_in_its_domain(tmp_path):
    from axisrl.stages.train import study_progress

    train = tmp_path / "domains" / "webworld" / "results" / "train"
    for key in ("a", "c"):
        (train / key).mkdir(parents=True)
        (train / key / "runs.parquet").touch()
    (train / "b").mkdir()  # a job that has not ended: no runs table yet
    progress = {"domain": "webworld", "planned": {"a": 2, "b": 2, "c": 4, "d": 2}}
    line = study_progress(progress, str(train / "c" / "runs.parquet"))
    assert line == "progress: webworld 6 of 10 planned runs done (2 of 4 train jobs, 60%)"
