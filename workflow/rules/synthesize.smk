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
        **stage_params("synthesize"),
    script:
        "../scripts/stage.py"


rule sources:
    input:
        envs=rules.synthesize.output.envs,
        tasks=rules.synthesize.output.tasks,
    output:
        synthetic_envs=f"{stage_dir('sources')}/synthetic_envs.parquet",
        synthetic_tasks=f"{stage_dir('sources')}/synthetic_tasks.parquet",
        synthetic_trajectories=f"{stage_dir('sources')}/synthetic_trajectories.parquet",
        source_stats=f"{stage_dir('sources')}/source_stats.parquet",
    log:
        stage_log("sources"),
    priority: 10  # mixture train jobs wait on it: start it before the real ones
    conda:
        "../../envs/core.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        **stage_params("sources"),
    script:
        "../scripts/stage.py"
