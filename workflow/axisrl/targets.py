"""The report targets: every table and figure of the paper, with the frames each is made from and the
function that computed them. Plain data (functions named as ``module:function``), so the Snakefile
declares every target at parse time without importing the analysis libraries; a test resolves every
name."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

if TYPE_CHECKING:
    from axisrl.config import StageSpec

LAW_FRAMES = (
    "axis_fits",
    "points",
    "noise",
    "local_slopes",
    "trends",
    "loo",
    "ordering",
    "joint",
    "interaction",
    "table2",
    "table4",
    "table5",
    "table7",
    "table8",
    "table10",
    "table11",
    "table12",
    "table13",
    "table14",
    "table15",
    "warnings",
)
"""Every frame the ``laws`` stage writes (one Parquet file each)."""

LAW_TABLES = {
    "table2": "Table 2: per-axis exponents by model size, algorithm and reward density",
    "table4": "Table 4: calibration of the held values (smallest value within tolerance of the sweep's best)",
    "table5": "Table 5: exponents at other held values of the other axes",
    "table7": "Table 7: environment exponent by pool construction (signature level; placebo)",
    "table8": "Table 8: worlds vs variants at fixed D_E = W x V",
    "table10": "Table 10: exponents under three training-budget conventions",
    "table11": "Table 11: fits on the narrower grid vs on all grid points",
    "table12": "Table 12: fit-free local log-log slopes",
    "table13": "Table 13: exponents per domain and starting point (random init, the study's base, a strong base)",
    "table14": "Table 14: task exponent with D_T counted under embedding-dedup thresholds",
    "table15": "Table 15: task exponent with D_T counted under signature dedup rules",
}
"""The tables computed by the ``laws`` stage: target name -> title."""

TABLE9_TITLE = (
    "Table 9: training-signal accounting along every sweep and for the strategy runs (compute: "
    "FLOPs the runs executed, against what their budgets are charged, declared prices excluded)"
)

PRICING_FRAMES = ("pricing", "collapse", "curves", "table3", "table16", "table17")
"""Every frame the ``pricing`` stage writes."""

PRICING_TABLES = {
    "table3": "Table 3: synthesis methods priced on one ruler: discount kappa at r = 1, collapse ratio r*, cost",
    "table16": "Table 16: kappa and r* per method as run and reduced to the common generate-filter-train core",
    "table17": "Table 17: collapse ratio of the representative methods under alternative definitions of collapse",
}
"""The tables computed by the ``pricing`` stage: target name -> title."""

RECIPE_FRAMES = ("law", "cost", "path", "exponents", "curves", "table18", "table19", "table20", "table21", "strategies")
"""Every frame the ``recipe`` stage writes; ``strategies`` holds the pre-registered runs it plans."""

UNIDENTIFIED = "no effect, so its slope only shows where the budget constraint put spare compute"
RECIPE_TABLES = {
    "table18": "Table 18: measured cost drivers per domain (means over the runs the recipe law is fitted to)",
    "table19": "Table 19: recipe exponents under progressively richer cost models (not identified where the fitted "
    f"law gives that axis {UNIDENTIFIED}; the CSV's identified_ columns)",
    "table20": "Table 20: recipe exponents per domain (OLS slope of ln x* on ln C, bootstrap interval; not identified "
    f"where the fitted law gives the axis {UNIDENTIFIED})",
    "table21": "Table 21: recipe-exponent sensitivity to +-50% perturbations of cost coefficients (not identified "
    f"where the fitted law gives that axis {UNIDENTIFIED}; the CSV's identified_ columns)",
}
"""The tables computed by the ``recipe`` stage: target name -> title."""

CURVE_FRAMES = ("curve_runs", "curve_points", "extrapolation", "asymptote_laws")
"""Every frame the ``curve_fits`` stage writes: the saturating fit of each run's curve on V and of
each design point's (seeds pooled), the check of fits on a curve's first half against its last
point, and the per-axis laws of the fitted asymptote A and midpoint C_mid."""

VALIDATE_FRAMES = ("measured", "efficiency")
"""Every frame the ``validate`` stage writes: the strategy runs' measured success against their
pre-registered predictions, and the recipe's compute efficiency over each baseline."""


class Target(NamedTuple):
    """One table or figure. ``frames``: argument -> (stage, frame) it is drawn from (``optional`` ones
    only when the recipe is on); ``make``: the function that turns them into the target (called with
    the frames, ``options`` read from the config at the given paths, and the output paths);
    ``computed_by``: for a table copied from a stage's frame, the function that computed that frame."""

    title: str
    frames: dict[str, tuple[str, str]]
    make: str
    options: dict[str, str] = {}
    computed_by: str = ""
    optional: tuple[str, ...] = ()
    needs_recipe: bool = False
    needs_curves: bool = False
    """Made only in a study with learning curves (``curves_on``)."""
    families: tuple[str, ...] = ()
    """The study families (or ``recipe``) whose runs the target reads, for ``report.reduced``'s labels."""


