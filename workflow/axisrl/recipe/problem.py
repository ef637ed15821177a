"""The recipe's optimisation problem at one budget, in log variables, and the record of a design.

Problem, in log variables ``u = ln x``: minimise ``ln L(e^u)`` subject to ``ln C(e^u) = ln budget``
with SLSQP from several starts; bounds keep the design physical (``D_tau >= 1``, ``D_E >= 1``,
``D_T >= D_E`` as an inequality, N in the trainable range), and every synthetic ratio is an extra
variable in ``[0, r_cap]``. Axes the law lacks (or that are ``fixed``) are held at given values.

KKT check: at the optimum ``-dL/d ln x_i = lambda eps_i`` (for the additive law ``alpha_i T_i``)
on every interior axis, with ``eps_i = dC/d ln x_i``; the gradients are analytic, through nesting
and saturation of the effective axes. ``kkt_spread`` is the relative spread
``(max - min) / mean`` of ``-dL/d ln x_i / eps_i`` over interior directions (``d_env`` and ``d_task``
count as one direction while ``D_T >= D_E`` binds); NaN with fewer than two directions.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from scipy import optimize

from axisrl.laws.joint import Law
from axisrl.recipe.cost import RECIPE_AXES, SYNTHETIC_AXES, Cost, SyntheticOption

Bounds = Mapping[str, tuple[float, float]]
"""``{axis: (low, high)}`` in real units, per free axis."""
DEFAULT_DATA_BOUNDS = (1.0, np.inf)
"""Bounds of a data axis not named in ``bounds``: at least one unit, no upper limit."""
_BOUND_TOL = 1e-7
"""A log variable this close to a bound (or ``ln D_T - ln D_E`` this close to 0) counts as binding."""
_AGREE_TOL = 1e-6
"""Two converged runs within this in every log variable (and 1e-9 in ``ln L``) found the same optimum."""
_KKT_TOL = 1e-6
"""Largest residual of the KKT stationarity condition, relative to the objective's gradient, that counts as met."""


class InfeasibleBudget(ValueError):
    """The budget lies outside the costs a strategy can reach; carries the limit and its currency."""

    def __init__(self, budget: float, limit: float, currency: str, side: str, where: str) -> None:
        self.budget, self.limit, self.currency = budget, limit, currency
        kind = "minimum" if side == "below" else "maximum"
        super().__init__(
            f"budget {budget:.6g} {currency} is {side} the {kind} feasible cost {limit:.6g} {currency} ({where})"
        )


@dataclass(frozen=True)
class Allocation:
    """A design at a budget. ``values``: all four axes in real units; ``ratios``: synthetic ``D_s/D_real``
    per synthetic axis; ``shares``: ``eps_i / C`` per axis (sum to 1 only for a linear cost);
    ``binding``: bounds and constraints active at the design; ``strategy``: who chose it."""

    strategy: str
    values: dict[str, float]
    ratios: dict[str, float]
    predicted_loss: float
    predicted_success: float
    cost: float
    budget: float
    currency: str
    shares: dict[str, float]
    binding: tuple[str, ...]
    kkt_spread: float
    status: str


def _law_axes(law: Law) -> set[str]:
    unknown = set(law.alpha) - set(RECIPE_AXES)
    if unknown:
        raise ValueError(f"law axes {sorted(unknown)} are not recipe axes {RECIPE_AXES}")
    return set(law.alpha) | ({"d_env"} if law.m_star is not None and "d_task" in law.alpha else set())


def _loss_and_log_gradient(law: Law, inputs: Mapping[str, float]) -> tuple[float, dict[str, float]]:
    """``L`` at the law's inputs and ``dL/d ln input`` per recipe axis, through nesting and saturation.

    Scalar ``math`` throughout: the solver calls this once per trial point, where numpy's per-call
    overhead would dominate."""
    gradient = dict.fromkeys(RECIPE_AXES, 0.0)
    loss = law.E
    for axis, alpha in law.alpha.items():
        value = float(inputs[axis])
        effective, d_effective = value, {axis: value}
        if axis == "d_task" and law.m_star is not None:
            capacity = law.m_star * inputs["d_env"]
            effective = -capacity * math.expm1(-value / capacity)
            tail = value * math.exp(-value / capacity)
            d_effective = {"d_task": tail, "d_env": effective - tail}
        elif axis == "d_traj" and law.k_star is not None:
            effective = -law.k_star * math.expm1(-value / law.k_star)
            d_effective = {"d_traj": value * math.exp(-value / law.k_star)}
        term = law.A[axis] * effective**-alpha
        loss += term
        for name, derivative in d_effective.items():
            gradient[name] -= alpha * term * derivative / effective
    return float(loss), {a: float(g) for a, g in gradient.items()}


