checkpoint recipe:
    input:
        runs=rules.collect.output.runs,
        episodes=rules.collect.output.episodes,
        envs=f"{stage_dir('dedup')}/envs.parquet",
        tasks=f"{stage_dir('dedup')}/tasks.parquet",
    output:
        **{name: f"{stage_dir('recipe')}/{name}.parquet" for name in RECIPE_FRAMES},
    log:
        stage_log("recipe"),
    conda:
        "../../envs/core.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        **stage_params("recipe"),
    script:
        "../scripts/stage.py"


rule validate:
    input:
        unpack(validate_inputs),
    output:
        **{name: f"{stage_dir('validate')}/{name}.parquet" for name in VALIDATE_FRAMES},
    log:
        stage_log("validate"),
    conda:
        "../../envs/core.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        **stage_params("validate"),
    script:
        "../scripts/stage.py"
