from axisrl.scripting import run_stage
from axisrl.stages import train

run_stage(snakemake, train)
