from axisrl.scripting import run_stage

run_stage(snakemake, "synthesize_sources")
