from axisrl.scripting import run_stage
from axisrl.stages import recipe

run_stage(snakemake, recipe)
