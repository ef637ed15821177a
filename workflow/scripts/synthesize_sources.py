from axisrl.scripting import run_stage
from axisrl.stages import synthesize_sources

run_stage(snakemake, synthesize_sources)
