# Every table and figure of the paper, one rule each, from the registry in axisrl/targets.py: a
# target's rule is named after it, reads the frames the registry lists, and runs its maker. They
# write into the study's own folder, results/studies/<key>/ (STUDY_DIR, common.smk).


for table_name, table in TABLES.items():

    rule:
        name:
            table_name
        input:
            **target_inputs(table),
        output:
            markdown=f"{STUDY_DIR}/tables/{table_name}.md",
            csv=f"{STUDY_DIR}/tables/{table_name}.csv",
        log:
            f"{STUDY_LOGS}/{table_name}.log",
        conda:
            "../../envs/core.yaml"
        threads: 1
        params:
            **target_params(table_name, table),
        script:
            "../scripts/stage.py"


for figure_name, figure in FIGURES.items():

    rule:
        name:
            figure_name
        input:
            **target_inputs(figure),
        output:
            png=report(
                f"{STUDY_DIR}/figures/{figure_name}.png",
                caption=f"../report/{figure_name}.rst",
                category="Figures",
            ),
            pdf=f"{STUDY_DIR}/figures/{figure_name}.pdf",
        log:
            f"{STUDY_LOGS}/{figure_name}.log",
        conda:
            "../../envs/core.yaml"
        threads: 1
        params:
            **target_params(figure_name, figure),
        script:
            "../scripts/stage.py"
