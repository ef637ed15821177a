rule laws:
    input:
        runs=rules.collect.output.runs,
        episodes=rules.collect.output.episodes,
    output:
        **{name: f"{stage_dir('laws')}/{name}.parquet" for name in LAW_FRAMES},
    log:
        stage_log("laws"),
    conda:
        "../../envs/core.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        **stage_params("laws"),
    script:
        "../scripts/stage.py"


if CURVES:

    rule curve_fits:
        input:
            runs=rules.collect.output.runs,
            curves=rules.collect.output.learning_curves,
        output:
            **{name: f"{stage_dir('curve_fits')}/{name}.parquet" for name in CURVE_FRAMES},
        log:
            stage_log("curve_fits"),
        conda:
            "../../envs/core.yaml"
        threads: 1
        resources:
            mem_mb=2000,
            runtime=30,
        params:
            **stage_params("curve_fits"),
        script:
            "../scripts/stage.py"
