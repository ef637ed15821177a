import copy

import pytest

from axisrl.config import ConfigError, StageSpec, canonical_json, load_config, load_yaml, validate_config
from axisrl.stages import study
from conftest import DEFAULT_CONFIG, ROOT, SCHEMA_PATH


def keys(config: dict, schema: dict) -> dict[str, str]:
    return {stage: spec.key for stage, spec in study(validate_config(config, schema), schema).specs.items()}


@pytest.fixture()
def default() -> dict:
    return load_yaml(DEFAULT_CONFIG)


def test_empty_config_gets_every_default_and_hashes_like_the_explicit_default(default, schema):
    implicit = validate_config({}, schema)
    assert implicit == validate_config(default, schema)
    assert keys({}, schema) == keys(default, schema)


@pytest.mark.parametrize(
    ("overlay", "named"),
    [
        ({"synthesize": {"n_wrolds": 3}}, "'n_wrolds' was unexpected"),
        ({"nonsense": 1}, "'nonsense' was unexpected"),
        ({"synthesize": {"n_worlds": "many"}}, "synthesize.n_worlds: 'many' is not of type 'integer'"),
        ({"synthesize": {"n_worlds": 0}}, "synthesize.n_worlds: 0 is less than the minimum of 1"),
        ({"synthesize": {"tables": {"min": 4, "max": 3}}}, "synthesize.tables: min 4 exceeds max 3"),
        ({"dedup": {"theta": 0.25}}, "dedup.theta: 0.25 is not one of dedup.thetas"),
        ({"synthesize": {"heldout": {"seed": 0}}}, "synthesize.heldout.seed: must differ"),
        ({"dedup": {"embedding": {"bogus": True}}}, "dedup.embedding: Additional properties"),
        ({"study": {"seeds": [0, 0]}}, "study.seeds: [0, 0] has non-unique elements"),
        ({"study": {"seeds": [0, 2]}}, "study.families.axis_sweeps.extra_seeds: [2] are already in study.seeds"),
        ({"study": {"grids": {"d_env": [0, 2, 4]}}}, "study.grids.d_env.0: 0 is less than the minimum of 1"),
        ({"study": {"grids": {"d_traj": [-1, 2]}}}, "study.grids.d_traj.0: -1 is less than the minimum of 1"),
        ({"recipe": {"cost": {"toolworld": {"failed_fraction": 1.0}}}}, "recipe.cost.toolworld.failed_fraction"),
        ({"domain": "mathcode"}, "train.backend: tiny needs a compact view of the domain; mathcode has none"),
        ({"domain": "webworld"}, "study.families.mixtures: synthetic sources exist for toolworld only"),
        ({"evaluate": {"backend": "vllm"}}, "evaluate.backend: vllm needs train.backend verl"),
        ({"train": {"backend": "verl"}}, "evaluate.backend: train.backend verl is evaluated with vllm"),
        ({"train": {"backend": "verl"}, "evaluate": {"backend": "vllm"}}, "train.llm.model: train.backend verl needs"),
        (
            {"train": {"backend": "verl", "llm": {"model": "/m"}}, "evaluate": {"backend": "vllm"}},
            "study.families.mixtures: the verl backend cannot run it",
        ),
        ({"study": {"seeds": [0, 1, 2, 3], "adaptive": {"enabled": True}}}, "study.adaptive.first_seeds: 3 is fewer"),
        ({"study": {"adaptive": {"enabled": True, "max_seeds": 3}}}, "study.adaptive.max_seeds: 3 leaves no second"),
        (
            {"study": {"adaptive": {"enabled": True}, "families": {"axis_sweeps": {"enabled": False}}}},
            "study.adaptive: the waves are the axis sweeps' seeds",
        ),
    ],
)
def test_bad_config_names_the_key_and_the_reason(overlay, named, schema):
    with pytest.raises(ConfigError, match=None) as caught:
        validate_config(overlay, schema)
    assert named in str(caught.value)


def test_the_schema_names_every_registered_domain(schema):
    """A domain is registered in ``axisrl.domains.DOMAINS``; the schema's enums follow it."""
    from axisrl.domains import DOMAINS

    properties = schema["properties"]
    assert sorted(properties["domain"]["enum"]) == sorted(DOMAINS)
    assert sorted(properties["domains"]["propertyNames"]["enum"]) == sorted(DOMAINS)


def test_a_study_across_domains_is_one_config_per_domain_with_its_overlay(schema):
    from axisrl.config import domain_configs

    no_mixtures = {"families": {"mixtures": {"enabled": False}}}
    config = {"study": no_mixtures, "domains": {"toolworld": {}, "repoworld": {"dedup": {"task_rule": "raw"}}}}
    studies = domain_configs(config, schema)
    assert list(studies) == ["toolworld", "repoworld"]
    assert studies["repoworld"] == {"domain": "repoworld", "study": no_mixtures, "dedup": {"task_rule": "raw"}}
    assert studies["toolworld"] == {"domain": "toolworld", "study": no_mixtures}
    with pytest.raises(ConfigError, match="(?s)domains.webworld: .* synthetic sources exist for toolworld only"):
        domain_configs({"domains": {"webworld": {}}}, schema)
    assert domain_configs({}, schema) == {}


