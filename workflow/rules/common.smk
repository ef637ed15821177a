# Config validation, stage keys and paths: everything the rules look up, computed once at parse time.
import functools

from axisrl.budget import TRAIN_KEYS, visits_per_run
from axisrl.config import (
    ConfigError,
    StageSpec,
    hashed_part,
    load_yaml,
    stage_specs,
    validate_config,
)
from axisrl.plan import Design, point_jobs, pricing_points, study_jobs
from axisrl.targets import (
    LAW_FRAMES,
    LAW_TABLES,
    PRICING_FRAMES,
    PRICING_TABLES,
    RECIPE_FRAMES,
    RECIPE_TABLES,
    TABLE9_TITLE,
    VALIDATE_FRAMES,
)

RESULTS = "results"
SCHEMA = load_yaml(f"{workflow.basedir}/config/schema.yaml")

try:
    CONFIG = validate_config(config, SCHEMA)
    SPECS = stage_specs(CONFIG, SCHEMA)
    PLAN_SPEC, PLAN_ROWS, POINTS, COLLECT_SPEC = study_jobs(
        CONFIG,
        hashed_part(CONFIG, SCHEMA),
        SPECS["dedup"].key,
        SPECS["dedup_sources"].key,
    )
except ConfigError as error:
    raise WorkflowError(str(error)) from None

PLAN_RUNS = f"{RESULTS}/plan/{PLAN_SPEC.key}/runs.parquet"
"""Rules that fan in over thousands of jobs name their inputs by path, not by ``rules.x.output``:
Snakemake hashes every input list once per rule-reference it holds, which is quadratic at 5,000 runs."""
COLLECT_DIR = f"{RESULTS}/collect/{COLLECT_SPEC.key}"
LAWS_SPEC = StageSpec(
    "laws", hashed_part(CONFIG, SCHEMA)["laws"], {"collect": COLLECT_SPEC.key}
)
LAWS_DIR = f"{RESULTS}/laws/{LAWS_SPEC.key}"
PRICING_POINTS = [
    {
        "point_key": point.design.point_key,
        "source": point.source,
        "axis": point.axis,
        "real_amount": point.real_amount,
        "role": point.role,
        "ratio": point.ratio,
        "multiple": point.multiple,
    }
    for point in pricing_points(CONFIG["study"])
]
UNIT_COSTS = {
    method: values["unit_cost"]
    for method, values in CONFIG["sources"]["methods"].items()
}
PRICING_SPEC = StageSpec(
    "pricing",
    {"pricing": hashed_part(CONFIG, SCHEMA)["pricing"], "unit_costs": UNIT_COSTS},
    {"collect": COLLECT_SPEC.key},
)
PRICING_DIR = f"{RESULTS}/pricing/{PRICING_SPEC.key}"
RECIPE_TRAIN = {key: CONFIG["train"][key] for key in TRAIN_KEYS["charged_flops"]}
"""The training-budget keys the recipe reads: its cost model's visits per run and its strategy runs' budgets."""
RECIPE_SPEC = StageSpec(
    "recipe",
    {
        "recipe": hashed_part(CONFIG, SCHEMA)["recipe"],
        "domain": CONFIG["domain"],
        "seeds": CONFIG["study"]["seeds"],
        "train": RECIPE_TRAIN,
    },
    {"collect": COLLECT_SPEC.key},
)
RECIPE_DIR = f"{RESULTS}/recipe/{RECIPE_SPEC.key}"
VALIDATE_SPEC = StageSpec("validate", {}, {"recipe": RECIPE_SPEC.key})
VALIDATE_DIR = f"{RESULTS}/validate/{VALIDATE_SPEC.key}"
TRAIN = {point.train.key: point for point in POINTS.values()}
EVALUATE = {point.evaluate.key: point for point in POINTS.values() if point.evaluate}
TRAIN_BACKEND = CONFIG["train"]["backend"]
EPISODES_STAGE = "train" if TRAIN_BACKEND == "tiny" else "evaluate"
"""The tiny backend evaluates in its train job; the GPU backends in an evaluate job of their own."""
GPU_RESOURCES = CONFIG["resources"]
CATALOG_SPEC = StageSpec(
    "catalog",
    {},
    {
        "collect": COLLECT_SPEC.key,
        "laws": LAWS_SPEC.key,
        "pricing": PRICING_SPEC.key,
        **{s: v.key for s, v in SPECS.items()},
    },
)


