"""Compute-optimal allocation under a fitted law and a cost model, solved numerically (fitting.md 5.4, 6).

Why numerically: the recipe's exponents have a closed form only for monomial costs (a product
constraint gives ``a_i = (1/alpha_i) / sum_j 1/alpha_j``); with linear synthesis costs, a bilinear
rollout term, nesting and saturation they drift with the budget, so they are measured as fitted
slopes of the optimal path, with local slopes and the identity ``sum_i (eps_i/C) a_i = 1`` as checks.

Problem, in log variables ``u = ln x``: minimise ``ln L(e^u)`` subject to ``ln C(e^u) = ln budget``
with SLSQP from several starts; bounds keep the design physical (``D_tau >= 1``, ``D_E >= 1``,
``D_T >= D_E`` as an inequality, N in the trainable range), and every synthetic ratio is an extra
variable in ``[0, r_cap]``. Axes the law lacks (or that are ``fixed``) are held at given values.

KKT check: at the optimum ``-dL/d ln x_i = lambda eps_i`` (for the additive law ``alpha_i T_i``)
on every interior axis, with ``eps_i = dC/d ln x_i``; the gradients are analytic, through nesting
and saturation of the effective axes. ``kkt_spread`` is the relative spread
``(max - min) / mean`` of ``-dL/d ln x_i / eps_i`` over interior directions (``d_env`` and ``d_task``
count as one direction while ``D_T >= D_E`` binds); NaN with fewer than two directions.

The paper's ``alpha_i / sum alpha_j`` is available only as ``paper_convention``: it solves no
Lagrangian of an additive power law (fitting.md 6(d)).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl
from scipy import optimize

from axisrl.laws.joint import Law
from axisrl.recipe.cost import RECIPE_AXES, SYNTHETIC_AXES, Cost, SyntheticOption

Bounds = Mapping[str, tuple[float, float]]
DEFAULT_DATA_BOUNDS = (1.0, np.inf)
"""Bounds of a data axis not named in ``bounds``: at least one unit, no upper limit."""
_BOUND_TOL = 1e-7
"""A log variable this close to a bound (or ``ln D_T - ln D_E`` this close to 0) counts as binding."""
_LOCAL_STEP = 0.02
"""Half-width in ``ln C`` of the central difference that gives the local exponents of a path."""
_AGREE_TOL = 1e-6
"""Two converged runs within this in every log variable (and 1e-9 in ``ln L``) found the same optimum."""
_KKT_TOL = 1e-6
"""Largest residual of the KKT stationarity condition, relative to the objective's gradient, that counts as met."""


class InfeasibleBudget(ValueError):
    """The budget lies outside the costs a strategy can reach; carries the limit and its currency."""

    def __init__(self, budget: float, limit: float, currency: str, side: str, where: str) -> None:
        self.budget, self.limit, self.currency = budget, limit, currency
        kind = "minimum" if side == "below" else "maximum"
        super().__init__(f"budget {budget:.6g} {currency} is {side} the {kind} feasible cost "
                         f"{limit:.6g} {currency} ({where})")


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


_Evaluation = tuple[float, dict[str, float], dict[str, float], float, dict[str, float], dict[str, float]]
"""(L, dL/d ln x, dL/dr, C, eps = dC/d ln x, dC/dr) of a design."""


def _evaluate(law: Law, cost_model: Cost, values: Mapping[str, float], ratios: Mapping[str, float],
              synthetic: Mapping[str, SyntheticOption]) -> _Evaluation:
    """(L, dL/d ln x, dL/dr, C, eps = dC/d ln x, dC/dr) of a real design with synthetic ratios."""
    scale = {a: 1.0 + synthetic[a].kappa * ratios[a] for a in synthetic}
    inputs = {a: values[a] * scale.get(a, 1.0) for a in RECIPE_AXES}
    loss, loss_gradient = _loss_and_log_gradient(law, inputs)
    loss_ratio = {a: loss_gradient[a] * synthetic[a].kappa / scale[a] for a in synthetic}
    surcharge = {a: synthetic[a].unit_cost * ratios[a] * values[a] for a in synthetic}
    cost = float(cost_model.cost(values)) + sum(surcharge.values())
    eps = {a: float(e) + surcharge.get(a, 0.0) for a, e in cost_model.log_gradient(values).items()}
    cost_ratio = {a: synthetic[a].unit_cost * values[a] for a in synthetic}
    return loss, loss_gradient, loss_ratio, cost, eps, cost_ratio


