rule plan:
    output:
        runs=PLAN_RUNS,
    log:
        stage_log("plan"),
    conda:
        "../../envs/core.yaml"
    threads: 1
    params:
        **stage_params("plan"),
    script:
        "../scripts/stage.py"


if TRAIN_BACKEND == "tiny":

    rule pretrain:
        input:
            envs=f"{stage_dir('dedup')}/envs.parquet",
            placebo_envs=f"{stage_dir('dedup')}/placebo_envs.parquet",
            heldout_envs=f"{stage_dir('dedup')}/heldout_envs.parquet",
            heldout_tasks=f"{stage_dir('dedup')}/heldout_tasks.parquet",
        output:
            envs=f"{RESULTS}/pretrain/{{pretrain_key}}/envs.parquet",
            tasks=f"{RESULTS}/pretrain/{{pretrain_key}}/tasks.parquet",
            checkpoints=f"{RESULTS}/pretrain/{{pretrain_key}}/checkpoints.parquet",
            base=f"{RESULTS}/pretrain/{{pretrain_key}}/base.pt",
            episodes=f"{RESULTS}/pretrain/{{pretrain_key}}/episodes.parquet",
        log:
            f"{RESULTS}/logs/pretrain/{{pretrain_key}}.log",
        benchmark:
            f"{RESULTS}/benchmarks/pretrain/{{pretrain_key}}.tsv"
        priority: 10  # every train job waits on its base
        conda:
            "../../envs/core.yaml"
        threads: 1
        resources:
            mem_mb=1000,
            runtime=30,
        params:
            spec=pretrain_spec,
            settings=pretrain_settings,
        script:
            "../scripts/stage.py"

    rule train:
        input:
            unpack(training_pool),
        output:
            **CURVE_OUTPUT,
            metrics=f"{RESULTS}/train/{{train_key}}/metrics.parquet",
            runs=f"{RESULTS}/train/{{train_key}}/runs.parquet",
            episodes=f"{RESULTS}/train/{{train_key}}/episodes.parquet",
            policies=f"{RESULTS}/train/{{train_key}}/policies.pt",
        log:
            f"{RESULTS}/logs/train/{{train_key}}.log",
        benchmark:
            f"{RESULTS}/benchmarks/train/{{train_key}}.tsv"
        priority: train_priority
        conda:
            "../../envs/core.yaml"
        threads: 1
        resources:
            mem_mb=1000,
            runtime=60,
        params:
            spec=train_spec,
            settings=train_settings,
        script:
            "../scripts/stage.py"

else:

    rule train:
        input:
            unpack(training_pool),
        output:
            metrics=f"{RESULTS}/train/{{train_key}}/seed{{seed}}/metrics.parquet",
            runs=f"{RESULTS}/train/{{train_key}}/seed{{seed}}/runs.parquet",
            model=directory(f"{RESULTS}/train/{{train_key}}/seed{{seed}}/model"),
        log:
            f"{RESULTS}/logs/train/{{train_key}}_seed{{seed}}.log",
        benchmark:
            f"{RESULTS}/benchmarks/train/{{train_key}}_seed{{seed}}.tsv"
        conda:
            "../../envs/train-verl.yaml"
        threads: GPU_RESOURCES["train"]["cpus"]
        resources:
            gpu=GPU_RESOURCES["train"]["gpus"],
            mem_mb=GPU_RESOURCES["train"]["mem_mb"],
            runtime=GPU_RESOURCES["train"]["runtime"],
        params:
            spec=train_spec,
            settings=train_settings,
        script:
            "../scripts/stage.py"

    # vLLM pins its own torch and transformers; the hf engine needs only what the core env holds
    EVALUATE_ENVS = {"vllm": "../../envs/eval-vllm.yaml", "hf": "../../envs/core.yaml"}

    rule evaluate:
        input:
            heldout_envs=f"{stage_dir('dedup')}/heldout_envs.parquet",
            heldout_tasks=f"{stage_dir('dedup')}/heldout_tasks.parquet",
            models=models_of,
        output:
            episodes=f"{RESULTS}/evaluate/{{eval_key}}/episodes.parquet",
        log:
            f"{RESULTS}/logs/evaluate/{{eval_key}}.log",
        benchmark:
            f"{RESULTS}/benchmarks/evaluate/{{eval_key}}.tsv"
        conda:
            EVALUATE_ENVS[CONFIG["evaluate"]["backend"]]
        threads: GPU_RESOURCES["evaluate"]["cpus"]
        resources:
            gpu=GPU_RESOURCES["evaluate"]["gpus"],
            mem_mb=GPU_RESOURCES["evaluate"]["mem_mb"],
            runtime=GPU_RESOURCES["evaluate"]["runtime"],
        params:
            spec=evaluate_spec,
            settings=evaluate_settings,
        script:
            "../scripts/stage.py"


if ADAPTIVE:

    checkpoint allocate:
        input:
            plan=PLAN_RUNS,
            train_runs=[path for p in FIRST_WAVE for path in train_runs_of(p)],
            episodes=[episodes_path(p) for p in FIRST_WAVE],
        output:
            allocation=f"{stage_dir('allocate')}/allocation.parquet",
            predicted=f"{stage_dir('allocate')}/predicted.parquet",
            second_wave=f"{stage_dir('allocate')}/second_wave.parquet",
            table=f"{stage_dir('allocate')}/allocation.md",
        log:
            stage_log("allocate"),
        conda:
            "../../envs/core.yaml"
        threads: 1
        params:
            **stage_params("allocate"),
        script:
            "../scripts/stage.py"


rule collect:
    input:
        unpack(collect_inputs),
    output:
        **({"learning_curves": f"{COLLECT_DIR}/learning_curves.parquet"} if CURVES else {}),
        runs=f"{COLLECT_DIR}/runs.parquet",
        episodes=f"{COLLECT_DIR}/episodes.parquet",
    log:
        stage_log("collect"),
    conda:
        "../../envs/core.yaml"
    threads: 1
    params:
        **stage_params("collect"),
    script:
        "../scripts/stage.py"
