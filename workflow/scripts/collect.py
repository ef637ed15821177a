from axisrl.scripting import run_stage
from axisrl.stages import collect

run_stage(snakemake, collect)
