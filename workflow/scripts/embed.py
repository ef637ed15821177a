from axisrl.scripting import run_stage
from axisrl.stages import embed

run_stage(snakemake, embed)
