# Input functions and targets. Every key, and what each stage's job is handed, comes from the stage
# registry (workflow/axisrl/stages/registry.py); every table and figure from axisrl/targets.py.
import functools

from snakemake.logging import logger

from axisrl.budget import expected_work
from axisrl.cluster_cost import allocation_shortfall
from axisrl.config import ConfigError, load_yaml, validate_config, value_at
from axisrl.plan import Design
from axisrl.scripting import Uncompared
from axisrl.stages import (
    STAGES,
    base_of,
    base_spec,
    episodes_stage,
    point_jobs,
    study,
    validation_base,
)
from axisrl.targets import (
    FIGURES,
    CURVE_FRAMES,
    LAW_FRAMES,
    PRICING_FRAMES,
    RECIPE_FRAMES,
    TABLES,
    VALIDATE_FRAMES,
    curves_on,
    study_spec,
    study_targets,
)

RESULTS = "results"
SCHEMA = load_yaml(f"{workflow.basedir}/config/schema.yaml")

try:
    CONFIG = validate_config(config, SCHEMA)
    STUDY = study(CONFIG, SCHEMA)
except ConfigError as error:
    raise WorkflowError(str(error)) from None

TRAIN_BACKEND = CONFIG["train"]["backend"]
GPU_RESOURCES = CONFIG["resources"]
TRAIN = {point.train.key: point for point in STUDY.points.values()}
PROGRESS = {"domain": CONFIG["domain"], "planned": {key: len(point.seeds) for key, point in TRAIN.items()}}
"""What each tiny train job counts when it ends, for its progress line (the plan's runs done of those planned)."""


def bases_of(points):
    """The pretrain key of each base these points' runs start from (its key is in their train
    specs' inputs): (policy width, strength)."""
    return {
        p.train.inputs["pretrain"]: (p.design.width, base_of(p.design, CONFIG))
        for p in points
        if "pretrain" in p.train.inputs
    }


def planned_bases():
    """The plan's bases, and the recipe's validation run's (known before the recipe: made while
    the sweeps train, not on the study's last stretch after the recipe)."""
    bases = bases_of(STUDY.points.values())
    validation = validation_base(CONFIG)
    if validation is not None:
        bases[base_spec(*validation, STUDY.hashed, STUDY.specs).key] = validation
    return bases


BASES = planned_bases()
EVALUATE = {point.evaluate.key: point for point in STUDY.points.values() if point.evaluate}


def warn_of_time_limits():
    """Warn, once per invocation, of planned runs longer than one allocation (``axisrl.cluster_cost``);
    not in the cluster jobs, which parse this file too."""
    shortfall = workflow.is_main_process and allocation_shortfall(CONFIG)
    if shortfall:
        logger.warning(shortfall.message())


warn_of_time_limits()


def stage_dir(stage):
    """results/<stage>/<key>: where a stage's artifacts for the current config live."""
    return f"{RESULTS}/{stage}/{STUDY.specs[stage].key}"


def stage_log(stage):
    return f"{RESULTS}/logs/{stage}/{STUDY.specs[stage].key}.log"


def stage_params(stage):
    """A study-level stage's job: its spec and the settings the registry says it reads."""
    return {"spec": STUDY.specs[stage], "settings": Uncompared(STAGES[stage].settings(CONFIG))}


PLAN_RUNS = f"{stage_dir('plan')}/runs.parquet"
"""Rules that fan in over thousands of jobs name their inputs by path, not by ``rules.x.output``:
Snakemake hashes every input list once per rule-reference it holds, which is quadratic at 5,000 runs."""
COLLECT_DIR = stage_dir("collect")
STUDY_SPEC = study_spec(STUDY)
STUDY_DIR = str(STUDY_SPEC.directory(RESULTS))
"""results/studies/<key>: the study's own outputs, its tables and figures, keyed by what they are made
from (``axisrl.targets.study_spec``). Another study writes into another folder, so no study reads or
reports another's, and going back to one already run finds its outputs done."""
STUDY_LOGS = f"{RESULTS}/logs/{STUDY_SPEC.stage}/{STUDY_SPEC.key}"
EPISODES_STAGE = episodes_stage(TRAIN_BACKEND)
CURVES = curves_on(CONFIG)
"""Whether the tiny train jobs draw learning curves on V (``learning_curves.points``) and the
curve_fits stage fits them."""
CURVE_OUTPUT = {"curves": f"{RESULTS}/train/{{train_key}}/curves.parquet"} if CURVES else {}


