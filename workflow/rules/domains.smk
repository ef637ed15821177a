# A study across domains (`domains:` in the config): the whole single-domain workflow once per
# domain, as a Snakemake module under domains/<name>/ (its config: this one with `domain: <name>` and
# the name's overlay; its own outputs in domains/<name>/results/studies/<key>/), and one job that sets
# their tables and figure side by side in this study's own folder, results/studies/<key>/.
from axisrl.config import ConfigError, domain_configs, load_yaml
from axisrl.stages.domains import DOMAINS_RULE, FIGURES, FRAMES, TITLES, input_name
from axisrl.targets import domains_spec

try:
    DOMAIN_CONFIGS = domain_configs(config, load_yaml(f"{workflow.basedir}/config/schema.yaml"))
except ConfigError as error:
    raise WorkflowError(str(error)) from None

# `module` and `use rule * from ... as ...` spelled as the calls they compile to, since their names
# come from the config here (one module per domain).
for name, domain_config in DOMAIN_CONFIGS.items():
    workflow.module(name=name, snakefile="../../Snakefile", config=domain_config, prefix=f"domains/{name}")
    workflow.userule(rules=["*"], from_module=name, exclude_rules=[], name_modifier=f"{name}_*", lineno=1)(lambda: None)


STUDY_SPEC = domains_spec({name: workflow.globals[name].STUDY_SPEC.key for name in DOMAIN_CONFIGS})
"""The key of the side-by-side tables and figure: each domain's own study key (a module's globals are
under its name), which covers every frame the job reads."""
STUDY_DIR = str(STUDY_SPEC.directory("results"))


def domain_frames():
    """Each domain's laws and dedup frames and its collected runs, by ``input_name``."""
    files = {}
    for name in DOMAIN_CONFIGS:
        for frame, stage in FRAMES.items():
            files[input_name(name, frame)] = getattr(rules, f"{name}_{stage}").output[frame]
        files[input_name(name, "runs")] = getattr(rules, f"{name}_collect").output.runs
    return files


rule:
    name:
        DOMAINS_RULE
    input:
        **domain_frames(),
    output:
        **{
            f"{table}_{kind}": f"{STUDY_DIR}/tables/{table}.{ext}"
            for table in TITLES
            for kind, ext in (("markdown", "md"), ("csv", "csv"))
        },
        **{f"{figure}_{ext}": f"{STUDY_DIR}/figures/{figure}.{ext}" for figure in FIGURES for ext in ("png", "pdf")},
    log:
        f"results/logs/{STUDY_SPEC.stage}/{STUDY_SPEC.key}/{DOMAINS_RULE}.log",
    conda:
        "../../envs/core.yaml"
    threads: 1
    params:
        spec=None,
        settings={"domains": list(DOMAIN_CONFIGS)},
    script:
        "../scripts/stage.py"


def domains_outputs():
    """Every target of the study across domains: the side-by-side tables and figure and every
    domain's own study (what its `all` builds)."""
    return [
        *getattr(rules, DOMAINS_RULE).output,
        *(path for name in DOMAIN_CONFIGS for path in getattr(rules, f"{name}_all").input),
    ]
