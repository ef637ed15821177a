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
        settings={"table": "table9", "title": TABLE9_TITLE},
    script:
        "../scripts/table.py"


for table_name, table_title in {**LAW_TABLES, **PRICING_TABLES}.items():

    rule:
        name:
            table_name
        input:
            frame=f"{PRICING_DIR if table_name in PRICING_TABLES else LAWS_DIR}/{table_name}.parquet",
        output:
            markdown=f"{RESULTS}/tables/{table_name}.md",
            csv=f"{RESULTS}/tables/{table_name}.csv",
        log:
            f"{RESULTS}/logs/tables/{table_name}.log",
        conda:
            "../../envs/core.yaml"
        threads: 1
        params:
            spec=None,
            settings={"table": table_name, "title": table_title},
        script:
            "../scripts/table.py"


rule fig2:
    input:
        points=f"{LAWS_DIR}/points.parquet",
        axis_fits=f"{LAWS_DIR}/axis_fits.parquet",
    output:
        png=report(
            f"{RESULTS}/figures/fig2.png",
            caption="../report/fig2.rst",
            category="Figures",
        ),
        pdf=f"{RESULTS}/figures/fig2.pdf",
    log:
        f"{RESULTS}/logs/figures/fig2.log",
    conda:
        "../../envs/core.yaml"
    threads: 1
    params:
        spec=None,
        settings={"figure": "fig2"},
    script:
        "../scripts/figure.py"


rule fig3:
    input:
        runs=rules.collect.output.runs,
    output:
        png=report(
            f"{RESULTS}/figures/fig3.png",
            caption="../report/fig3.rst",
            category="Figures",
        ),
        pdf=f"{RESULTS}/figures/fig3.pdf",
    log:
        f"{RESULTS}/logs/figures/fig3.log",
    conda:
        "../../envs/core.yaml"
    threads: 1
    params:
        spec=None,
        settings={"figure": "fig3", "tier": CONFIG["laws"]["tier"], **CONFIG["report"]},
    script:
        "../scripts/figure.py"


rule fig4:
    input:
        curves=rules.pricing.output.curves,
        collapse=rules.pricing.output.collapse,
    output:
        png=report(
            f"{RESULTS}/figures/fig4.png",
            caption="../report/fig4.rst",
            category="Figures",
        ),
        pdf=f"{RESULTS}/figures/fig4.pdf",
    log:
        f"{RESULTS}/logs/figures/fig4.log",
    conda:
        "../../envs/core.yaml"
    threads: 1
    params:
        spec=None,
        settings={"figure": "fig4", "threshold": CONFIG["pricing"]["threshold"]},
    script:
        "../scripts/figure.py"
