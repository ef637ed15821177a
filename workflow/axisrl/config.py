"""Study configuration: validation against the JSON Schema, defaults, and stage keys.

A stage key is a short hash of everything that determines the stage's outputs: the stage name,
the artifact schema version, the stage's validated config section (defaults filled, options that
only affect speed removed) and the keys of its upstream stages. Outputs live under
``results/<stage>/<key>/``, so a changed setting is a new path and an unchanged one is reused.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from axisrl.schema import RENAMED

if TYPE_CHECKING:
    import jsonschema

SCHEMA_VERSION = 1
"""Version of the artifact layout; bumped when a stage's columns or metadata change meaning."""

KEY_LENGTH = 12
UNHASHED = "x-hashed"
"""Schema annotation: ``x-hashed: false`` marks an option that changes speed, never results."""
HASHED_WHEN_ENABLED = "x-hashed-when-enabled"
"""Schema annotation of a block with an ``enabled`` switch that keys nothing while off."""
HASHED_UNLESS_DEFAULT = "x-hashed-unless-default"
"""Schema annotation of an option added after the first studies: at its default it keys nothing, so
every key made before it stands."""


class ConfigError(ValueError):
    """A config that must not start a run; the message names every offending key."""


def load_yaml(path: str | Path) -> Any:
    with open(path) as handle:
        return yaml.safe_load(handle)


@functools.cache
def _default_filling_validator() -> type:
    """The jsonschema FAQ recipe: fill ``default`` values while validating. jsonschema is imported
    here, not at module level: every job imports this module, only the workflow's parse validates."""
    import jsonschema

    validate_properties = jsonschema.Draft202012Validator.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for name, subschema in properties.items():
                if "default" in subschema:
                    instance.setdefault(name, copy.deepcopy(subschema["default"]))
        yield from validate_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(jsonschema.Draft202012Validator, {"properties": set_defaults})


def _coerce_strings(value: Any, schema: Mapping[str, Any]) -> Any:
    """Turn strings into the scalar the schema asks for.

    Snakemake's ``--config key={nested: 1}`` parses nested values with YAML's BaseLoader, so
    every nested scalar arrives as a string; coercing by schema makes such overrides work.
    """
    kind = schema.get("type")
    if isinstance(value, dict) and "properties" in schema:
        return {
            k: _coerce_strings(v, schema["properties"][k]) if k in schema["properties"] else v for k, v in value.items()
        }
    if isinstance(value, list) and "items" in schema:
        return [_coerce_strings(v, schema["items"]) for v in value]
    if not isinstance(value, str):
        return value
    try:
        if kind == "integer":
            return int(value)
        if kind == "number":
            return float(value)
    except ValueError:
        return value
    if kind == "boolean" and value.lower() in {"true", "false"}:
        return value.lower() == "true"
    return value


def _error_line(error: jsonschema.ValidationError) -> str:
    where = ".".join(str(p) for p in error.absolute_path) or "(top level)"
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        return f"{where}: {error.message}; allowed keys: {', '.join(allowed)}"
    return f"{where}: {error.message}"


