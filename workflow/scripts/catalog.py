from axisrl.scripting import run_stage
from axisrl.stages import build_catalog

run_stage(snakemake, build_catalog)
