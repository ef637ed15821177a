rule table9:
    input:
        runs=rules.collect.output.runs,
    output:
        markdown=f"{RESULTS}/tables/table9.md",
        csv=f"{RESULTS}/tables/table9.csv",
    log:
        f"{RESULTS}/logs/tables/table9.log",
    conda:
        "../../envs/core.yaml"
    threads: 1
    params:
        spec=None,
        settings={
            "table": "table9",
            "title": "Table 9: training-signal accounting along the d_env sweep",
        },
    script:
        "../scripts/table.py"
