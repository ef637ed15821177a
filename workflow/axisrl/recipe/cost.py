"""The cost of a data design, in one declared currency, with the paper's cost terms switchable one by one.

Why a separate module: the recipe's exponents depend on the cost model as much as on the law
(an axis whose cost is decoupled from the growing rollout term stays cheap at scale),
so the cost model is an explicit, validated object and Table 19's progression is built from it by
switching terms on in the paper's order:

``TERMS = ("linear", "bilinear", "latency", "failure", "utilization")``

Variables ``x = (width N, d_env D_E, d_task D_T, d_traj D_tau)``; rollouts ``R = V * D_tau``, where
``V`` (``visits``) is the task visits a run plays under its training budget (``axisrl.budget``:
``train.updates x train.visits_per_update`` under the default ``fixed_visits``), so the cost model
charges the rollouts a design executes. More tasks spread the same visits over more tasks: ``D_T``
costs its synthesis price only.

* ``linear``: ``c_width*N + c_env*D_E + c_task*D_T + c_traj*R``.
* ``bilinear``: ``+ c_token * N**model_size_exponent * tokens_per_rollout * R`` (rollout compute grows
  with model size; ``model_size_exponent`` is 1 when N counts parameters and 2 for the tiny policy,
  where N is a width and FLOPs per token scale as width^2).
* ``latency``: ``+ R * (steps_per_rollout * env_seconds_per_call + verifier_seconds_per_rollout) * c_second``.
* ``failure``: every rollout term (the three terms proportional to R above) is divided by
  ``1 - failed_fraction``: failed rollouts are paid for and thrown away.
* ``utilization``: the accelerator-compute terms, ``c_width*N`` and the bilinear token term, are
  divided by ``utilization`` (eta); synthesis (``c_env``, ``c_task``), the per-rollout fixed cost
  ``c_traj`` and the environment/verifier wall time are not accelerator compute and are not.

The *executed* part is the bilinear term (the policy's rollout and training compute, which a run
counts); the rest are *declared* prices (synthesis, per-rollout fees, environment seconds), kept
apart because no run executes them (``executed`` and ``declared``).

With every term on:
``C = c_width*N/eta + c_env*D_E + c_task*D_T``
``    + R/(1-f) * (c_traj + c_token*N**p*tokens/eta + (H*t_env + t_ver)*c_second)``
with ``p = model_size_exponent``, ``H = steps_per_rollout``, ``t_env = env_seconds_per_call``,
``t_ver = verifier_seconds_per_rollout``, ``f = failed_fraction``, ``eta = utilization``.

``eps_i = dC/d ln x_i`` is exact (the solver's KKT check ``-dL/d ln x_i = lambda eps_i`` uses it).
Synthetic data (``SyntheticOption``) is priced by the solver on top of this model.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from functools import cached_property
from typing import Any, NamedTuple, Protocol

import numpy as np
from numpy.typing import ArrayLike

RECIPE_AXES = ("width", "d_env", "d_task", "d_traj")
"""Design variables of the recipe, in this order everywhere: N (policy width), D_E, D_T, D_tau."""
SYNTHETIC_AXES = ("d_env", "d_task", "d_traj")
TERMS = ("linear", "bilinear", "latency", "failure", "utilization")
"""Cost terms in the order the paper's Table 19 switches them on."""


class Cost(Protocol):
    """What the solver needs from a cost: a currency, ``C(x)`` and ``eps_i = dC/d ln x_i``.

    ``x`` maps every name of ``RECIPE_AXES`` to an array (or scalar); results broadcast over them.
    ``C`` must be positive and non-decreasing in every axis, so that the cheapest feasible design is
    the one at the lower bounds.
    """

    @property
    def currency(self) -> str: ...

    def cost(self, x: Mapping[str, ArrayLike]) -> np.ndarray: ...

    def log_gradient(self, x: Mapping[str, ArrayLike]) -> dict[str, np.ndarray]: ...


def _number(value: ArrayLike) -> float | np.ndarray:
    """A plain float as it is (numpy's 0-d arithmetic costs several times more per operation), else an array."""
    return value if isinstance(value, float) else np.asarray(value, dtype=np.float64)


class _Coefficients(NamedTuple):
    """A cost model's coefficients with its enabled terms folded in, per unit of each driver."""

    width: float
    env: float
    task: float
    per_rollout: float
    bilinear: float
    """Per rollout and unit of ``N**model_size_exponent``."""