def _kkt_spread(loss_gradient: Mapping[str, float], eps: Mapping[str, float],
                directions: Sequence[Sequence[str]]) -> float:
    """Relative spread ``(max - min) / mean`` of ``-dL/d ln x / eps`` over directions (groups of axes);
    a direction that costs nothing (eps 0) has no ratio and is left out."""
    priced = [group for group in directions if sum(eps[a] for a in group) > 0]
    if len(priced) < 2:
        return float("nan")
    ratios = np.array([-sum(loss_gradient[a] for a in group) / sum(eps[a] for a in group) for group in priced])
    scale = abs(ratios.mean())
    return float((ratios.max() - ratios.min()) / scale) if scale > 0 else float("nan")


def _allocation(strategy: str, law: Law, cost_model: Cost, budget: float, values: Mapping[str, float],
                ratios: Mapping[str, float], synthetic: Mapping[str, SyntheticOption],
                directions: Sequence[Sequence[str]], binding: tuple[str, ...], status: str) -> Allocation:
    loss, loss_gradient, _, cost, eps, _ = _evaluate(law, cost_model, values, ratios, synthetic)
    return Allocation(strategy=strategy, values={a: float(values[a]) for a in RECIPE_AXES},
                      ratios={a: float(ratios[a]) for a in synthetic}, predicted_loss=loss,
                      predicted_success=float(np.exp(-loss)), cost=cost, budget=float(budget),
                      currency=cost_model.currency, shares={a: eps[a] / cost for a in RECIPE_AXES}, binding=binding,
                      kkt_spread=_kkt_spread(loss_gradient, eps, directions), status=status)


class _Problem:
    """The log-space problem: free axes ``u = ln x`` then synthetic ratios ``r``, with their bounds."""

    def __init__(self, law: Law, cost_model: Cost, budget: float, bounds: Bounds,
                 fixed: Mapping[str, float] | None, synthetic: Mapping[str, SyntheticOption] | None) -> None:
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
        return values, dict(zip(self.synthetic, logs[len(self.free):]))

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
        return self._evaluated(z)[3]

    def check_budget(self) -> None:
        if self.budget < self.min_cost * (1 - 1e-12):
            raise InfeasibleBudget(self.budget, self.min_cost, self.cost_model.currency, "below",
                                   "free axes at their lower bounds, no synthetic data")
        if self.budget > self.max_cost * (1 + 1e-12):
            raise InfeasibleBudget(self.budget, self.max_cost, self.cost_model.currency, "above",
                                   "free axes at their upper bounds, synthetic ratios at their caps")

    def objective(self, z: np.ndarray) -> tuple[float, np.ndarray]:
        loss, loss_gradient, loss_ratio, *_ = self._evaluated(z)
        gradient = [loss_gradient[a] for a in self.free] + [loss_ratio[a] for a in self.synthetic]
        return math.log(loss), np.array(gradient) / loss

    def budget_gap(self, z: np.ndarray) -> float:
        return math.log(self.cost(z) / self.budget)

    def budget_jacobian(self, z: np.ndarray) -> np.ndarray:
        *_, cost, eps, cost_ratio = self._evaluated(z)
        return np.array([eps[a] for a in self.free] + [cost_ratio[a] for a in self.synthetic]) / cost

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

        def run(start: np.ndarray, ftol: float) -> tuple[optimize.OptimizeResult, np.ndarray, float]:
            result = optimize.minimize(self.objective, start, jac=True, method="SLSQP", bounds=bounds,
                                       constraints=constraints, options={"ftol": ftol, "maxiter": 1000})
            z = np.clip(result.x, self.lower, self.upper)
            return result, z, self.objective(z)[0] if self.feasible(z) else np.inf

        runs = []
        for start in starts:
            result, z, value = run(start, 1e-14)
            converged = bool(result.success)
            if result.status == 8 and np.isfinite(value):
                loose, _, loose_value = run(start, 1e-10)
                converged = bool(loose.success) and value <= loose_value + 1e-9
            runs.append((value, z, converged and np.isfinite(value), str(result.message)))
            best = min(runs, key=lambda run: run[0])
            if agree and sum(ok and value <= best[0] + 1e-9 and np.abs(z - best[1]).max() <= _AGREE_TOL
                             for value, z, ok, _ in runs) >= agree:
                break
        confirmed = any(ok and value <= best[0] + 1e-9 for value, _, ok, _ in runs)
        return best[1], "ok" if confirmed else f"not converged: {best[3]}"

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
        return _allocation("recipe", self.law, self.cost_model, self.budget, *self.design(z), self.synthetic,
                           directions, binding, status)


