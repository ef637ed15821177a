rule laws:
    input:
        runs=rules.collect.output.runs,
        episodes=rules.collect.output.episodes,
    output:
        **{name: f"{LAWS_DIR}/{name}.parquet" for name in LAW_FRAMES},
    log:
        f"{RESULTS}/logs/laws/{LAWS_SPEC.key}.log",
    conda:
        "../../envs/core.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        spec=LAWS_SPEC,
        settings=CONFIG["laws"],
    script:
        "../scripts/laws.py"
