from axisrl.scripting import run_stage
from axisrl.stages import plan

run_stage(snakemake, plan)
