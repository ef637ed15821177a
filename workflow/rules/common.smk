# Config validation, stage keys and paths: everything the rules look up, computed once at parse time.
from axisrl.config import (
    ConfigError,
    StageSpec,
    load_yaml,
    stage_specs,
    validate_config,
)

RESULTS = "results"
SCHEMA = load_yaml(f"{workflow.basedir}/config/schema.yaml")

try:
    CONFIG = validate_config(config, SCHEMA)
except ConfigError as error:
    raise WorkflowError(str(error)) from None

SPECS = stage_specs(CONFIG, SCHEMA)
CATALOG_SPEC = StageSpec(
    "catalog", {}, {stage: spec.key for stage, spec in SPECS.items()}
)


def stage_dir(stage):
    """results/<stage>/<key>: where a stage's artifacts for the current config live."""
    return f"{RESULTS}/{stage}/{SPECS[stage].key}"


def stage_log(stage):
    return f"{RESULTS}/logs/{stage}/{SPECS[stage].key}.log"
