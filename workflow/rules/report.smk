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


for law_table, law_title in LAW_TABLES.items():

    rule:
        name:
            law_table
        input:
            frame=f"{LAWS_DIR}/{law_table}.parquet",
        output:
            markdown=f"{RESULTS}/tables/{law_table}.md",
            csv=f"{RESULTS}/tables/{law_table}.csv",
        log:
            f"{RESULTS}/logs/tables/{law_table}.log",
        conda:
            "../../envs/core.yaml"
        threads: 1
        params:
            spec=None,
            settings={"table": law_table, "title": law_title},
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