def labelled(title: str, reduced: dict[str, str]) -> str:
    """A table's title with the note of every reduced family it reads (``report.reduced``)."""
    if not reduced:
        return title
    notes = "; ".join(f"{family}: {note}" for family, note in reduced.items())
    return f"{title} [reduced at laptop scale: {notes}; config/studies/full.yaml runs it in full]"


COPY = "axisrl.report.tables:copied"
COMPUTED_BY = {
    "table2": "axisrl.laws.axis:fit_axes_by",
    "table4": "axisrl.laws.tables:calibration_table",
    "table5": "axisrl.laws.tables:held_axis_table",
    "table7": "axisrl.laws.tables:pool_construction_table",
    "table8": "axisrl.laws.tables:worlds_variants_table",
    "table10": "axisrl.laws.tables:budget_convention_table",
    "table11": "axisrl.laws.tables:subset_fit_table",
    "table12": "axisrl.laws.axis:local_slopes",
    "table13": "axisrl.laws.axis:fit_axes_by",
    "table14": "axisrl.laws.tables:task_dedup_table",
    "table15": "axisrl.laws.tables:task_dedup_table",
    **dict.fromkeys(PRICING_TABLES, "axisrl.pricing.tables:pricing_tables"),
    "table18": "axisrl.recipe.study:drivers_table",
    "table19": "axisrl.recipe.study:progression_table",
    "table20": "axisrl.recipe.study:exponent_table",
    "table21": "axisrl.recipe.study:perturbation_table",
}
"""Which library function computed each copied table's frame (inside its stage's run)."""

TABLES: dict[str, Target] = {
    **{
        name: Target(title, {"frame": ("laws", name)}, COPY, computed_by=COMPUTED_BY[name])
        for name, title in LAW_TABLES.items()
    },
    **{
        name: Target(title, {"frame": ("pricing", name)}, COPY, computed_by=COMPUTED_BY[name], families=("mixtures",))
        for name, title in PRICING_TABLES.items()
    },
    **{
        name: Target(
            title,
            {"frame": ("recipe", name)},
            COPY,
            computed_by=COMPUTED_BY[name],
            needs_recipe=True,
            families=("recipe",),
        )
        for name, title in RECIPE_TABLES.items()
    },
    "table2_asymptote": Target(
        "Table 2, asymptote: per-axis exponents of the fitted asymptote A and midpoint C_mid of the runs' "
        "learning curves on V (beside Table 2's exponents of final success: which axis raises the ceiling, "
        "which only gets there faster)",
        {"frame": ("curve_fits", "asymptote_laws")},
        COPY,
        computed_by="axisrl.laws.curve_laws:asymptote_laws",
        needs_curves=True,
        families=("axis_sweeps",),
    ),
    "table_extrapolation": Target(
        "Extrapolation: saturating fits on the first half of each learning curve against its last point on V "
        "(prediction error, and the coverage of the predicted intervals)",
        {"frame": ("curve_fits", "extrapolation")},
        COPY,
        computed_by="axisrl.laws.curve_extrapolation:extrapolation_table",
        needs_curves=True,
    ),
    "power": Target(
        "Power: this design's expected 95 % half-widths and the chance each interval excludes 0, simulated "
        "from the study's own noise frame (axisrl power: other designs and their compute)",
        {"noise": ("laws", "noise")},
        "axisrl.planner:power_table",
        {"study": "study", "take_off": "laws.take_off"},
    ),
    "table9": Target(
        TABLE9_TITLE,
        {"runs": ("collect", "runs"), "measured": ("validate", "measured")},
        "axisrl.report.tables:table9",
        {"costs": "recipe.cost", "domain": "domain", "train": "train"},
        optional=("measured",),
        families=("recipe",),
    ),
}
"""Every table target (``results/studies/<key>/tables/<name>.md`` and ``.csv``: ``study_spec``) by name; each
has a rule of that name."""