def allocation_at(law: Law, cost_model: Cost, values: Mapping[str, float], budget: float, *, strategy: str,
                  held: Sequence[str] = ()) -> Allocation:
    """The record of a given real-data design at ``budget``, for baselines under the same cost model;
    its ``kkt_spread`` over the law's axes not in ``held`` measures how far the design is from optimal."""
    directions = [[a] for a in RECIPE_AXES if a in _law_axes(law) and a not in held]
    return _allocation(strategy, law, cost_model, budget, values, {}, {}, directions, (), "ok")


def _solve(problem: _Problem, starts: int, seed: int, warm: Sequence[np.ndarray] = ()) -> tuple[np.ndarray, str]:
    """SLSQP from the warm starts, then from random starts drawn as needed, until two converged runs agree."""
    problem.check_budget()
    rng = np.random.default_rng(seed)
    return problem.minimise(itertools.chain(warm, (problem.start(rng) for _ in range(starts))), agree=2)


def _resolve(problem: _Problem, starts: int, seed: int, near: np.ndarray) -> tuple[np.ndarray, str]:
    """A re-solve next to a known optimum: SLSQP from ``near`` alone, kept when it converged and passes the
    KKT check, else ``_solve`` from ``near`` and ``starts`` random starts."""
    problem.check_budget()
    z, status = problem.minimise([near])
    if status == "ok" and problem.satisfies_kkt(z):
        return z, status
    return _solve(problem, starts, seed, [near])


def solve(law: Law, cost_model: Cost, budget: float, *, bounds: Bounds, fixed: Mapping[str, float] | None = None,
          synthetic: Mapping[str, SyntheticOption] | None = None, starts: int = 10, seed: int = 0) -> Allocation:
    """The loss-minimising design at ``budget`` (in ``cost_model.currency``).

    ``bounds``: ``{axis: (low, high)}`` for free axes; ``width`` must be given when the law has it (the
    trainable range), data axes default to ``[1, inf)``. ``fixed``: axes held at a value (required for
    axes the law lacks). ``synthetic``: ``{axis: SyntheticOption}`` adds the ratio ``r`` of that axis as
    a variable in ``[0, r_cap]``. Raises ``InfeasibleBudget`` when the budget is below the cost at the
    lower bounds or above the cost at the upper bounds.
    """
    problem = _Problem(law, cost_model, budget, bounds, fixed, synthetic)
    return problem.allocation(*_solve(problem, starts, seed))


def log_budgets(low: float, high: float, n: int = 15) -> np.ndarray:
    """``n`` log-spaced budgets from ``low`` to ``high`` (fitting.md 5.4 asks for at least 15)."""
    if not 0 < low < high or n < 2:
        raise ValueError(f"need 0 < low < high and n >= 2, got ({low}, {high}, {n})")
    return np.geomspace(low, high, n)


def _local_exponents(problem: _Problem, z: np.ndarray, seed: int) -> dict[str, float | str]:
    """``d ln x_i* / d ln C`` by a central difference of re-solves at ``C e^{+-h}`` warm-started from ``z``
    (one-sided where the shifted budget is infeasible), and "ok" or the first failed status."""
    ends, steps, status = [], [], "ok"
    for sign in (1.0, -1.0):
        near = problem.at(problem.budget * np.exp(sign * _LOCAL_STEP))
        try:
            near_z, near_status = _solve(near, 0, seed, [z])
        except InfeasibleBudget:
            near, near_z, near_status, sign = problem, z, "ok", 0.0
        ends.append(near.design(near_z)[0])
        steps.append(sign * _LOCAL_STEP)
        status = status if near_status == "ok" else near_status
    span = steps[0] - steps[1]
    return {**{f"local_{a}": float(np.log(ends[0][a] / ends[1][a]) / span) if span else float("nan")
               for a in RECIPE_AXES},
            "local_status": status}


