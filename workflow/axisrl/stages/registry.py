"""The stage registry: for each stage, the config it reads, the stages it hangs off and what runs it.

A stage ``reads`` config paths (``"dedup"``, ``"study.seeds"``, ``"sources.methods.*.unit_cost"``).
Its job is handed the config under those paths (its ``settings``), and its key hashes the same paths
of the config with the speed-only options (``x-hashed: false``) removed: what a stage reads is what
its key covers, by construction. Where a job needs the values in another shape (one grid point's
resolved training settings, say) ``derive`` builds them from what was read, and the key hashes what
``derive`` returns, so the same holds.

Nothing here imports a stage's code: the workflow builds every key at parse time, and only the job
imports its ``run`` function (``"module:function"`` under ``axisrl.stages``).
"""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from axisrl.budget import TRAIN_KEYS, training_budget
from axisrl.config import StageSpec, domain_configs, hashed_part, project, validate_config
from axisrl.plan import Design, backend_settings, check_designs, plan_designs, run_key, seed_batches


def resolve(name: str) -> Callable[..., Any]:
    """The function a ``module:function`` name stands for (imported only when asked for)."""
    module, function = name.split(":")
    return getattr(importlib.import_module(module), function)


@dataclass(frozen=True)
class Stage:
    """One stage: ``reads`` (config paths), ``upstream`` (the stages whose keys its key holds),
    ``run`` (``module:function`` under ``axisrl.stages``, or train backend -> that where they differ),
    ``derive`` (settings from what it read, and from a grid point for the per-point stages) and
    ``note`` (what one key stands for, when it is not the whole study)."""

    name: str
    reads: tuple[str, ...]
    upstream: tuple[str, ...]
    run: str | Mapping[str, str]
    derive: Callable[..., dict[str, Any]] | None = None
    note: str = ""

    def settings(self, config: Mapping[str, Any], **job: Any) -> dict[str, Any]:
        """What the job is handed: the validated config under ``reads`` (through ``derive``)."""
        read = project(config, self.reads)
        return self.derive(read, **job) if self.derive else read

    def spec(self, hashed: Mapping[str, Any], upstream: Mapping[str, str], **job: Any) -> StageSpec:
        """The key of these settings: the same paths of the hashed config, and the upstream keys."""
        unknown = sorted(set(upstream) - set(self.upstream))
        if unknown:
            raise ValueError(f"stage {self.name} does not hang off {unknown}")
        read = project(hashed, self.reads, strict=False)
        return StageSpec(self.name, self.derive(read, **job) if self.derive else read, dict(upstream))

    def target(self, settings: Mapping[str, Any]) -> str:
        """``module:function`` of the job's code (for the train backend in ``settings`` where it matters)."""
        run = self.run if isinstance(self.run, str) else self.run[settings["backend"]]
        return f"axisrl.stages.{run}"

    def targets(self) -> list[str]:
        """Every function that can run this stage (one per train backend where they differ)."""
        runs = [self.run] if isinstance(self.run, str) else list(self.run.values())
        return [f"axisrl.stages.{run}" for run in runs]


def _synthesize(read: Mapping[str, Any]) -> dict[str, Any]:
    """A domain's own options only: changing mathcode's generators never regenerates toolworld."""
    domain = read["domain"]
    return {
        "domain": domain,
        "synthesize": {k: v for k, v in read["synthesize"].items() if k != "mathcode" or domain == "mathcode"},
    }


def _sources(read: Mapping[str, Any]) -> dict[str, Any]:
    mixtures = read["study"]["families"]["mixtures"]
    return {"sources": read["sources"], "methods": mixtures["methods"], "common_core": mixtures["common_core"]}


def episodes_stage(backend: str) -> str:
    """The stage that writes held-out episodes: the tiny backend evaluates in its train job, the GPU
    backends in an evaluate job of their own."""
    return "train" if backend == "tiny" else "evaluate"


