from axisrl.scripting import run_stage
from axisrl.stages import table

run_stage(snakemake, table)
