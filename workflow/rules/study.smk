rule plan:
    output:
        runs=PLAN_RUNS,
    log:
        f"{RESULTS}/logs/plan/{PLAN_SPEC.key}.log",
    conda:
        "../../envs/core.yaml"
    threads: 1
    params:
        spec=PLAN_SPEC,
        settings={"runs": PLAN_ROWS},
    script:
        "../scripts/plan.py"


rule train:
    input:
        unpack(training_pool),
    output:
        metrics=f"{RESULTS}/train/{{train_key}}/metrics.parquet",
        runs=f"{RESULTS}/train/{{train_key}}/runs.parquet",
        episodes=f"{RESULTS}/train/{{train_key}}/episodes.parquet",
        checkpoints=expand(
            f"{RESULTS}/train/{{{{train_key}}}}/policy_seed{{seed}}.pt",
            seed=CONFIG["study"]["seeds"],
        ),
    log:
        f"{RESULTS}/logs/train/{{train_key}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/train/{{train_key}}.tsv"
    conda:
        "../../envs/core.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=60,
    params:
        spec=train_spec,
        settings=train_params,
    script:
        "../scripts/train.py"


rule collect:
    input:
        plan=PLAN_RUNS,
        train_runs=all_train_runs(),
        episodes=all_episodes(),
    output:
        runs=f"{COLLECT_DIR}/runs.parquet",
        episodes=f"{COLLECT_DIR}/episodes.parquet",
    log:
        f"{RESULTS}/logs/collect/{COLLECT_SPEC.key}.log",
    conda:
        "../../envs/core.yaml"
    threads: 1
    params:
        spec=COLLECT_SPEC,
        settings={},
    script:
        "../scripts/collect.py"