def recipe_path(law: Law, cost_model: Cost, budgets: Sequence[float], *, bounds: Bounds,
                fixed: Mapping[str, float] | None = None, synthetic: Mapping[str, SyntheticOption] | None = None,
                starts: int = 10, seed: int = 0, local: bool = True) -> pl.DataFrame:
    """One row per budget (ascending) of the optimal design.

    Columns: ``compute`` (the budget C), ``currency``, ``cost``, the four axes, ``ratio_<axis>`` per synthetic axis,
    ``predicted_loss``, ``predicted_success``, ``share_<axis>`` (``eps_i / C``: cost elasticity, sums to 1
    only for a linear cost), ``local_<axis>`` (with ``local``: ``d ln x_i* / d ln C`` by a central
    difference of warm-started re-solves at ``C e^{+-0.02}``), ``kkt_spread``, ``binding`` (list of
    active bounds/constraints) and ``status``. Each solve starts from the previous optimum, then from random
    starts until two converged runs agree (``_solve``).
    """
    return _path(law, cost_model, budgets, bounds, fixed, synthetic, starts, seed, local=local, draw=False)


def draw_path(law: Law, cost_model: Cost, budgets: Sequence[float], *, bounds: Bounds,
              fixed: Mapping[str, float] | None = None, synthetic: Mapping[str, SyntheticOption] | None = None,
              starts: int = 10, seed: int = 0, near: Mapping[str, float] | None = None) -> pl.DataFrame:
    """``recipe_path`` without local slopes, for the many bootstrap draws of a law: past the first budget
    each solve starts from the previous optimum alone and keeps it when it passes the KKT check, falling
    back to the random starts only where it does not (a draw's optimum moves smoothly with the budget).

    ``near``: a design close to the first budget's optimum, such as the first row of another draw's path
    (the axes, and ``ratio_<axis>`` per synthetic axis); the first solve then starts from it the same way.
    """
    return _path(law, cost_model, budgets, bounds, fixed, synthetic, starts, seed, local=False, draw=True,
                 near=near)


def _path(law: Law, cost_model: Cost, budgets: Sequence[float], bounds: Bounds, fixed: Mapping[str, float] | None,
          synthetic: Mapping[str, SyntheticOption] | None, starts: int, seed: int, *, local: bool, draw: bool,
          near: Mapping[str, float] | None = None) -> pl.DataFrame:
    """The rows of ``recipe_path`` (``draw=False``) or of ``draw_path`` (``draw=True``)."""
    budgets = np.sort(np.asarray(budgets, dtype=np.float64))
    rows, z = [], None
    for budget in budgets:
        problem = _Problem(law, cost_model, budget, bounds, fixed, synthetic)
        if z is None and near is not None:
            z = problem.point(near)
        if draw and z is not None:
            z, status = _resolve(problem, starts, seed, z)
        else:
            z, status = _solve(problem, starts, seed, [] if z is None else [z])
        allocation = problem.allocation(z, status)
        row = {"compute": float(budget), "currency": allocation.currency, "cost": allocation.cost,
               **allocation.values, **{f"ratio_{a}": r for a, r in allocation.ratios.items()},
               "predicted_loss": allocation.predicted_loss, "predicted_success": allocation.predicted_success,
               **{f"share_{a}": s for a, s in allocation.shares.items()}}
        if local:
            row |= _local_exponents(problem, z, seed)
            status = status if row.pop("local_status") == "ok" else "local slope not converged"
        rows.append(row | {"kkt_spread": allocation.kkt_spread, "binding": list(allocation.binding),
                           "status": status})
    return pl.DataFrame(rows, schema_overrides={"binding": pl.List(pl.String)})


EXPONENT_SCHEMA = {"axis": pl.String, "slope": pl.Float64, "local_low": pl.Float64, "local_mid": pl.Float64,
                   "local_high": pl.Float64, "c_low": pl.Float64, "c_mid": pl.Float64, "c_high": pl.Float64,
                   "pinned": pl.Boolean}


