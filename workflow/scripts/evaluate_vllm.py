from axisrl.scripting import run_stage
from axisrl.stages import evaluate_vllm

run_stage(snakemake, evaluate_vllm)