def _cross_checks(cfg: Mapping[str, Any]) -> list[str]:
    """Constraints between keys that JSON Schema cannot express."""
    problems = []
    syn, dedup = cfg["synthesize"], cfg["dedup"]
    for name in ("tables", "rows_per_table"):
        if syn[name]["min"] > syn[name]["max"]:
            problems.append(f"synthesize.{name}: min {syn[name]['min']} exceeds max {syn[name]['max']}")
    if syn["heldout"]["seed"] == syn["seed"]:
        problems.append(
            "synthesize.heldout.seed: must differ from synthesize.seed (the held-out pool needs its own seed stream)"
        )
    pool_construction = cfg["study"]["families"]["pool_construction"]
    if pool_construction["enabled"] and "placebo" in pool_construction["levels"]:
        largest = max(cfg["study"]["grids"]["d_env"])
        if syn["placebo_contents"] < largest:
            problems.append(
                f"synthesize.placebo_contents: {syn['placebo_contents']} is below the largest d_env "
                f"({largest}) of the placebo sweep (study.families.pool_construction.levels)"
            )
    extra_seeds = cfg["study"]["families"]["axis_sweeps"]["extra_seeds"]
    shared_seeds = sorted(set(cfg["study"]["seeds"]) & set(extra_seeds))
    if shared_seeds:
        problems.append(f"study.families.axis_sweeps.extra_seeds: {shared_seeds} are already in study.seeds")
    problems += _adaptive_checks(cfg["study"])
    preset = cfg.get("preset", {})
    if preset.get("over") and preset.get("name") != preset["over"]:
        under = f"config/studies/{preset['over']}.yaml"
        problems.append(
            f"preset.over: this overlay goes over the {preset['over']} preset, which is not under it: "
            f"give {under} before it (snakemake --configfile {under} <this overlay>)"
        )
    if dedup["theta"] not in dedup["thetas"]:
        problems.append(f"dedup.theta: {dedup['theta']} is not one of dedup.thetas {dedup['thetas']}")
    return problems + _backend_checks(cfg)


def _adaptive_checks(study: Mapping[str, Any]) -> list[str]:
    """An adaptive design needs axis sweeps to place its waves on, a first wave that holds the seeds
    every family shares, and room under the cap for a second wave."""
    adaptive = study["adaptive"]
    if not adaptive["enabled"]:
        return []
    problems = []
    if not study["families"]["axis_sweeps"]["enabled"]:
        problems.append("study.adaptive: the waves are the axis sweeps' seeds; enable study.families.axis_sweeps")
    if adaptive["first_seeds"] < len(study["seeds"]):
        problems.append(
            f"study.adaptive.first_seeds: {adaptive['first_seeds']} is fewer than study.seeds "
            f"({len(study['seeds'])}), which every family's points are trained with"
        )
    if adaptive["max_seeds"] <= adaptive["first_seeds"]:
        problems.append(
            f"study.adaptive.max_seeds: {adaptive['max_seeds']} leaves no second wave after "
            f"first_seeds {adaptive['first_seeds']}"
        )
    return problems


GPU_BACKENDS = {"verl": ("vllm", "hf")}
"""Train backend -> the evaluate backends it pairs with; the tiny backend evaluates itself."""
TINY_ONLY_FAMILIES = ("mixtures", "model_sizes", "budget_conventions", "base_strength")
"""Families only the tiny backend can run: synthetic sources replay into its rollouts, its width
is the model size, it counts env steps and FLOPs exactly enough to cap them, and its bases are
the pretrain stage's (a GPU study's base is its LLM)."""


SOURCE_DOMAINS = ("toolworld",)
"""Domains the sources stage synthesises the mixtures family's data for (its generators are toolworld's)."""


def _tiny_domain_checks(cfg: Mapping[str, Any]) -> list[str]:
    """What the tiny backend needs of the study's domain: a compact view to act through, a
    pretraining pool where runs start from a base, synthetic sources where mixtures run."""
    from axisrl import domains

    name = cfg["domain"]
    domain = domains.load(name)
    if domain.compact_view is None:
        return [f"train.backend: tiny needs a compact view of the domain; {name} has none (use verl)"]
    problems = []
    families = cfg["study"]["families"]
    starts_from_base = cfg["train"]["init"] == "base" or families["base_strength"]["enabled"]
    if starts_from_base and domain.generate_pretrain_pool is None:
        problems.append(f"train.init: the {name} domain has no pretraining pool for a tiny base (use init: random)")
    if families["mixtures"]["enabled"] and name not in SOURCE_DOMAINS:
        problems.append(
            f"study.families.mixtures: synthetic sources exist for {', '.join(SOURCE_DOMAINS)} only, "
            f"not domain {name}; disable it"
        )
    return problems


