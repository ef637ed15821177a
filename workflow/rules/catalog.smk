localrules:
    catalog,


rule catalog:
    input:
        rules.dedup.output,
        rules.collect.output,
        rules.laws.output,
        rules.pricing.output,
    output:
        catalog=f"{RESULTS}/catalog.parquet",
    log:
        f"{RESULTS}/logs/catalog.log",
    conda:
        "../../envs/core.yaml"
    params:
        **stage_params("catalog"),
    script:
        "../scripts/stage.py"