def _train(read: Mapping[str, Any], design: Design, seeds: Sequence[int]) -> dict[str, Any]:
    """One grid point's runs: the training settings resolved for its design (an option the design
    does not read is not here, so it never retrains it), its budget, seeds and evaluation."""
    train, fields = read["train"], design.keyed()
    budget = training_budget(fields, train)
    settings: dict[str, Any] = {
        "backend": train["backend"],
        "domain": read["domain"],
        "design": fields,
        "settings": backend_settings(train, fields),
        "budget": {
            "budget_visits": budget.visits,
            "budget_rollouts": budget.rollouts,
            "visits_per_update": budget.visits_per_update,
            "token_cap": budget.token_cap,
            "flop_cap": budget.flop_cap,
        },
        "seeds": list(seeds),
        "run_keys": [run_key(design.point_key, seed) for seed in seeds],
    }
    if design.source != "real":
        settings["sources"] = read["sources"]
    if train["backend"] == "tiny":
        settings["evaluate"] = {"backend": read["evaluate"]["backend"], "seed": read["evaluate"]["seed"]}
        start = design.start(train["init"])
        if start != "random":  # absent for random init, so those keys are the keys of the study before bases
            settings["init"] = start
        points = read["learning_curves"]["points"]
        if points:  # absent without curves, so those keys are the keys of the study before curves
            settings["curve_points"] = points
    else:
        settings["llm"] = train["llm"]
        if "resources" in read:  # speed only: in the job's settings, never in its key
            settings["resources"] = read["resources"]["train"]
    return settings


def base_of(design: Design, config: Mapping[str, Any]) -> str | None:
    """The base a design's runs start from (``base`` or ``strong``), None for random init or where
    the pretrain stage makes no base (a GPU backend's base is its model)."""
    return _base_from(design.start(config["train"]["init"]), config)


def _base_from(start: str, config: Mapping[str, Any]) -> str | None:
    return start if config["train"]["backend"] == "tiny" and start != "random" else None


def validation_base(config: Mapping[str, Any]) -> tuple[int, str] | None:
    """(width, strength) of the base the recipe's validation run starts from, known before the
    recipe runs (its width is ``recipe.validation.width``, its start ``train.init``), so that the
    workflow makes it while the sweeps train instead of after the recipe; None without one."""
    strength = _base_from(config["train"]["init"], config) if config["recipe"]["enabled"] else None
    return None if strength is None else (config["recipe"]["validation"]["width"], strength)


BASE_TARGETS = {"base": "base_success", "strong": "strong_success"}
"""The pretrain option that states each base's target V success."""


def _pretrain(read: Mapping[str, Any], width: int, strength: str) -> dict[str, Any]:
    """One base: the pretraining pool's sizes (the synthesize section's world shapes), behaviour
    cloning's settings with its strength's target (``base_success``; the other target is not read),
    the policy it pretrains (width, leak) and the seed of its V evaluation."""
    pretrain = {k: v for k, v in read["pretrain"].items() if k not in BASE_TARGETS.values()}
    return {
        "domain": read["domain"],
        "synthesize": {k: v for k, v in read["synthesize"].items() if k in ("tables", "rows_per_table", "max_steps")},
        "pretrain": {**pretrain, "base_success": read["pretrain"][BASE_TARGETS[strength]]},
        "width": width,
        "leak_primitive_role": read["train"]["leak_primitive_role"],
        "evaluate_seed": read["evaluate"]["seed"],
    }


def _evaluate(read: Mapping[str, Any], design: Design, seeds: Sequence[int]) -> dict[str, Any]:
    """Of ``evaluate``, the backend, the seed and that backend's own block: another engine's
    settings never re-evaluate anything."""
    evaluate = read["evaluate"]
    backend = evaluate["backend"]
    return {
        "domain": read["domain"],
        "evaluate": {"backend": backend, "seed": evaluate["seed"], backend: evaluate[backend]},
        "llm": read["train"]["llm"],
        "seeds": list(seeds),
        "run_keys": [run_key(design.point_key, seed) for seed in seeds],
    }


def _collect(read: Mapping[str, Any]) -> dict[str, Any]:
    return {"episodes_stage": episodes_stage(read["train"]["backend"])}