class _Evaluation(NamedTuple):
    """A design's loss and cost with their gradients: in ``ln x`` for the real axes, in ``r`` for the ratios."""

    loss: float
    loss_gradient: dict[str, float]
    """``dL/d ln x`` per recipe axis."""
    loss_ratio: dict[str, float]
    """``dL/dr`` per synthetic axis."""
    cost: float
    eps: dict[str, float]
    """``dC/d ln x`` per recipe axis."""
    cost_ratio: dict[str, float]
    """``dC/dr`` per synthetic axis."""


def _evaluate(
    law: Law,
    cost_model: Cost,
    values: Mapping[str, float],
    ratios: Mapping[str, float],
    synthetic: Mapping[str, SyntheticOption],
) -> _Evaluation:
    """The ``_Evaluation`` of a real design with synthetic ratios."""
    scale = {a: 1.0 + synthetic[a].kappa * ratios[a] for a in synthetic}
    inputs = {a: values[a] * scale.get(a, 1.0) for a in RECIPE_AXES}
    loss, loss_gradient = _loss_and_log_gradient(law, inputs)
    loss_ratio = {a: loss_gradient[a] * synthetic[a].kappa / scale[a] for a in synthetic}
    surcharge = {a: synthetic[a].unit_cost * ratios[a] * values[a] for a in synthetic}
    cost = float(cost_model.cost(values)) + sum(surcharge.values())
    eps = {a: float(e) + surcharge.get(a, 0.0) for a, e in cost_model.log_gradient(values).items()}
    cost_ratio = {a: synthetic[a].unit_cost * values[a] for a in synthetic}
    return _Evaluation(loss, loss_gradient, loss_ratio, cost, eps, cost_ratio)


def _kkt_spread(
    loss_gradient: Mapping[str, float], eps: Mapping[str, float], directions: Sequence[Sequence[str]]
) -> float:
    """Relative spread ``(max - min) / mean`` of ``-dL/d ln x / eps`` over directions (groups of axes);
    a direction that costs nothing (eps 0) has no ratio and is left out."""
    priced = [group for group in directions if sum(eps[a] for a in group) > 0]
    if len(priced) < 2:
        return float("nan")
    ratios = np.array([-sum(loss_gradient[a] for a in group) / sum(eps[a] for a in group) for group in priced])
    scale = abs(ratios.mean())
    return float((ratios.max() - ratios.min()) / scale) if scale > 0 else float("nan")


def _allocation(
    strategy: str,
    law: Law,
    cost_model: Cost,
    budget: float,
    values: Mapping[str, float],
    ratios: Mapping[str, float],
    synthetic: Mapping[str, SyntheticOption],
    directions: Sequence[Sequence[str]],
    binding: tuple[str, ...],
    status: str,
) -> Allocation:
    evaluation = _evaluate(law, cost_model, values, ratios, synthetic)
    loss, cost, eps = evaluation.loss, evaluation.cost, evaluation.eps
    return Allocation(
        strategy=strategy,
        values={a: float(values[a]) for a in RECIPE_AXES},
        ratios={a: float(ratios[a]) for a in synthetic},
        predicted_loss=loss,
        predicted_success=float(np.exp(-loss)),
        cost=cost,
        budget=float(budget),
        currency=cost_model.currency,
        shares={a: eps[a] / cost for a in RECIPE_AXES},
        binding=binding,
        kkt_spread=_kkt_spread(evaluation.loss_gradient, eps, directions),
        status=status,
    )


class _Run(NamedTuple):
    """One SLSQP run from a start."""

    value: float
    """``ln L`` at the run's optimum clipped to the bounds; inf when that point misses the budget or ``D_T >= D_E``."""
    z: np.ndarray
    converged: bool
    status: int
    """SLSQP's exit mode (8: a line search found no descent at machine precision)."""
    message: str


