"""The workflow's stages: a registry (``registry``) and one module per family of stages.

Each stage function takes the stage's spec (what its key covers), its settings (what the registry
says it reads) and named input/output paths, and knows nothing of Snakemake, so a stage runs and is
tested from Python directly. A Snakemake job reaches its function by its rule's name (``job_function``).

Families: ``pools`` (synthesize, sources), ``dedup`` (embed, dedup, dedup_sources), ``train`` (the tiny
backend), ``gpu`` (verl training, vLLM evaluation), ``collect`` (plan, collect), ``analysis`` (laws,
pricing, recipe, validate), ``report`` (catalog, every table and figure target).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from axisrl.stages.domains import DOMAINS_RULE
from axisrl.stages.registry import (
    STAGES,
    PointJobs,
    Stage,
    Study,
    base_of,
    base_spec,
    episodes_stage,
    key_table,
    point_jobs,
    resolve,
    study,
    validation_base,
)
from axisrl.targets import FIGURES, TABLES


def job_function(rule: str, settings: Mapping[str, Any]) -> Callable[..., None]:
    """The function that runs a job of ``rule``: a stage's (for its train backend), or the report's
    table or figure maker for a table or figure target. In a study across domains each domain's
    rules are named ``<domain>_<rule>`` (``workflow/rules/domains.smk``): the same jobs."""
    rule = _unprefixed(rule)
    if rule in STAGES:
        target = STAGES[rule].target(settings)
    elif rule in TABLES:
        target = "axisrl.stages.report:table"
    elif rule in FIGURES:
        target = "axisrl.stages.report:figure"
    elif rule == DOMAINS_RULE:
        target = "axisrl.stages.domains:side_by_side"
    else:
        raise KeyError(f"no stage or report target is named {rule!r}")
    return resolve(target)


def _unprefixed(rule: str) -> str:
    """A rule's own name, without the ``<domain>_`` a study across domains gives it."""
    from axisrl.domains import DOMAINS

    for domain in DOMAINS:
        own = rule.removeprefix(f"{domain}_")
        if own != rule and (own in STAGES or own in TABLES or own in FIGURES):
            return own
    return rule


__all__ = [
    "STAGES",
    "PointJobs",
    "Stage",
    "Study",
    "base_of",
    "base_spec",
    "episodes_stage",
    "job_function",
    "key_table",
    "point_jobs",
    "study",
    "validation_base",
]
