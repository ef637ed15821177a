from axisrl.scripting import run_stage
from axisrl.stages import figure

run_stage(snakemake, figure)
