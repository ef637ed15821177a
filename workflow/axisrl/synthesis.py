"""The synthesis method families the study prices (the paper's Table 3), independent of any domain.

A method scales one data axis (its *primary axis*) and costs a fixed amount per unit it makes.
How a method fails (its fidelity model) is the domain's business
(``axisrl.domains.toolworld.synthetic``); which axis it scales and what a unit costs is the
study's, so the plan and the pricing stage read them from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

CORE_SUFFIX = "_core"
"""Source name of a method reduced to the common generate-filter-train core (Table 16)."""


@dataclass(frozen=True)
class MethodFamily:
    """``axis``: the design axis the method's units add to; ``unit``: what one unit is;
    ``unit_cost``: USD per unit (the paper's Table 3; overridable in config)."""

    name: str
    axis: str
    unit: str
    unit_cost: float
    paper: str


METHODS: dict[str, MethodFamily] = {
    m.name: m
    for m in (
        MethodFamily("awm", "d_env", "env", 4.10, "AWM"),
        MethodFamily("genenv", "d_env", "env", 3.80, "GenEnv"),
        MethodFamily("dreamgym", "d_traj", "trajectory", 0.04, "DreamGym"),
        MethodFamily("autoplay", "d_task", "task", 0.18, "AutoPlay"),
        MethodFamily("sca", "d_task", "task", 0.21, "SCA"),
        MethodFamily("rlve", "d_task", "task", 0.15, "RLVE"),
        MethodFamily("swirl", "d_traj", "trajectory", 0.05, "SWiRL"),
    )
}
"""SWiRL's cost per trajectory is not in the paper's table; 0.05 USD is our assumption."""


def method_of(source: str) -> MethodFamily:
    """The method family behind a ``source`` name (``"awm"`` or its common-core variant ``"awm_core"``)."""
    name = source.removesuffix(CORE_SUFFIX)
    if name not in METHODS:
        raise ValueError(f"unknown synthetic source {source!r}; known: {sorted(METHODS)}")
    return METHODS[name]


SYNTHETIC_COLUMNS = ("d_env_synthetic", "d_task_synthetic", "d_traj_synthetic")


def synthetic_amounts(design: Mapping[str, Any]) -> dict[str, float]:
    """Synthetic units a design adds per axis (``d_env_synthetic``, ...): ``ratio`` times the real
    amount on its source's axis; environment synthesis brings its environments' tasks too (tasks
    per environment held), so it also adds ``ratio * d_task`` tasks. None for a real-only design."""
    amounts = dict.fromkeys(SYNTHETIC_COLUMNS, 0.0)
    source = design.get("source", "real")
    if source != "real":
        axis = method_of(source).axis
        amounts[f"{axis}_synthetic"] = design["ratio"] * design[axis]
        if axis == "d_env":
            amounts["d_task_synthetic"] = design["ratio"] * design["d_task"]
    return amounts