FIGURES: dict[str, Target] = {
    "fig1": Target(
        "Figure 1: measured against predicted success of the strategy runs",
        {"measured": ("validate", "measured")},
        "axisrl.report.recipe_figures:figure1",
        needs_recipe=True,
    ),
    "fig2": Target(
        "Figure 2: per-axis scaling laws",
        {"points": ("laws", "points"), "fits": ("laws", "axis_fits"), "trends": ("laws", "trends")},
        "axisrl.report.figures:figure2",
    ),
    "fig3": Target(
        "Figure 3: environment x task interaction at iso-cost",
        {"runs": ("collect", "runs")},
        "axisrl.report.figures:interaction_figure",
        {"tier": "laws.tier", "cost_per_env": "report.cost_per_env", "cost_per_task": "report.cost_per_task"},
    ),
    "fig_noise": Target(
        "Figure: the seed spread of the axis sweeps against binomial noise",
        {"runs": ("collect", "runs"), "noise": ("laws", "noise")},
        "axisrl.report.noise_figure:noise_figure",
        {"tier": "laws.tier", "take_off": "laws.take_off"},
    ),
    "fig_curves": Target(
        "Figure: learning curves on V along each axis, with their saturating fits",
        {"curves": ("collect", "learning_curves"), "runs": ("collect", "runs"), "fits": ("curve_fits", "curve_points")},
        "axisrl.report.curve_figure:curve_figure",
        needs_curves=True,
    ),
    "fig4": Target(
        "Figure 4: synthesis collapse",
        {"curves": ("pricing", "curves"), "collapse": ("pricing", "collapse")},
        "axisrl.report.figures:figure4",
        {"threshold": "pricing.threshold"},
    ),
    "fig5": Target(
        "Figure 5: the compute-optimal recipe",
        {
            "path": ("recipe", "path"),
            "exponents": ("recipe", "exponents"),
            "curves": ("recipe", "curves"),
            "measured": ("validate", "measured"),
        },
        "axisrl.report.recipe_figures:figure5",
        needs_recipe=True,
    ),
}
"""Every figure target (``results/studies/<key>/figures/<name>.png`` and ``.pdf``: ``study_spec``; captioned by
``workflow/report/<name>.rst``) by name; each has a rule of that name."""

STUDIES = "studies"
"""The folder of the studies' own outputs under ``results/``: one ``<key>/`` per study (``study_spec``)."""

STUDY_READS = (
    "recipe.enabled",
    "report",
    *sorted({path for target in (*TABLES.values(), *FIGURES.values()) for path in target.options.values()}),
)
"""The config a study's tables and figures read besides their frames: which of them it makes
(``recipe.enabled``), the notes in their titles (``report.reduced``) and every target's ``options``."""


def curves_on(config: Mapping[str, Any]) -> bool:
    """Whether a study draws learning curves: ``learning_curves.points`` above 0, with the tiny backend
    (a verl run counts no FLOPs, so it has no curve against the compute it spent)."""
    return config["learning_curves"]["points"] > 0 and config["train"]["backend"] == "tiny"


def study_targets(recipe: bool, curves: bool = False) -> dict[str, Target]:
    """The tables and figures a study makes: the recipe's only when it is on, the curves' only with curves."""
    return {
        name: target
        for name, target in {**TABLES, **FIGURES}.items()
        if (recipe or not target.needs_recipe) and (curves or not target.needs_curves)
    }


class Keyed(Protocol):
    """What ``study_spec`` reads of a study (``axisrl.stages.Study``): named here, so that the targets,
    which the stages import, import nothing of the stages."""

    @property
    def hashed(self) -> Mapping[str, Any]: ...

    @property
    def specs(self) -> Mapping[str, StageSpec]: ...


def study_spec(study: Keyed) -> StageSpec:
    """The key of a study's own outputs, ``results/studies/<key>/`` (its tables and figures): the
    hashed config under ``STUDY_READS`` and the keys of the stages its targets' frames are drawn from,
    so a study that would write other tables or figures has another folder, and one that would write
    the same ones finds them there. Built like a stage's key (``StageSpec``, stage ``studies``)."""
    from axisrl.config import StageSpec, project, value_at

    recipe = bool(value_at(study.hashed, "recipe.enabled"))
    stages = sorted(
        {
            stage
            for target in study_targets(recipe, curves_on(study.hashed)).values()
            for name, (stage, _) in target.frames.items()
            if name not in target.optional or recipe
        }
    )
    read = project(study.hashed, STUDY_READS, strict=False)
    return StageSpec(STUDIES, read, {stage: study.specs[stage].key for stage in stages})


def domains_spec(study_keys: Mapping[str, str]) -> StageSpec:
    """The key of a study across domains' own outputs (the side-by-side tables and figure of
    ``workflow/rules/domains.smk``): its domains in their order, and each domain's own study key
    (``study_spec``), which covers every frame they are drawn from."""
    from axisrl.config import StageSpec

    return StageSpec(STUDIES, {"domains": list(study_keys)}, dict(study_keys))
