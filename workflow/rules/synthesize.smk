rule synthesize:
    output:
        envs=f"{stage_dir('synthesize')}/envs.parquet",
        tasks=f"{stage_dir('synthesize')}/tasks.parquet",
        heldout_envs=f"{stage_dir('synthesize')}/heldout_envs.parquet",
        heldout_tasks=f"{stage_dir('synthesize')}/heldout_tasks.parquet",
        placebo_envs=f"{stage_dir('synthesize')}/placebo_envs.parquet",
        placebo_tasks=f"{stage_dir('synthesize')}/placebo_tasks.parquet",
    log:
        stage_log("synthesize"),
    conda:
        "../../envs/core.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        spec=SPECS["synthesize"],
        settings={"domain": CONFIG["domain"], "synthesize": CONFIG["synthesize"]},
    script:
        "../scripts/synthesize.py"
