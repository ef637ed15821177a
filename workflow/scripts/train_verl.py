from axisrl.scripting import run_stage
from axisrl.stages import train_verl

run_stage(snakemake, train_verl)