def test_strings_from_snakemake_config_flag_are_coerced_by_schema(schema):
    # `--config synthesize={n_worlds: 3}` delivers nested scalars as strings.
    config = validate_config(
        {"synthesize": {"n_worlds": "3"}, "dedup": {"thetas": ["0.1", "0.2"], "theta": "0.1"}}, schema
    )
    assert config["synthesize"]["n_worlds"] == 3
    assert config["dedup"]["thetas"] == [0.1, 0.2]


def test_dedup_change_moves_dedup_key_only_and_synthesis_change_moves_all(default, schema):
    base = keys(default, schema)
    changed_dedup = copy.deepcopy(default)
    changed_dedup["dedup"]["thetas"] = [0.1, 0.15]
    moved = keys(changed_dedup, schema)
    assert moved["synthesize"] == base["synthesize"] and moved["embed"] == base["embed"]
    assert moved["dedup"] != base["dedup"]

    changed_model = copy.deepcopy(default)
    changed_model["dedup"]["embedding"]["model"] = "some/other-model"
    moved = keys(changed_model, schema)
    assert moved["synthesize"] == base["synthesize"]
    assert moved["embed"] != base["embed"] and moved["dedup"] != base["dedup"]

    changed_synthesis = copy.deepcopy(default)
    changed_synthesis["synthesize"]["seed"] = 7
    moved = keys(changed_synthesis, schema)
    assert [stage for stage in base if moved[stage] == base[stage]] == ["plan"]  # the plan reads no pool


def test_speed_only_options_do_not_move_keys(default, schema):
    faster = copy.deepcopy(default)
    faster["dedup"]["block_size"] = 17
    faster["dedup"]["embedding"]["batch_size"] = 3
    assert keys(faster, schema) == keys(default, schema)


def test_integral_floats_hash_like_ints():
    assert canonical_json({"a": 1.0, "b": [2.0, 0.5]}) == canonical_json({"a": 1, "b": [2, 0.5]})
    assert StageSpec("s", {"x": 1.0}).key == StageSpec("s", {"x": 1}).key
    assert StageSpec("s", {"x": 1}).key != StageSpec("s", {"x": 2}).key


def test_an_adaptive_block_that_is_off_keys_nothing(schema):
    """Off, ``study.adaptive`` is left out of every key, whatever it holds: the fixed study's keys stay."""
    default = study(validate_config(load_yaml(DEFAULT_CONFIG), schema), schema)
    overlay = load_yaml(DEFAULT_CONFIG)
    overlay.setdefault("study", {})["adaptive"] = {"enabled": False, "budget": 500, "first_seeds": 4}
    off = study(validate_config(overlay, schema), schema)
    assert {n: s.key for n, s in off.specs.items()} == {n: s.key for n, s in default.specs.items()}
    assert {j: p.train.key for j, p in off.points.items()} == {j: p.train.key for j, p in default.points.items()}


def test_the_quick_preset_is_three_points_an_axis_two_seeds_from_a_base():
    """config/studies/quick.yaml (README: the preset to start with): the axis sweeps alone, three points an
    axis and two seeds a point, every run from the pretrained base, tasks counted raw (no embedding rule)."""
    import collections

    from axisrl.plan import plan_designs, plan_rows

    config = load_config(DEFAULT_CONFIG, ROOT / "config" / "studies" / "quick.yaml", schema_path=SCHEMA_PATH)
    designs = plan_designs(config["study"])
    seeds = collections.Counter(row["point_key"] for row in plan_rows(designs, config["study"], config["domain"]))
    assert {tuple(planned.families) for planned in designs.values()} == {("axis_sweeps",)}
    assert len(designs) == 7 and set(seeds.values()) == {2}
    assert config["train"]["init"] == "base" and config["dedup"]["task_rule"] == "raw"


OVERLAYS = {
    "smoke-mixtures": "smoke",
    "smoke-recipe": "smoke",
    "smoke-adaptive": "smoke",
    "smoke-domains": "smoke",
    "curves": "quick",
    "gpu-smoke-mathcode": "gpu-smoke",
}
"""Each overlay of config/studies/ and the preset it goes over."""


@pytest.mark.parametrize(("overlay", "preset"), sorted(OVERLAYS.items()))
def test_an_overlay_alone_is_refused_naming_the_preset_it_goes_over(overlay, preset):
    studies = ROOT / "config" / "studies"
    load_config(DEFAULT_CONFIG, studies / f"{preset}.yaml", studies / f"{overlay}.yaml", schema_path=SCHEMA_PATH)
    with pytest.raises(ConfigError, match=rf"preset.over: .* give config/studies/{preset}.yaml before it"):
        load_config(DEFAULT_CONFIG, studies / f"{overlay}.yaml", schema_path=SCHEMA_PATH)


def test_every_overlay_of_the_presets_folder_names_the_preset_it_goes_over():
    """A file that says it is an overlay (its header's ``--configfile`` line names two files) sets ``preset.over``."""
    for path in sorted((ROOT / "config" / "studies").glob("*.yaml")):
        over = (load_yaml(path).get("preset") or {}).get("over")
        assert over == OVERLAYS.get(path.stem), path.name