class _Parts(NamedTuple):
    """The terms of ``C(x)``; ``rollout`` includes ``bilinear``, the part a run executes."""

    width: np.ndarray
    env: np.ndarray
    task: np.ndarray
    rollout: np.ndarray
    bilinear: np.ndarray


_COEFFICIENTS = (
    "c_width",
    "c_env",
    "c_task",
    "c_traj",
    "c_token",
    "tokens_per_rollout",
    "model_size_exponent",
    "steps_per_rollout",
    "env_seconds_per_call",
    "verifier_seconds_per_rollout",
    "c_second",
    "failed_fraction",
    "utilization",
)


@dataclass(frozen=True)
class CostModel:
    """Cost of a design in ``currency`` (e.g. "flop", "usd", "gpu_seconds"); see the module docstring.

    Coefficients are in ``currency`` per unit: ``c_width`` per unit of N, ``c_env`` per environment,
    ``c_task`` per task, ``c_traj`` per rollout, ``c_token`` per (N**model_size_exponent x token),
    ``c_second`` per second of environment or verifier time. ``terms`` is the enabled subset of
    ``TERMS`` (stored in ``TERMS`` order).
    """

    currency: str
    visits: float
    """Task visits per run (``TrainingBudget.visits``): rollouts are ``visits * d_traj``."""
    c_width: float = 0.0
    c_env: float = 0.0
    c_task: float = 0.0
    c_traj: float = 0.0
    c_token: float = 0.0
    tokens_per_rollout: float = 0.0
    model_size_exponent: float = 1.0
    steps_per_rollout: float = 0.0
    env_seconds_per_call: float = 0.0
    verifier_seconds_per_rollout: float = 0.0
    c_second: float = 0.0
    failed_fraction: float = 0.0
    utilization: float = 1.0
    terms: tuple[str, ...] = TERMS

    def __post_init__(self) -> None:
        if not isinstance(self.currency, str) or not self.currency:
            raise ValueError("CostModel needs a currency, e.g. 'flop', 'usd' or 'gpu_seconds'")
        for name in _COEFFICIENTS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value < 0:
                raise ValueError(f"cost coefficient {name} must be a finite number >= 0, got {value!r}")
        if (
            isinstance(self.visits, bool)
            or not isinstance(self.visits, numbers.Real)
            or not self.visits > 0
            or not math.isfinite(self.visits)
        ):
            raise ValueError(f"visits (task visits per run) must be a finite number > 0, got {self.visits!r}")
        if self.model_size_exponent <= 0:
            raise ValueError(f"model_size_exponent must be > 0, got {self.model_size_exponent}")
        if not self.failed_fraction < 1:
            raise ValueError(f"failed_fraction must satisfy 0 <= f < 1, got {self.failed_fraction}")
        if not 0 < self.utilization <= 1:
            raise ValueError(f"utilization must satisfy 0 < eta <= 1, got {self.utilization}")
        terms = tuple(self.terms)
        unknown = set(terms) - set(TERMS)
        if unknown or len(set(terms)) != len(terms) or "linear" not in terms:
            raise ValueError(f"terms must be distinct names from {TERMS} including 'linear', got {terms}")
        object.__setattr__(self, "terms", tuple(t for t in TERMS if t in terms))

    @classmethod
    def from_mapping(cls, config: Mapping[str, Any]) -> CostModel:
        """A cost model from a config mapping of field names (``terms`` as a list); unknown keys are refused."""
        names = {f.name for f in fields(cls)}
        unknown = set(config) - names
        if unknown:
            raise ValueError(f"unknown cost-model keys {sorted(unknown)}; expected some of {sorted(names)}")
        values = dict(config)
        if "terms" in values:
            values["terms"] = tuple(values["terms"])
        return cls(**values)

    def perturbed(self, name: str, factor: float) -> CostModel:
        """This model with one coefficient multiplied by ``factor`` (Table 21: 1.5 and 0.5)."""
        if name not in _COEFFICIENTS:
            raise ValueError(f"cannot perturb {name!r}; coefficients are {_COEFFICIENTS}")
        if not factor > 0:
            raise ValueError(f"perturbation factor must be > 0, got {factor}")
        return replace(self, **{name: getattr(self, name) * factor})

    def progression(self) -> list[tuple[str, CostModel]]:
        """Table 19's rows: ``("linear", ...), ("+bilinear", ...), ...``, each adding the next term of ``TERMS``."""
        return [
            (TERMS[0] if k == 0 else f"+{TERMS[k]}", replace(self, terms=TERMS[: k + 1])) for k in range(len(TERMS))
        ]

    @cached_property
    def _coefficients(self) -> _Coefficients:
        """The coefficients with the enabled terms folded in: computed once, since the solver prices
        hundreds of thousands of designs with one model."""
        on = set(self.terms)
        eta = self.utilization if "utilization" in on else 1.0
        keep = 1.0 - self.failed_fraction if "failure" in on else 1.0
        per_rollout = self.c_traj
        if "latency" in on:
            per_rollout += (
                self.steps_per_rollout * self.env_seconds_per_call + self.verifier_seconds_per_rollout
            ) * self.c_second
        bilinear = self.c_token * self.tokens_per_rollout / eta / keep if "bilinear" in on else 0.0
        return _Coefficients(self.c_width / eta, self.c_env, self.c_task, per_rollout / keep, bilinear)

    def _parts(self, x: Mapping[str, ArrayLike]) -> _Parts:
        """Width compute, env and task synthesis, the rollout total and its bilinear part."""
        n, d_env, d_task, d_traj = (_number(x[a]) for a in RECIPE_AXES)
        width, env, task, per_rollout, per_token = self._coefficients
        rollouts = self.visits * d_traj
        bilinear = (
            per_token * n**self.model_size_exponent * rollouts
            if "bilinear" in self.terms
            else np.zeros_like(rollouts * n)
        )
        return _Parts(width * n, env * d_env, task * d_task, per_rollout * rollouts + bilinear, bilinear)

    def cost(self, x: Mapping[str, ArrayLike]) -> np.ndarray:
        """``C(x)`` in ``currency``, broadcast over the axis arrays."""
        width, env, task, rollout, _ = self._parts(x)
        return width + env + task + rollout

    def executed(self, x: Mapping[str, ArrayLike]) -> np.ndarray:
        """The part of ``C(x)`` a run executes: the bilinear rollout-compute term."""
        return self._parts(x).bilinear

    def declared(self, x: Mapping[str, ArrayLike]) -> np.ndarray:
        """The declared prices in ``C(x)``: everything but the executed part."""
        width, env, task, rollout, bilinear = self._parts(x)
        return width + env + task + rollout - bilinear

    def log_gradient(self, x: Mapping[str, ArrayLike]) -> dict[str, np.ndarray]:
        """``eps_i = dC/d ln x_i``: every R term counts for d_traj (``R = visits * d_traj``); N gets
        its own term plus ``model_size_exponent`` times the bilinear term."""
        width, env, task, rollout, bilinear = self._parts(x)
        return {"width": width + self.model_size_exponent * bilinear, "d_env": env, "d_task": task, "d_traj": rollout}


