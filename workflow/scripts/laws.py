from axisrl.scripting import run_stage
from axisrl.stages import laws

run_stage(snakemake, laws)
