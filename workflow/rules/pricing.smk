rule pricing:
    input:
        runs=rules.collect.output.runs,
    output:
        **{name: f"{PRICING_DIR}/{name}.parquet" for name in PRICING_FRAMES},
    log:
        f"{RESULTS}/logs/pricing/{PRICING_SPEC.key}.log",
    conda:
        "../../envs/core.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        spec=PRICING_SPEC,
        settings={
            "points": PRICING_POINTS,
            "unit_costs": UNIT_COSTS,
            "pricing": CONFIG["pricing"],
        },
    script:
        "../scripts/pricing.py"