def _backend_checks(cfg: Mapping[str, Any]) -> list[str]:
    train, evaluate = cfg["train"]["backend"], cfg["evaluate"]["backend"]
    if train == "tiny":
        problems = [] if evaluate == "tiny" else [f"evaluate.backend: {evaluate} needs train.backend verl"]
        return problems + _tiny_domain_checks(cfg)
    engines = GPU_BACKENDS[train]
    problems = (
        []
        if evaluate in engines
        else [f"evaluate.backend: train.backend {train} is evaluated with {' or '.join(engines)}, not {evaluate}"]
    )
    if not cfg["train"]["llm"]["model"]:
        problems.append(f"train.llm.model: train.backend {train} needs a local model directory")
    families = cfg["study"]["families"]
    problems += [
        f"study.families.{name}: the {train} backend cannot run it (tiny backend only); disable it"
        for name in TINY_ONLY_FAMILIES
        if families[name]["enabled"]
    ]
    if cfg["recipe"]["enabled"]:
        problems.append(f"recipe.enabled: the recipe needs model sizes, which one {train} study does not have")
    return problems


def validate_config(config: Mapping[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    """Return a validated copy of ``config`` with every default filled; raise ConfigError otherwise."""
    filled = _coerce_strings(copy.deepcopy(dict(config)), schema)
    errors = sorted(
        _default_filling_validator()(schema).iter_errors(filled), key=lambda e: list(map(str, e.absolute_path))
    )
    problems = [_error_line(e) for e in errors] or _cross_checks(filled)
    if problems:
        raise ConfigError("invalid config:\n  " + "\n  ".join(problems))
    return filled


def domain_configs(config: Mapping[str, Any], schema: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """A study across domains (``domains:``): each domain's own study config, in the order named:
    ``config`` with ``domain`` set to the name, no ``domains``, and the name's overlay merged in.
    Each is validated here, so a bad overlay is named before any job; a config without ``domains``
    has none."""
    outer = validate_config(config, schema)
    studies = {}
    for name, overlay in outer["domains"].items():
        study = {k: copy.deepcopy(v) for k, v in config.items() if k != "domains"}
        study["domain"] = name
        _deep_update(study, overlay)
        try:
            validate_config(study, schema)
        except ConfigError as error:
            raise ConfigError(f"domains.{name}: the study of this domain is {error}") from None
        studies[name] = study
    return studies


def read_overlay(path: str | Path) -> dict[str, Any]:
    """One config file's keys; a file that holds none (missing, not YAML, empty, a list) is a
    ConfigError naming it, where YAML's own error takes a dozen lines and names no remedy."""
    try:
        keys = load_yaml(path)
    except OSError as error:
        raise ConfigError(f"{path}: cannot read it ({error.strerror})") from None
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"{path}: not valid YAML{where}: {error.problem or error.context}") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML: {error}") from None
    if keys is None:
        raise ConfigError(f"{path}: is empty (a config file sets config keys, e.g. study:)")
    if not isinstance(keys, dict):
        raise ConfigError(f"{path}: holds a YAML {type(keys).__name__}, not a mapping of config keys (e.g. study:)")
    return keys


def load_config(*paths: str | Path, schema_path: str | Path) -> dict[str, Any]:
    """Merge YAML files (later ones overlay earlier ones, as ``--configfile`` does) and validate;
    a ConfigError names the files."""
    merged: dict[str, Any] = {}
    for path in paths:
        _deep_update(merged, read_overlay(path))
    try:
        return validate_config(merged, load_yaml(schema_path))
    except ConfigError as error:
        raise ConfigError(f"{' + '.join(map(str, paths))}: {error}") from None


def _deep_update(base: dict[str, Any], overlay: Mapping[str, Any]) -> None:
    for k, v in overlay.items():
        if isinstance(v, Mapping) and isinstance(base.get(k), dict):
            _deep_update(base[k], v)
        else:
            base[k] = copy.deepcopy(v)


def hashed_part(value: Any, schema: Mapping[str, Any]) -> Any:
    """Drop the options annotated ``x-hashed: false`` (speed-only settings), the blocks annotated
    ``x-hashed-when-enabled`` while they are off and the options annotated ``x-hashed-unless-default``
    at their default (a design added later: off, every key stays as it was)."""
    if isinstance(value, dict):
        props = schema.get("properties", {})
        return {k: hashed_part(v, props.get(k, {})) for k, v in value.items() if _hashed(v, props.get(k, {}))}
    return value


def _hashed(value: Any, schema: Mapping[str, Any]) -> bool:
    if not schema.get(UNHASHED, True):
        return False
    if schema.get(HASHED_UNLESS_DEFAULT) and value == schema.get("default"):
        return False
    return not (schema.get(HASHED_WHEN_ENABLED) and isinstance(value, dict) and not value.get("enabled"))


def project(config: Mapping[str, Any], paths: Sequence[str], strict: bool = True) -> dict[str, Any]:
    """The part of ``config`` under ``paths`` (dotted; ``*`` matches every key at its level), nested as
    in the config. ``strict``: a path the config lacks is an error (a registry typo); otherwise it is
    left out (a speed-only option is absent from the hashed config)."""
    out: dict[str, Any] = {}
    for path in paths:
        _copy_path(config, path.split("."), out, path, strict)
    return out


def _copy_path(source: Mapping[str, Any], parts: list[str], target: dict[str, Any], path: str, strict: bool) -> None:
    head, *rest = parts
    names = list(source) if head == "*" else [head]
    for name in names:
        if name not in source:
            if strict:
                raise KeyError(f"the config has no {path!r}")
            continue
        if rest:
            inner = target.get(name, {})
            _copy_path(source[name], rest, inner, path, strict)
            if inner:
                target[name] = inner
        else:
            target[name] = copy.deepcopy(source[name])


def value_at(config: Mapping[str, Any], path: str) -> Any:
    """The config's value at a dotted path."""
    value: Any = config
    for part in path.split("."):
        value = value[part]
    return value


def _normalise_numbers(value: Any) -> Any:
    """Integral floats hash like ints, so ``1.0`` in one file and ``1`` in another agree."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _normalise_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalise_numbers(v) for v in value]
    return value


def canonical_json(value: Any) -> str:
    return json.dumps(_normalise_numbers(value), sort_keys=True, separators=(",", ":"), ensure_ascii=True)


KEYED_UNDER_OLD_NAMES = {"train": ("settings", "budget")}
"""The sections of a stage's config whose renamed settings (``axisrl.schema.RENAMED``) its key hashes
under their old names, so that every key made before the renames stands (a finished study is not
retrained for a name)."""


def _key_config(stage: str, config: Mapping[str, Any]) -> Mapping[str, Any]:
    sections = KEYED_UNDER_OLD_NAMES.get(stage, ())
    if not any(isinstance(config.get(section), dict) for section in sections):
        return config
    old = {new: old for old, new in RENAMED.items()}
    return {
        name: {old.get(k, k): v for k, v in value.items()} if name in sections and isinstance(value, dict) else value
        for name, value in config.items()
    }


@dataclass(frozen=True)
class StageSpec:
    """What a stage's artifacts are keyed by: its config section and its upstream keys."""

    stage: str
    config: dict[str, Any]
    inputs: dict[str, str] = field(default_factory=dict)

    @functools.cached_property
    def key(self) -> str:
        """Computed once: the config it covers is never modified after the spec is made."""
        payload = {
            "stage": self.stage,
            "schema_version": SCHEMA_VERSION,
            "config": _key_config(self.stage, self.config),
            "inputs": self.inputs,
        }
        return hashlib.sha256(canonical_json(payload).encode()).hexdigest()[:KEY_LENGTH]

    def directory(self, results: str | Path = "results") -> Path:
        return Path(results) / self.stage / self.key
