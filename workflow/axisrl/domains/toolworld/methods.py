"""The synthesis methods this domain imitates: what each makes (``kind``), its default fidelity
model (how often it fails, and how) and the validated fidelity dict a source is generated with.

Kept apart from the generators so that every method family's module, and the simulator, read one
registry; the families themselves are ``axisrl.synthesis``'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from axisrl.synthesis import METHODS as FAMILIES
from axisrl.synthesis import MethodFamily

TASK_DEFECTS = ("unsolvable", "mislabelled", "near_duplicate")
FILTERS = ("executes", "solution", "solution_and_failures")
"""``executes``: the reference runs without an error; ``solution``: it also passes the verifier
(the common core); ``solution_and_failures``: SCA's check, plus a no-op run and the truncated
reference fail."""


@dataclass(frozen=True)
class Method:
    """A synthesis method family (axis, unit and unit cost: ``axisrl.synthesis``), what it makes
    here (``kind``: env, task, trajectory or simulator) and its default fidelity model."""

    family: MethodFamily
    kind: str
    fidelity: Mapping[str, Any]

    name = property(lambda self: self.family.name)
    axis = property(lambda self: self.family.axis)
    unit = property(lambda self: self.family.unit)
    unit_cost = property(lambda self: self.family.unit_cost)


def _method(name: str, kind: str, **fidelity: Any) -> Method:
    return Method(FAMILIES[name], kind, MappingProxyType(fidelity))


METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        _method("awm", "env", description_mismatch=0.15, unverifiable_goal=0.10),
        _method("genenv", "env", description_mismatch=0.25, unverifiable_goal=0.15),
        _method("dreamgym", "simulator", transition_error=0.15, reward_error=0.10),
        _method(
            "autoplay",
            "task",
            unsolvable=0.10,
            mislabelled=0.10,
            near_duplicate=0.30,
            filter="executes",
            filter_recall=1.0,
        ),
        _method(
            "sca",
            "task",
            unsolvable=0.20,
            mislabelled=0.20,
            near_duplicate=0.10,
            filter="solution_and_failures",
            filter_recall=0.8,
        ),
        _method(
            "rlve", "task", unsolvable=0.20, mislabelled=0.05, near_duplicate=0.15, filter="executes", filter_recall=1.0
        ),
        _method("swirl", "trajectory", step_error=0.15, judge_recall=0.6),
    )
}
"""The method families and their default fidelity models (the config's ``sources.methods``
mirrors these defaults)."""


def method_fidelity(name: str, overrides: Mapping[str, Any] | None = None, common_core: bool = False) -> dict[str, Any]:
    """The method's fidelity dict: defaults, then ``overrides`` (a ``unit_cost`` among them is
    pricing's and is ignored), then the common core's filter if asked. Unknown names and
    out-of-range values raise, so a config typo cannot silently fall back to a default."""
    if name not in METHODS:
        raise ValueError(f"unknown synthesis method {name!r}; known: {sorted(METHODS)}")
    method = METHODS[name]
    given = {k: v for k, v in (overrides or {}).items() if k != "unit_cost"}
    unknown = set(given) - set(method.fidelity)
    if unknown:
        raise ValueError(f"unknown fidelity parameters for {name}: {sorted(unknown)}; known: {sorted(method.fidelity)}")
    fid = {**method.fidelity, **given}
    for key, value in fid.items():
        if key == "filter":
            if value not in FILTERS:
                raise ValueError(f"{name}.filter must be one of {FILTERS}, got {value!r}")
        elif not 0.0 <= value <= 1.0:
            raise ValueError(f"{name}.{key} must be a probability, got {value!r}")
    if method.kind == "task" and sum(fid[d] for d in TASK_DEFECTS) > 1.0:
        raise ValueError(f"{name}: {' + '.join(TASK_DEFECTS)} must not exceed 1")
    if common_core and method.kind == "task":
        fid.update(filter="solution", filter_recall=1.0)
    if common_core and method.kind == "trajectory":
        fid["judge_recall"] = 1.0
    return fid