def exponents(path: pl.DataFrame) -> pl.DataFrame:
    """Recipe exponents ``a_i = d ln x_i* / d ln C`` of a ``recipe_path``.

    One row per axis: ``slope`` (OLS of ``ln x_i*`` on ``ln C`` over ``[c_low, c_high]``), local slopes at
    the lowest, middle and highest budget (the path's ``local_<axis>`` columns, else a second-order
    finite difference along the path), and ``pinned`` (held at a bound at every budget, or fixed:
    slopes 0). Then ``sum`` (unweighted: 1 only for a unit monomial cost) and ``share_weighted_sum``
    (``sum_i (eps_i/C) a_i`` with local slopes, which is 1 at every budget when the synthetic ratios
    do not move; it has no OLS ``slope``).
    """
    if path.height < 3:
        raise ValueError("exponents need a path of at least 3 budgets")
    ln_c = np.log(path["compute"].to_numpy())
    ends = (0, path.height // 2, path.height - 1)
    c_range = {"c_low": float(path["compute"][0]), "c_mid": float(path["compute"][ends[1]]),
               "c_high": float(path["compute"][-1])}
    binding = path["binding"].to_list()
    rows, locals_ = [], {}
    for axis in RECIPE_AXES:
        ln_x = np.log(path[axis].to_numpy())
        pinned = bool(np.ptp(ln_x) == 0 or all(f"{axis}>=lower" in b or f"{axis}<=upper" in b for b in binding))
        local = (path[f"local_{axis}"].to_numpy() if f"local_{axis}" in path.columns
                 else np.gradient(ln_x, ln_c, edge_order=2))
        locals_[axis] = np.zeros_like(ln_c) if pinned else local
        slope = 0.0 if pinned else float(np.polyfit(ln_c, ln_x, 1)[0])
        rows.append({"axis": axis, "slope": slope, **{f"local_{end}": float(locals_[axis][k])
                                                      for end, k in zip(("low", "mid", "high"), ends, strict=True)},
                     **c_range, "pinned": pinned})
    weighted = sum(path[f"share_{a}"].to_numpy() * locals_[a] for a in RECIPE_AXES)
    rows.append({"axis": "sum", "slope": sum(r["slope"] for r in rows),
                 **{f"local_{end}": float(sum(locals_[a][k] for a in RECIPE_AXES))
                    for end, k in zip(("low", "mid", "high"), ends, strict=True)}, **c_range, "pinned": None})
    rows.append({"axis": "share_weighted_sum", "slope": None,
                 **{f"local_{end}": float(weighted[k]) for end, k in zip(("low", "mid", "high"), ends, strict=True)},
                 **c_range, "pinned": None})
    return pl.DataFrame(rows, schema=EXPONENT_SCHEMA)


def paper_convention(law: Law) -> pl.DataFrame:
    """The paper's normalisation ``alpha_i / sum_j alpha_j`` per axis, labelled as such.

    It is NOT a solution of the Lagrangian of any additive power law (that gives the inverse
    ordering, ``(1/alpha_i) / sum_j 1/alpha_j`` for a product cost); it equals the budget shares
    of a Cobb-Douglas success model under linear costs (fitting.md 6(d)). Kept only so that the
    paper's table can be reproduced next to the solved exponents. An axis whose fitted amplitude
    ``A_i`` is 0 has no effect on the loss, whatever its exponent, and counts as ``alpha_i = 0``.
    """
    alpha = {a: law.alpha[a] if law.A[a] > 0 else 0.0 for a in law.alpha}
    total = sum(alpha.values())
    return pl.DataFrame([{"axis": a, "alpha": alpha[a], "paper_exponent": alpha[a] / total if total > 0 else None,
                          "convention": "paper: alpha_i / sum_j alpha_j (not a Lagrangian solution)"}
                         for a in RECIPE_AXES if a in law.alpha])


def bootstrap_exponents(laws: Sequence[Law], cost_model: Cost, budgets: Sequence[float], *, bounds: Bounds,
                        fixed: Mapping[str, float] | None = None,
                        synthetic: Mapping[str, SyntheticOption] | None = None, starts: int = 4, seed: int = 0,
                        level: float = 0.95) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Exponents re-solved for every bootstrap draw of the law (``draw_path``): (draws, intervals).

    ``draws``: ``draw``, ``axis`` (the four axes and ``sum``), OLS ``slope``, ``status`` ("ok" or the
    first failed solve on that draw's path), ``identified`` (the draw gives the axis an effect,
    ``A > 0``; true for axes the law holds fixed and for ``sum``). ``intervals``: per axis the
    percentile interval at ``level`` and the median over the "ok" draws that identify the axis, with
    ``n_draws`` used and ``n_failed`` left out. A draw without an effect on an axis leaves that axis
    whatever budget the others do not take, so its slope describes the constraint and the solver,
    not the data; mixed in, such draws can push an interval off the fitted slope.
    """
    rows, near = [], None
    for draw, law in enumerate(laws):
        path = draw_path(law, cost_model, budgets, bounds=bounds, fixed=fixed, synthetic=synthetic, starts=starts,
                         seed=seed, near=near)
        near = path.row(0, named=True)  # draws lie close together: each starts the next one's first solve
        failed = path.filter(pl.col("status") != "ok")["status"]
        status = "ok" if failed.is_empty() else failed[0]
        table = exponents(path).filter(pl.col("axis") != "share_weighted_sum")
        rows += [{"draw": draw, "axis": axis, "slope": slope, "status": status,
                  "identified": law.A.get(axis, 1.0) > 0}
                 for axis, slope in zip(table["axis"], table["slope"], strict=True)]
    draws = pl.DataFrame(rows, schema={"draw": pl.Int64, "axis": pl.String, "slope": pl.Float64, "status": pl.String,
                                       "identified": pl.Boolean})
    tail = (1 - level) / 2
    used = (pl.col("status") == "ok") & pl.col("identified")
    intervals = (draws.group_by("axis", maintain_order=True)
                 .agg(pl.col("slope").filter(used).quantile(tail, "linear").alias("slope_lo"),
                      pl.col("slope").filter(used).median().alias("slope_median"),
                      pl.col("slope").filter(used).quantile(1 - tail, "linear").alias("slope_hi"),
                      used.sum().cast(pl.Int64).alias("n_draws"),
                      (pl.col("status") != "ok").sum().cast(pl.Int64).alias("n_failed"))
                 .with_columns(pl.lit(level).alias("level")))
    return draws, intervals


def compute_efficiency(law: Law, cost_model: Cost, baseline_loss: float, budget: float, *, bounds: Bounds,
                       fixed: Mapping[str, float] | None = None,
                       synthetic: Mapping[str, SyntheticOption] | None = None, starts: int = 10,
                       seed: int = 0) -> float:
    """Efficiency multiplier ``m = budget / C*(baseline_loss)`` of the recipe over a baseline.

    ``baseline_loss`` is the baseline's loss at ``budget``: for a measured baseline with held-out
    success ``p`` at cost ``budget`` pass ``-ln p``; for a predicted one, e.g.
    ``trajectories_only(...).predicted_loss``. ``C*`` inverts the monotone optimal frontier
    ``L*(C)`` by root finding on ``ln C`` (each evaluation a ``solve``, after the first one started from
    the previous optimum and kept when it passes the KKT check). ``m`` depends on the budget and the
    baseline, so state both with it. Raises ``ValueError`` when the baseline is worse than the cheapest
    feasible design (only a lower bound on ``m`` exists) or better than the frontier can reach within
    the bounds.
    """
    problem = _Problem(law, cost_model, budget, bounds, fixed, synthetic)
    target = np.log(baseline_loss)
    warm: list[np.ndarray] = []
    gaps: dict[float, float] = {}  # each budget solved once: brentq sees the bracket the search below found

    def gap(ln_cost: float) -> float:
        if ln_cost not in gaps:
            near = problem.at(float(np.exp(ln_cost)))
            z, status = _resolve(near, starts, seed, warm[0]) if warm else _solve(near, starts, seed)
            if status != "ok":
                raise RuntimeError(f"the frontier solve at C = {near.budget:.6g} {cost_model.currency} failed: "
                                   f"{status}")
            warm[:] = [z]
            gaps[ln_cost] = near.objective(z)[0] - target
        return gaps[ln_cost]

    low = np.log(problem.min_cost)
    if problem.objective(problem.lowest())[0] <= target:
        raise ValueError(f"baseline loss {baseline_loss:.6g} is reached by the cheapest feasible design "
                         f"({np.exp(low):.6g} {cost_model.currency}): m >= {budget / np.exp(low):.6g}")
    high, top = np.log(budget), np.log(problem.max_cost)
    while gap(high) > 0:
        if high >= top:
            raise ValueError(f"baseline loss {baseline_loss:.6g} is below the optimal frontier within the bounds")
        high = min(high + np.log(10.0), top)
    return float(budget / np.exp(optimize.brentq(gap, low, high, xtol=1e-12, rtol=1e-12)))