@dataclass(frozen=True)
class SyntheticOption:
    """Synthetic data for one data axis: ``D_s = r * D_real`` with ``0 <= r <= r_cap``.

    The law sees ``D_eff = D_real * (1 + kappa * r)``; each synthetic unit costs ``unit_cost`` (in the
    cost model's currency, all-in: whatever synthesis and rollouts it needs), added linearly to the
    cost model's cost of the real design. ``r_cap`` must sit strictly below the method's collapse ratio
    ``r*`` (past it, more synthetic data makes the law worse); pass ``r_star`` to have that checked.
    """

    kappa: float
    r_cap: float
    unit_cost: float
    r_star: float | None = None

    def __post_init__(self) -> None:
        for name in ("kappa", "r_cap", "unit_cost"):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"SyntheticOption.{name} must be finite")
        if self.r_cap < 0 or self.unit_cost < 0:
            raise ValueError(f"SyntheticOption needs r_cap >= 0 and unit_cost >= 0, got {self.r_cap}, {self.unit_cost}")
        if not 1 + self.kappa * self.r_cap > 0:
            raise ValueError(f"kappa {self.kappa} with r_cap {self.r_cap} makes D_eff = D_real * (1 + kappa r) <= 0")
        if self.r_star is not None and not self.r_cap < self.r_star:
            raise ValueError(f"r_cap {self.r_cap} must be strictly below the collapse ratio r* = {self.r_star}")
