from axisrl.scripting import run_stage
from axisrl.stages import evaluate

run_stage(snakemake, evaluate)
