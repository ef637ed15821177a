from axisrl.scripting import run_stage
from axisrl.stages import dedup

run_stage(snakemake, dedup)