STAGES: dict[str, Stage] = {
    stage.name: stage
    for stage in (
        Stage(
            "synthesize",
            reads=("domain", "synthesize"),
            upstream=(),
            run="pools:synthesize",
            derive=_synthesize,
            note="`synthesize.mathcode` only when `domain` is mathcode",
        ),
        Stage(
            "embed",
            reads=("dedup.embedding",),
            upstream=("synthesize",),
            run="dedup:embed",
            derive=lambda read: read["dedup"]["embedding"],
        ),
        Stage("dedup", reads=("domain", "dedup"), upstream=("synthesize", "embed"), run="dedup:dedup"),
        Stage(
            "sources",
            reads=("sources", "study.families.mixtures.methods", "study.families.mixtures.common_core"),
            upstream=("synthesize",),
            run="pools:sources",
            derive=_sources,
        ),
        Stage("dedup_sources", reads=("dedup",), upstream=("sources", "dedup"), run="dedup:dedup_sources"),
        Stage(
            "pretrain",
            reads=(
                "domain",
                "synthesize.tables",
                "synthesize.rows_per_table",
                "synthesize.max_steps",
                "pretrain",
                "train.leak_primitive_role",
                "evaluate.seed",
            ),
            upstream=("dedup",),
            run="pretrain:pretrain",
            derive=_pretrain,
            note="tiny backend only: one key per policy width and base strength a design starts from (`train.init`, "
            "or the `base_strength` family's); of `base_success` and `strong_success` only its strength's target",
        ),
        Stage("plan", reads=("domain", "study"), upstream=(), run="collect:plan"),
        Stage(
            "train",
            reads=("domain", "train", "evaluate", "sources", "resources", "learning_curves.points"),
            upstream=("dedup", "dedup_sources", "pretrain"),
            run={"tiny": "train:train", "verl": "gpu:train_verl"},
            derive=_train,
            note="one key per grid point and seed batch (the tiny backend trains and evaluates its seeds in one job, "
            "verl one job per seed); `train` options the design does not read are left out, and so are `evaluate` "
            "options but `backend` and `seed` with the tiny backend; `sources` and `dedup_sources` for a mixture "
            "design only; `pretrain` (the base of the point's width and strength) and `init` unless it starts "
            "from random weights; `learning_curves.points` only when curves are on (tiny); `resources` is speed only",
        ),
        Stage(
            "evaluate",
            reads=("domain", "evaluate", "train.llm"),
            upstream=("train",),
            run="gpu:evaluate",
            derive=_evaluate,
            note="GPU backends only: one key and one job per grid point; of `evaluate` only `backend`, `seed` "
            "and the backend's own block (`evaluate.vllm` or `evaluate.hf`)",
        ),
        Stage(
            "allocate",
            reads=("domain", "study", "train", "resources"),
            upstream=("plan", "train"),
            run="adaptive:allocate",
            derive=lambda read: {**read, "episodes_stage": episodes_stage(read["train"]["backend"])},
            note="a checkpoint, only in an adaptive study (`study.adaptive.enabled`): its `train` key is a digest of "
            "the first wave's train keys; the second-wave runs it places are train jobs of one seed each",
        ),
        Stage(
            "collect",
            reads=("train.backend",),
            upstream=("plan", "train", "allocate"),
            run="collect:collect",
            derive=_collect,
            note="its `train` key is a digest of every point's train (or evaluate) key; `allocate` in an adaptive "
            "study (its second wave follows from that key)",
        ),
        Stage("laws", reads=("laws",), upstream=("collect",), run="analysis:laws"),
        Stage(
            "curve_fits",
            reads=("learning_curves.n_boot", "learning_curves.seed"),
            upstream=("collect",),
            run="analysis:curve_fits",
            derive=lambda read: read["learning_curves"],
            note="only when `learning_curves.points` is above 0: the saturating fits of the runs' curves on V",
        ),
        Stage(
            "pricing",
            reads=("pricing", "study", "sources.methods.*.unit_cost"),
            upstream=("collect",),
            run="analysis:pricing",
        ),
        Stage(
            "recipe",
            reads=("recipe", "domain", "study.seeds", *(f"train.{key}" for key in TRAIN_KEYS["charged_flops"])),
            upstream=("collect", "dedup"),
            run="analysis:recipe",
            note="a checkpoint: the strategy runs it plans are train jobs like any grid point's",
        ),
        Stage(
            "validate",
            reads=("recipe", "study.seeds", "train.backend"),
            upstream=("recipe",),
            run="analysis:validate",
            note="reads the recipe's strategy runs too",
        ),
        Stage(
            "catalog",
            reads=(),
            upstream=("synthesize", "embed", "dedup", "sources", "dedup_sources", "collect", "laws", "pricing"),
            run="report:catalog",
            note="lists every artifact under `results/`, all keys",
        ),
    )
}
"""Every keyed stage, upstream first. The report targets (tables, figures) are in ``axisrl.targets``."""


class PointJobs(NamedTuple):
    """The keys of one grid point (all its seeds, in one train job with the tiny backend). The GPU
    backends evaluate in a job of their own (vLLM does not install beside verl), keyed by ``evaluate``."""

    design: Design
    seeds: tuple[int, ...]
    run_keys: tuple[str, ...]
    train: StageSpec
    evaluate: StageSpec | None


class Study(NamedTuple):
    """Everything the workflow keys at parse time: the study-level stages' specs by name, the grid
    points' jobs (by point key, a second seed batch as ``<point key>+1``) and the hashed config they
    were keyed from (the recipe's strategy runs are keyed from it later)."""

    specs: dict[str, StageSpec]
    points: dict[str, PointJobs]
    hashed: dict[str, Any]
    first_wave: tuple[str, ...] = ()
    """An adaptive study's first wave: the jobs (keys of ``points``) of the axis sweeps' points."""


