from axisrl.scripting import run_stage

run_stage(snakemake)
