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