def point_jobs(
    design: Design, seeds: Sequence[int], hashed: Mapping[str, Any], specs: Mapping[str, StageSpec]
) -> PointJobs:
    """The train (and, for the GPU backends, evaluate) specs of one design: a plan's grid point or a
    run the recipe planned, so a recipe design that a family already holds is the same job."""
    upstream = {"dedup": specs["dedup"].key}
    if design.source != "real":  # only mixture designs read the synthetic sources
        upstream["dedup_sources"] = specs["dedup_sources"].key
    strength = base_of(design, hashed)
    if strength is not None:
        upstream["pretrain"] = base_spec(design.width, strength, hashed, specs).key
    train = STAGES["train"].spec(hashed, upstream, design=design, seeds=seeds)
    evaluate = (
        None
        if hashed["train"]["backend"] == "tiny"
        else STAGES["evaluate"].spec(hashed, {"train": train.key}, design=design, seeds=seeds)
    )
    return PointJobs(design, tuple(seeds), tuple(run_key(design.point_key, s) for s in seeds), train, evaluate)


def base_spec(width: int, strength: str, hashed: Mapping[str, Any], specs: Mapping[str, StageSpec]) -> StageSpec:
    """The pretrain spec of the base of policy width ``width`` and ``strength`` (``base``, ``strong``)."""
    return STAGES["pretrain"].spec(hashed, {"dedup": specs["dedup"].key}, width=width, strength=strength)


def study(config: Mapping[str, Any], schema: Mapping[str, Any]) -> Study:
    """Every key of a validated config. Raises ConfigError for designs the budget or pool cannot honour."""
    hashed = hashed_part(dict(config), schema)
    specs: dict[str, StageSpec] = {}

    def keyed(name: str, **extra: str) -> None:
        stage = STAGES[name]
        upstream = {u: specs[u].key for u in stage.upstream if u in specs}
        specs[name] = stage.spec(hashed, {**upstream, **extra})

    for name in ("synthesize", "embed", "dedup", "sources", "dedup_sources", "plan"):
        keyed(name)
    designs = plan_designs(config["study"])
    check_designs(designs, config["train"])
    points, swept = {}, []
    for point_key, planned in designs.items():
        for batch, seeds in enumerate(seed_batches(config["study"], planned)):
            job = point_key if batch == 0 else f"{point_key}+{batch}"
            points[job] = point_jobs(planned.design, seeds, hashed, specs)
            if "axis_sweeps" in planned.families:
                swept.append(job)
    first_wave: tuple[str, ...] = ()
    if config["study"]["adaptive"]["enabled"]:
        first_wave = tuple(swept)
        keyed("allocate", train=_digest(points[job] for job in first_wave))
    keyed("collect", train=_digest(points.values()))
    for name in ("laws", "curve_fits", "pricing", "recipe", "validate", "catalog"):
        keyed(name)
    return Study(specs, points, hashed, first_wave)


def train_keys(config: Mapping[str, Any], schema: Mapping[str, Any]) -> frozenset[str]:
    """The train stage's keys of every run the study ``config`` plans (each domain's in a study
    across domains), as ``study`` keys Snakemake's jobs: a measured train job is this study's when
    its key is one. A study Snakemake refuses (a design the pool or the budget cannot honour) raises
    the same ConfigError here."""
    configs = [validate_config(c, schema) for c in domain_configs(config, schema).values()] or [config]
    return frozenset(point.train.key for c in configs for point in study(c, schema).points.values())


def _digest(points: Iterable[PointJobs]) -> str:
    """One key for many points' jobs: their train (or evaluate) keys, sorted, hashed."""
    return hashlib.sha256(",".join(sorted((p.evaluate or p.train).key for p in points)).encode()).hexdigest()[:12]


def key_table() -> str:
    """The key table of config/README.md, from the registry (a test holds the two together)."""
    rows = ["| stage | reads (and its key hashes) | upstream | |", "|---|---|---|---|"]
    for stage in STAGES.values():
        reads = ", ".join(f"`{path}`" for path in stage.reads) or "nothing of its own"
        upstream = ", ".join(stage.upstream) or "none"
        rows.append(f"| `{stage.name}` | {reads} | {upstream} | {stage.note} |")
    return "\n".join(rows)


__all__ = [
    "STAGES",
    "PointJobs",
    "Stage",
    "Study",
    "base_of",
    "base_spec",
    "episodes_stage",
    "key_table",
    "point_jobs",
    "study",
    "train_keys",
]
