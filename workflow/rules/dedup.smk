rule embed:
    input:
        tasks=rules.synthesize.output.tasks,
        heldout_tasks=rules.synthesize.output.heldout_tasks,
        placebo_tasks=rules.synthesize.output.placebo_tasks,
    output:
        embeddings=f"{stage_dir('embed')}/task_embeddings.parquet",
    log:
        stage_log("embed"),
    priority: 10  # every later job of its pools waits on it
    conda:
        "../../envs/core.yaml"
    threads: CONFIG["resources"]["embed"]["threads"]
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        **stage_params("embed"),
    script:
        "../scripts/stage.py"


rule dedup:
    input:
        envs=rules.synthesize.output.envs,
        tasks=rules.synthesize.output.tasks,
        heldout_envs=rules.synthesize.output.heldout_envs,
        heldout_tasks=rules.synthesize.output.heldout_tasks,
        placebo_envs=rules.synthesize.output.placebo_envs,
        placebo_tasks=rules.synthesize.output.placebo_tasks,
        embeddings=rules.embed.output.embeddings,
    output:
        envs=f"{stage_dir('dedup')}/envs.parquet",
        tasks=f"{stage_dir('dedup')}/tasks.parquet",
        heldout_envs=f"{stage_dir('dedup')}/heldout_envs.parquet",
        heldout_tasks=f"{stage_dir('dedup')}/heldout_tasks.parquet",
        placebo_envs=f"{stage_dir('dedup')}/placebo_envs.parquet",
        placebo_tasks=f"{stage_dir('dedup')}/placebo_tasks.parquet",
        pool_stats=f"{stage_dir('dedup')}/pool_stats.parquet",
        task_dedup=f"{stage_dir('dedup')}/task_dedup.parquet",
    log:
        stage_log("dedup"),
    conda:
        "../../envs/core.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        **stage_params("dedup"),
    script:
        "../scripts/stage.py"


rule dedup_sources:
    input:
        synthetic_envs=rules.sources.output.synthetic_envs,
        synthetic_tasks=rules.sources.output.synthetic_tasks,
        real_envs=rules.dedup.output.envs,
        heldout_envs=rules.dedup.output.heldout_envs,
    output:
        synthetic_envs=f"{stage_dir('dedup_sources')}/synthetic_envs.parquet",
        synthetic_tasks=f"{stage_dir('dedup_sources')}/synthetic_tasks.parquet",
    log:
        stage_log("dedup_sources"),
    priority: 10  # mixture train jobs wait on it: start it before the real ones
    conda:
        "../../envs/core.yaml"
    # One thread: real-pool train jobs take the other core meanwhile. Its embeddings come out
    # bitwise the same at 1 and 2 threads, and 2 threads embed only 1.56x faster (bench/README.md).
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        **stage_params("dedup_sources"),
    script:
        "../scripts/stage.py"
