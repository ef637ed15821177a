from axisrl.scripting import run_stage
from axisrl.stages import pricing

run_stage(snakemake, pricing)
