checkpoint recipe:
    input:
        runs=rules.collect.output.runs,
        episodes=rules.collect.output.episodes,
        envs=f"{stage_dir('dedup')}/envs.parquet",
        tasks=f"{stage_dir('dedup')}/tasks.parquet",
    output:
        **{name: f"{RECIPE_DIR}/{name}.parquet" for name in RECIPE_FRAMES},
    log:
        f"{RESULTS}/logs/recipe/{RECIPE_SPEC.key}.log",
    conda:
        "../../envs/core.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        spec=RECIPE_SPEC,
        settings={
            "recipe": CONFIG["recipe"],
            "domain": CONFIG["domain"],
            "seeds": CONFIG["study"]["seeds"],
            "train": RECIPE_TRAIN,
        },
    script:
        "../scripts/recipe.py"


rule validate:
    input:
        unpack(validate_inputs),
    output:
        **{name: f"{VALIDATE_DIR}/{name}.parquet" for name in VALIDATE_FRAMES},
    log:
        f"{RESULTS}/logs/validate/{VALIDATE_SPEC.key}.log",
    conda:
        "../../envs/core.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        spec=VALIDATE_SPEC,
        settings={
            "recipe": CONFIG["recipe"],
            "seeds": CONFIG["study"]["seeds"],
            "episodes_stage": EPISODES_STAGE,
        },
    script:
        "../scripts/validate.py"