wildcard_constraints:
    train_key=r"[0-9a-f]{12}",
    pretrain_key=r"[0-9a-f]{12}",
    eval_key=r"[0-9a-f]{12}",
    seed=r"\d+",


def strategy_points():
    """The runs the recipe pre-registered, as jobs (known once the recipe checkpoint has run):
    train key -> PointJobs, through the same keys as the plan's points."""
    return _strategy_points(checkpoints.recipe.get().output.strategies)


@functools.cache
def _strategy_points(path):
    import polars as pl

    fields = list(Design.__dataclass_fields__)
    designs = pl.read_parquet(path).unique("point_key", maintain_order=True).select(fields)
    jobs = [
        point_jobs(Design(**row), CONFIG["study"]["seeds"], STUDY.hashed, STUDY.specs)
        for row in designs.iter_rows(named=True)
    ]
    return {point.train.key: point for point in jobs}


ADAPTIVE = CONFIG["study"]["adaptive"]["enabled"]
FIRST_WAVE = [STUDY.points[job] for job in STUDY.first_wave]


def second_wave_points():
    """An adaptive study's second-wave runs, as jobs of one seed each (known once the allocate
    checkpoint has run; none in a fixed design): train key -> PointJobs."""
    if not ADAPTIVE:
        return {}
    return _second_wave_points(checkpoints.allocate.get().output.second_wave)


@functools.cache
def _second_wave_points(path):
    import polars as pl

    fields = list(Design.__dataclass_fields__)
    jobs = [
        point_jobs(Design(**{f: row[f] for f in fields}), [row["seed"]], STUDY.hashed, STUDY.specs)
        for row in pl.read_parquet(path).iter_rows(named=True)
    ]
    return {point.train.key: point for point in jobs}


def point_of_train(key):
    """A plan point, or else a second-wave run, or else a run the recipe planned (the recipe
    reads the second wave, so its checkpoint is asked last)."""
    if key in TRAIN:
        return TRAIN[key]
    second = second_wave_points()
    return second[key] if key in second else strategy_points()[key]


def point_of_evaluate(key):
    if key in EVALUATE:
        return EVALUATE[key]
    second = {p.evaluate.key: p for p in second_wave_points().values()}
    return second[key] if key in second else {p.evaluate.key: p for p in strategy_points().values()}[key]


def episodes_path(point):
    """Where a point's held-out episodes are written (see ``EPISODES_STAGE``)."""
    key = (point.evaluate or point.train).key
    return f"{RESULTS}/{EPISODES_STAGE}/{key}/episodes.parquet"


def train_spec(wildcards):
    return point_of_train(wildcards.train_key).train


def training_pool(wildcards):
    """The dedup-stage env and task files a grid point draws from (the placebo pool for the
    placebo level of Table 7, the training pool otherwise; a mixture design also reads the
    synthetic sources) and the held-out pool it is evaluated on."""
    design = point_of_train(wildcards.train_key).design
    prefix = "placebo_" if design.env_level == "placebo" else ""
    files = {
        "envs": f"{stage_dir('dedup')}/{prefix}envs.parquet",
        "tasks": f"{stage_dir('dedup')}/{prefix}tasks.parquet",
        "heldout_envs": f"{stage_dir('dedup')}/heldout_envs.parquet",
        "heldout_tasks": f"{stage_dir('dedup')}/heldout_tasks.parquet",
    }
    if design.source != "real":
        files.update(
            synthetic_envs=f"{stage_dir('dedup_sources')}/synthetic_envs.parquet",
            synthetic_tasks=f"{stage_dir('dedup_sources')}/synthetic_tasks.parquet",
            synthetic_trajectories=f"{stage_dir('sources')}/synthetic_trajectories.parquet",
        )
    base = point_of_train(wildcards.train_key).train.inputs.get("pretrain")
    if base is not None:
        files.update(base_files(base))
    return files


def base_files(key):
    """A base's weights and its held-out episodes (what a run starting from it reads)."""
    return {
        "base": f"{RESULTS}/pretrain/{key}/base.pt",
        "base_episodes": f"{RESULTS}/pretrain/{key}/episodes.parquet",
    }


def base_of_key(key):
    """(width, strength) of a base: the plan's, or else one a strategy run of the recipe starts from
    (the recipe chooses widths of its own)."""
    return BASES[key] if key in BASES else bases_of(strategy_points().values())[key]


def pretrain_spec(wildcards):
    width, strength = base_of_key(wildcards.pretrain_key)
    return base_spec(width, strength, STUDY.hashed, STUDY.specs)


def pretrain_settings(wildcards):
    width, strength = base_of_key(wildcards.pretrain_key)
    return Uncompared(STAGES["pretrain"].settings(CONFIG, width=width, strength=strength))


