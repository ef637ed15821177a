localrules:
    catalog,


rule catalog:
    input:
        rules.dedup.output,
        rules.collect.output,
        rules.laws.output,
        rules.pricing.output,
    output:
        catalog=f"{stage_dir('catalog')}/catalog.parquet",
    log:
        stage_log("catalog"),
    conda:
        "../../envs/core.yaml"
    params:
        **stage_params("catalog"),
    script:
        "../scripts/stage.py"
