# axisrl: how agentic-RL data scales. Layout: README.md; stages and keys: workflow/axisrl/stages/registry.py.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


if config.get("domains"):  # a study across domains: this workflow once per domain (workflow/rules/domains.smk)

    include: "workflow/rules/domains.smk"

    rule all:
        default_target: True
        input:
            domains_outputs(),

else:

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
            final_outputs(),

    rule base:
        """Every base the study's tiny runs start from (one per policy width; none with train.init random)."""
        input:
            [base_files(key)["base"] for key in BASES],


include: "workflow/rules/studies.smk"