def train_work(point):
    return expected_work(point.design.as_dict(), CONFIG["train"], len(point.seeds))


LONGEST_TRAIN_WORK = max(map(train_work, TRAIN.values()), default=1.0)


def train_priority(wildcards):
    """Longest tiny train jobs first (0-9, below the pools and bases they wait on): a long job that
    starts last runs alone while the other cores idle."""
    return min(9.0, 9.0 * train_work(point_of_train(wildcards.train_key)) / LONGEST_TRAIN_WORK)


def train_settings(wildcards):
    """A grid point's train settings; a GPU job trains one of its seeds (a verl run takes a node for days)."""
    point = point_of_train(wildcards.train_key)
    settings = STAGES["train"].settings(CONFIG, design=point.design, seeds=point.seeds)
    if TRAIN_BACKEND != "tiny":
        seed = int(wildcards.seed)
        settings["seeds"] = [seed]
        settings["run_keys"] = [point.run_keys[point.seeds.index(seed)]]
    else:
        settings["progress"] = PROGRESS
    return Uncompared(settings)


def evaluate_spec(wildcards):
    return point_of_evaluate(wildcards.eval_key).evaluate


def evaluate_settings(wildcards):
    point = point_of_evaluate(wildcards.eval_key)
    return Uncompared(STAGES["evaluate"].settings(CONFIG, design=point.design, seeds=point.seeds))


def models_of(wildcards):
    """Every seed's merged model, in seed order."""
    point = point_of_evaluate(wildcards.eval_key)
    return [f"{RESULTS}/train/{point.train.key}/seed{seed}/model" for seed in point.seeds]


def train_runs_of(point):
    """The runs files of a point's train job (tiny), or of its per-seed jobs (verl)."""
    if TRAIN_BACKEND == "tiny":
        return [f"{RESULTS}/train/{point.train.key}/runs.parquet"]
    return [f"{RESULTS}/train/{point.train.key}/seed{seed}/runs.parquet" for seed in point.seeds]


def collect_inputs(wildcards):
    """The plan and every run's files: the plan's points and, in an adaptive study, the second
    wave the allocation placed (with its rows of the plan)."""
    points = [*STUDY.points.values(), *second_wave_points().values()]
    inputs = {
        "plan": PLAN_RUNS,
        "train_runs": [path for point in points for path in train_runs_of(point)],
        "episodes": [episodes_path(point) for point in points],
    }
    if CURVES:
        inputs["curves"] = [f"{RESULTS}/train/{point.train.key}/curves.parquet" for point in points]
    if ADAPTIVE:
        inputs["second_wave"] = checkpoints.allocate.get().output.second_wave
    return inputs


def validate_inputs(wildcards):
    """The recipe's law, cost model and strategies, and every strategy run's training and held-out episodes."""
    recipe = checkpoints.recipe.get().output
    points = strategy_points().values()
    return {
        "strategies": recipe.strategies,
        "law": recipe.law,
        "cost": recipe.cost,
        "train_runs": [path for p in points for path in train_runs_of(p)],
        "episodes": [episodes_path(p) for p in points],
    }


def target_inputs(target):
    """The frames a table or figure is made from (the optional ones when the recipe is on)."""
    return {
        name: f"{stage_dir(stage)}/{frame}.parquet"
        for name, (stage, frame) in target.frames.items()
        if name not in target.optional or CONFIG["recipe"]["enabled"]
    }


def target_params(name, target):
    """A table or figure job: no key of its own (its folder's, ``STUDY_DIR``, covers what it reads),
    its name, the config values it reads and the notes of the reduced families it is drawn from."""
    options = {option: value_at(CONFIG, path) for option, path in target.options.items()}
    reduced = {
        item["family"]: item["note"] for item in CONFIG["report"]["reduced"] if item["family"] in target.families
    }
    return {"spec": None, "settings": Uncompared({"name": name, "options": options, "reduced": reduced})}


def final_outputs():
    """Every target of the study: the collected runs, every table and figure (the recipe's when it
    is on) and the catalog."""
    targets = study_targets(CONFIG["recipe"]["enabled"], CURVES)
    return [
        f"{COLLECT_DIR}/runs.parquet",
        *(f"{STUDY_DIR}/tables/{name}.md" for name in TABLES if name in targets),
        *(f"{STUDY_DIR}/figures/{name}.{ext}" for name in FIGURES if name in targets for ext in ("png", "pdf")),
        f"{stage_dir('catalog')}/catalog.parquet",
        *(base_files(key)["base"] for key in BASES),
    ]
