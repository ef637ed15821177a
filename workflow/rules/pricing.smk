rule pricing:
    input:
        runs=rules.collect.output.runs,
    output:
        **{name: f"{stage_dir('pricing')}/{name}.parquet" for name in PRICING_FRAMES},
    log:
        stage_log("pricing"),
    conda:
        "../../envs/core.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        **stage_params("pricing"),
    script:
        "../scripts/stage.py"
