from axisrl.scripting import run_stage
from axisrl.stages import dedup_sources

run_stage(snakemake, dedup_sources)