def stage_dir(stage):
    """results/<stage>/<key>: where a stage's artifacts for the current config live."""
    return f"{RESULTS}/{stage}/{SPECS[stage].key}"


def stage_log(stage):
    return f"{RESULTS}/logs/{stage}/{SPECS[stage].key}.log"


wildcard_constraints:
    train_key=r"[0-9a-f]{12}",
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
    designs = (
        pl.read_parquet(path).unique("point_key", maintain_order=True).select(fields)
    )
    jobs = [
        point_jobs(
            Design(**row),
            CONFIG["study"]["seeds"],
            hashed_part(CONFIG, SCHEMA),
            SPECS["dedup"].key,
            SPECS["dedup_sources"].key,
        )
        for row in designs.iter_rows(named=True)
    ]
    return {point.train.key: point for point in jobs}


def point_of_train(key):
    """A plan point, or else a run the recipe planned."""
    return TRAIN[key] if key in TRAIN else strategy_points()[key]


def point_of_evaluate(key):
    if key in EVALUATE:
        return EVALUATE[key]
    return {p.evaluate.key: p for p in strategy_points().values()}[key]


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
    return files


def train_params(wildcards):
    """What a train job reads: the tiny one also evaluates, a verl one sizes itself to its node."""
    point = point_of_train(wildcards.train_key)
    settings = {
        "train": CONFIG["train"],
        "domain": CONFIG["domain"],
        "sources": CONFIG["sources"] if point.design.source != "real" else None,
        "design": point.design.as_dict(),
        "seeds": list(point.seeds),
        "run_keys": list(point.run_keys),
    }
    if TRAIN_BACKEND == "tiny":
        settings["evaluate"] = CONFIG["evaluate"]
    else:  # one job per seed: a verl run takes a node for days
        seed = int(wildcards.seed)
        settings["seeds"] = [seed]
        settings["run_keys"] = [point.run_keys[point.seeds.index(seed)]]
        settings["resources"] = GPU_RESOURCES["train"]
    return settings


def evaluate_spec(wildcards):
    return point_of_evaluate(wildcards.eval_key).evaluate


def evaluate_params(wildcards):
    point = point_of_evaluate(wildcards.eval_key)
    return {
        "evaluate": CONFIG["evaluate"],
        "llm": CONFIG["train"]["llm"],
        "domain": CONFIG["domain"],
        "seeds": list(point.seeds),
        "run_keys": list(point.run_keys),
    }


def models_of(wildcards):
    """Every seed's merged model, in seed order."""
    point = point_of_evaluate(wildcards.eval_key)
    return [
        f"{RESULTS}/train/{point.train.key}/seed{seed}/model" for seed in point.seeds
    ]


def train_runs_of(point):
    """The runs files of a point's train job (tiny), or of its per-seed jobs (verl)."""
    if TRAIN_BACKEND == "tiny":
        return [f"{RESULTS}/train/{point.train.key}/runs.parquet"]
    return [
        f"{RESULTS}/train/{point.train.key}/seed{seed}/runs.parquet"
        for seed in point.seeds
    ]


def all_train_runs():
    return [path for point in POINTS.values() for path in train_runs_of(point)]


def all_episodes():
    return [episodes_path(point) for point in POINTS.values()]


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


def table9_inputs(wildcards):
    """The collected runs, and the strategy runs' accounting when the recipe is on."""
    inputs = {"runs": f"{COLLECT_DIR}/runs.parquet"}
    if CONFIG["recipe"]["enabled"]:
        inputs["measured"] = f"{VALIDATE_DIR}/measured.parquet"
    return inputs


TABLE9_SETTINGS = {
    "table": "table9",
    "title": TABLE9_TITLE,
    "cost": CONFIG["recipe"]["cost"].get(CONFIG["domain"], {}),
    "visits": visits_per_run(CONFIG["train"]),
}


def recipe_targets():
    """The recipe's tables and Figures 1 and 5, when the recipe is on."""
    if not CONFIG["recipe"]["enabled"]:
        return []
    return [f"{RESULTS}/tables/{name}.md" for name in RECIPE_TABLES] + [
        f"{RESULTS}/figures/{name}.{ext}"
        for name in ("fig1", "fig5")
        for ext in ("png", "pdf")
    ]