class _Problem:
    """The log-space problem: free axes ``u = ln x`` then synthetic ratios ``r``, with their bounds."""

    def __init__(
        self,
        law: Law,
        cost_model: Cost,
        budget: float,
        bounds: Bounds,
        fixed: Mapping[str, float] | None,
        synthetic: Mapping[str, SyntheticOption] | None,
    ) -> None:
        self.law, self.cost_model, self.budget = law, cost_model, float(budget)
        self._arguments = (bounds, fixed, synthetic)
        self.fixed = {a: float(v) for a, v in (fixed or {}).items()}
        self.synthetic = {a: synthetic[a] for a in SYNTHETIC_AXES if a in (synthetic or {})}
        law_axes = _law_axes(law)
        for name, source in (("fixed", self.fixed), ("synthetic", synthetic or {}), ("bounds", bounds)):
            unknown = set(source) - set(RECIPE_AXES)
            if unknown:
                raise ValueError(f"{name} names unknown axes {sorted(unknown)}; axes are {RECIPE_AXES}")
        if not budget > 0 or not np.isfinite(budget):
            raise ValueError(f"budget must be a positive finite number, got {budget}")
        missing = [a for a in RECIPE_AXES if a not in law_axes and a not in self.fixed]
        if missing:
            raise ValueError(f"the law has no axes {missing}: hold them at a value with fixed={{axis: value}}")
        if set(self.synthetic) - law_axes:
            raise ValueError(f"synthetic {sorted(set(self.synthetic) - law_axes)} cannot help: the law lacks them")
        for axis, value in self.fixed.items():
            if not np.isfinite(value) or not value >= (1.0 if axis != "width" else np.nextafter(0, 1)):
                raise ValueError(f"fixed {axis} = {value} is not physical (width > 0, data axes >= 1)")
        self.free = tuple(a for a in RECIPE_AXES if a in law_axes and a not in self.fixed)
        if not self.free:
            raise ValueError("nothing to optimise: every axis of the law is fixed")
        limits = {}
        for axis in self.free:
            if axis not in bounds and axis == "width":
                raise ValueError("width is optimised: give its trainable range in bounds={'width': (low, high)}")
            low, high = (float(b) for b in bounds.get(axis, DEFAULT_DATA_BOUNDS))
            if axis in ("d_env", "d_traj") and low < 1:
                raise ValueError(f"{axis} lower bound {low} < 1 is not physical")
            limits[axis] = [low, high]
        if "d_env" in self.fixed and "d_task" in limits:
            limits["d_task"][0] = max(limits["d_task"][0], self.fixed["d_env"])
        if "d_task" in self.fixed and "d_env" in limits:
            limits["d_env"][1] = min(limits["d_env"][1], self.fixed["d_task"])
        if "d_task" in self.fixed and "d_env" in self.fixed and self.fixed["d_task"] < self.fixed["d_env"]:
            raise ValueError("fixed d_task is below fixed d_env: D_T >= D_E")
        for axis, (low, high) in limits.items():
            if not 0 < low < high:
                raise ValueError(f"bounds of {axis} must satisfy 0 < low < high, got ({low}, {high})")
        self.low = np.log([limits[a][0] for a in self.free])
        self.high = np.log([limits[a][1] for a in self.free])
        self.caps = np.array([option.r_cap for option in self.synthetic.values()])
        self.lower = np.concatenate([self.low, np.zeros(len(self.synthetic))])
        self.upper = np.concatenate([self.high, self.caps])
        self.coupled = "d_env" in self.free and "d_task" in self.free
        if self.coupled and limits["d_task"][1] < limits["d_env"][0]:
            raise ValueError("the d_task upper bound is below the d_env lower bound: D_T >= D_E is infeasible")
        self._last: tuple[bytes, _Evaluation | None] = (b"", None)
        self.min_cost = self.cost(self.lowest())
        self.max_cost = self.cost(self.highest()) if np.isfinite(self.high).all() else np.inf

    def at(self, budget: float) -> _Problem:
        """The same problem at another budget."""
        return _Problem(self.law, self.cost_model, budget, *self._arguments)

    def lowest(self) -> np.ndarray:
        """The cheapest feasible point: free axes at their lower bounds (``D_T`` raised to ``D_E``), no synthetic."""
        return self._couple(np.concatenate([self.low, np.zeros(len(self.synthetic))]))

    def highest(self) -> np.ndarray:
        """The dearest feasible point: free axes at their upper bounds (``D_E`` lowered to ``D_T``), ratios at caps."""
        z = np.concatenate([self.high, self.caps])
        if self.coupled:
            env, task = self.free.index("d_env"), self.free.index("d_task")
            z[env] = min(z[env], z[task])
        return z

    def _couple(self, z: np.ndarray) -> np.ndarray:
        if self.coupled:
            z = z.copy()
            env, task = self.free.index("d_env"), self.free.index("d_task")
            z[task] = max(z[task], z[env])
        return z

    def design(self, z: np.ndarray) -> tuple[dict[str, float], dict[str, float]]:
        logs = np.asarray(z).tolist()
        values = self.fixed | dict(zip(self.free, map(math.exp, logs)))
        return values, dict(zip(self.synthetic, logs[len(self.free) :]))

    def point(self, design: Mapping[str, float]) -> np.ndarray:
        """The variables of a design given as a path row (axes and ``ratio_<axis>``): the inverse of ``design``."""
        return np.array([math.log(design[a]) for a in self.free] + [design[f"ratio_{a}"] for a in self.synthetic])

    def _evaluated(self, z: np.ndarray) -> _Evaluation:
        """``_evaluate`` at ``z``, kept for the latest point: SLSQP asks for the objective, the budget gap
        and their gradients at the same point in separate calls."""
        key = np.asarray(z, dtype=np.float64).tobytes()
        if key != self._last[0]:
            self._last = key, _evaluate(self.law, self.cost_model, *self.design(z), self.synthetic)
        return self._last[1]

    def cost(self, z: np.ndarray) -> float:
        return self._evaluated(z).cost

    def check_budget(self) -> None:
        if self.budget < self.min_cost * (1 - 1e-12):
            raise InfeasibleBudget(
                self.budget,
                self.min_cost,
                self.cost_model.currency,
                "below",
                "free axes at their lower bounds, no synthetic data",
            )
        if self.budget > self.max_cost * (1 + 1e-12):
            raise InfeasibleBudget(
                self.budget,
                self.max_cost,
                self.cost_model.currency,
                "above",
                "free axes at their upper bounds, synthetic ratios at their caps",
            )

    def objective(self, z: np.ndarray) -> tuple[float, np.ndarray]:
        evaluation = self._evaluated(z)
        gradient = [evaluation.loss_gradient[a] for a in self.free] + [evaluation.loss_ratio[a] for a in self.synthetic]
        return math.log(evaluation.loss), np.array(gradient) / evaluation.loss

    def budget_gap(self, z: np.ndarray) -> float:
        return math.log(self.cost(z) / self.budget)

    def budget_jacobian(self, z: np.ndarray) -> np.ndarray:
        evaluation = self._evaluated(z)
        gradient = [evaluation.eps[a] for a in self.free] + [evaluation.cost_ratio[a] for a in self.synthetic]
        return np.array(gradient) / evaluation.cost

    def start(self, rng: np.random.Generator) -> np.ndarray:
        """A point on the budget: free axes moved up from their lower bounds along a random direction."""
        weights = rng.uniform(0.1, 1.0, len(self.free))
        ratios = rng.uniform(0.0, 1.0, len(self.synthetic)) * self.caps

        def point(t: float) -> np.ndarray:
            return self._couple(np.concatenate([np.minimum(self.low + t * weights, self.high), ratios]))

        if self.budget_gap(point(0.0)) > 0:
            ratios = np.zeros_like(ratios)
            if self.budget_gap(point(0.0)) >= 0:
                return point(0.0)
        top = 1.0
        while self.budget_gap(point(top)) < 0:
            if np.all(self.low + top * weights >= self.high):
                ratios = self.caps  # every free axis at its upper bound: only synthetic data can spend more
                return point(top)
            if top > 1e4:
                raise ValueError("the cost does not grow to the budget along the free axes")
            top *= 2.0
        return point(optimize.brentq(lambda t: self.budget_gap(point(t)), 0.0, top, xtol=1e-12))

    def feasible(self, z: np.ndarray) -> bool:
        on_budget = abs(self.budget_gap(z)) < 1e-8
        return on_budget and (not self.coupled or z[self.free.index("d_env")] - z[self.free.index("d_task")] < 1e-9)

    def _coupling(self) -> np.ndarray:
        """Gradient of ``ln D_T - ln D_E``, the left side of ``D_T >= D_E``."""
        step = np.zeros(len(self.lower))
        step[self.free.index("d_task")], step[self.free.index("d_env")] = 1.0, -1.0
        return step

    def minimise(self, starts: Iterable[np.ndarray], agree: int | None = None) -> tuple[np.ndarray, str]:
        """Best feasible SLSQP optimum over ``starts``, and "ok" when a converged run reached it (to 1e-9
        in ``ln L``), else the solver's message.

        Runs use ``ftol = 1e-14`` for a tight KKT check; a run that stops on a line-search failure
        (mode 8: no descent found at machine precision) counts as converged when a run from the same
        start at ``ftol = 1e-10`` converges to a point that is no better. With ``agree``, the search
        stops once that many converged runs reached the best point (``_AGREE_TOL``): more starts would
        only find it again. Where the optimum is not unique (a direction that changes neither loss nor
        cost) runs do not agree and every start is tried, as without ``agree``.
        """
        bounds = [(lo, hi if np.isfinite(hi) else None) for lo, hi in zip(self.lower, self.upper, strict=True)]
        constraints = [{"type": "eq", "fun": self.budget_gap, "jac": self.budget_jacobian}]
        if self.coupled:
            step = self._coupling()
            constraints.append({"type": "ineq", "fun": lambda z: float(step @ z), "jac": lambda z: step})

        def run(start: np.ndarray, ftol: float) -> _Run:
            result = optimize.minimize(
                self.objective,
                start,
                jac=True,
                method="SLSQP",
                bounds=bounds,
                constraints=constraints,
                options={"ftol": ftol, "maxiter": 1000},
            )
            z = np.clip(result.x, self.lower, self.upper)
            return _Run(
                self.objective(z)[0] if self.feasible(z) else np.inf,
                z,
                bool(result.success),
                result.status,
                str(result.message),
            )

        runs: list[_Run] = []
        for start in starts:
            tight = run(start, 1e-14)
            converged = tight.converged
            if tight.status == 8 and np.isfinite(tight.value):
                loose = run(start, 1e-10)
                converged = loose.converged and tight.value <= loose.value + 1e-9
            runs.append(tight._replace(converged=bool(converged and np.isfinite(tight.value))))
            best = min(runs, key=lambda run: run.value)
            if (
                agree
                and sum(
                    run.converged and run.value <= best.value + 1e-9 and np.abs(run.z - best.z).max() <= _AGREE_TOL
                    for run in runs
                )
                >= agree
            ):
                break
        confirmed = any(run.converged and run.value <= best.value + 1e-9 for run in runs)
        return best.z, "ok" if confirmed else f"not converged: {best.message}"

    def satisfies_kkt(self, z: np.ndarray) -> bool:
        """Whether ``z`` is a KKT point to ``_KKT_TOL``: the objective's gradient is a multiple of the budget's
        plus non-negative multiples of the active bounds' and ``D_T >= D_E``'s normals (non-negative least
        squares over the active set), so no feasible direction lowers the loss."""
        _, gradient = self.objective(z)
        normal = self.budget_jacobian(z)
        identity = np.eye(len(z))
        normals = [normal, -normal, *identity[z - self.lower < _BOUND_TOL], *-identity[self.upper - z < _BOUND_TOL]]
        if self.coupled and self._coupling() @ z < _BOUND_TOL:
            normals.append(self._coupling())
        _, residual = optimize.nnls(np.column_stack(normals), gradient)
        return bool(residual <= _KKT_TOL * np.linalg.norm(gradient))

    def binding(self, z: np.ndarray) -> tuple[tuple[str, ...], list[list[str]]]:
        """(active bounds and constraints, interior directions for the KKT check)."""
        active, pinned = [], set()
        for i, axis in enumerate(self.free):
            if z[i] - self.low[i] < _BOUND_TOL:
                active.append(f"{axis}>=lower")
                pinned.add(axis)
            elif self.high[i] - z[i] < _BOUND_TOL:
                active.append(f"{axis}<=upper")
                pinned.add(axis)
        for j, axis in enumerate(self.synthetic):
            r = z[len(self.free) + j]
            if r < _BOUND_TOL:
                active.append(f"ratio_{axis}>=0")
            elif self.caps[j] - r < _BOUND_TOL:
                active.append(f"ratio_{axis}<=r_cap")
        directions = [[a] for a in self.free if a not in pinned]
        if self.coupled and z[self.free.index("d_task")] - z[self.free.index("d_env")] < _BOUND_TOL:
            active.append("d_task>=d_env")
            directions = [d for d in directions if d[0] not in ("d_env", "d_task")]
            if not pinned & {"d_env", "d_task"}:
                directions.append(["d_env", "d_task"])
        return tuple(active), directions

    def allocation(self, z: np.ndarray, status: str) -> Allocation:
        binding, directions = self.binding(z)
        return _allocation(
            "recipe",
            self.law,
            self.cost_model,
            self.budget,
            *self.design(z),
            self.synthetic,
            directions,
            binding,
            status,
        )


def allocation_at(
    law: Law, cost_model: Cost, values: Mapping[str, float], budget: float, *, strategy: str, held: Sequence[str] = ()
) -> Allocation:
    """The record of a given real-data design at ``budget``, for baselines under the same cost model;
    its ``kkt_spread`` over the law's axes not in ``held`` measures how far the design is from optimal."""
    directions = [[a] for a in RECIPE_AXES if a in _law_axes(law) and a not in held]
    return _allocation(strategy, law, cost_model, budget, values, {}, {}, directions, (), "ok")
