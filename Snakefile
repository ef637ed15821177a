# axisrl: how agentic-RL data scales. Layout, stages and keys: ../shared/DESIGN.md and README.md.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/synthesize.smk"
include: "workflow/rules/dedup.smk"
include: "workflow/rules/study.smk"
include: "workflow/rules/laws.smk"
include: "workflow/rules/pricing.smk"
include: "workflow/rules/recipe.smk"
include: "workflow/rules/catalog.smk"
include: "workflow/rules/report.smk"


rule all:
    default_target: True
    input:
        rules.collect.output,
        rules.table9.output,
        [f"{RESULTS}/tables/{name}.md" for name in {**LAW_TABLES, **PRICING_TABLES}],
        rules.fig2.output,
        rules.fig3.output,
        rules.fig4.output,
        rules.catalog.output,
        recipe_targets(),
