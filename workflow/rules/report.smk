rule table9:
    input:
        unpack(table9_inputs),
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
        settings=TABLE9_SETTINGS,
    script:
        "../scripts/table.py"


TABLE_DIRS = {
    **dict.fromkeys(LAW_TABLES, LAWS_DIR),
    **dict.fromkeys(PRICING_TABLES, PRICING_DIR),
    **dict.fromkeys(RECIPE_TABLES, RECIPE_DIR),
}


for table_name, table_title in {
    **LAW_TABLES,
    **PRICING_TABLES,
    **RECIPE_TABLES,
}.items():

    rule:
        name:
            table_name
        input:
            frame=f"{TABLE_DIRS[table_name]}/{table_name}.parquet",
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
        trends=f"{LAWS_DIR}/trends.parquet",
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


rule fig1:
    input:
        measured=rules.validate.output.measured,
    output:
        png=report(
            f"{RESULTS}/figures/fig1.png",
            caption="../report/fig1.rst",
            category="Figures",
        ),
        pdf=f"{RESULTS}/figures/fig1.pdf",
    log:
        f"{RESULTS}/logs/figures/fig1.log",
    conda:
        "../../envs/core.yaml"
    threads: 1
    params:
        spec=None,
        settings={"figure": "fig1"},
    script:
        "../scripts/figure.py"


rule fig5:
    input:
        path=f"{RECIPE_DIR}/path.parquet",
        exponents=f"{RECIPE_DIR}/exponents.parquet",
        curves=f"{RECIPE_DIR}/curves.parquet",
        measured=rules.validate.output.measured,
    output:
        png=report(
            f"{RESULTS}/figures/fig5.png",
            caption="../report/fig5.rst",
            category="Figures",
        ),
        pdf=f"{RESULTS}/figures/fig5.pdf",
    log:
        f"{RESULTS}/logs/figures/fig5.log",
    conda:
        "../../envs/core.yaml"
    threads: 1
    params:
        spec=None,
        settings={"figure": "fig5"},
    script:
        "../scripts/figure.py"
