from axisrl.scripting import run_stage
from axisrl.stages import validate

run_stage(snakemake, validate)
