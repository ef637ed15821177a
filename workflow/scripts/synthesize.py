from axisrl.scripting import run_stage
from axisrl.stages import synthesize

run_stage(snakemake, synthesize)
