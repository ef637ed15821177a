"""Compute-optimal data recipe: which of model size, environments, tasks and trajectories to buy at a budget.

Why: a fitted joint law says how loss falls along each axis, but the recipe also needs what each
unit costs; ``cost`` states that in one currency (the paper's Table 19 terms, switchable), ``solve``
finds the Lagrangian optimum numerically and measures the exponents along the optimal path with
their checks (fitting.md 5.4, 6), and ``strategies`` spells out the baselines of Figure 5b.
"""

from axisrl.recipe.cost import RECIPE_AXES, SYNTHETIC_AXES, TERMS, Cost, CostModel, SyntheticOption
from axisrl.recipe.solve import (Allocation, InfeasibleBudget, allocation_at, bootstrap_exponents,
                                 compute_efficiency, exponents, log_budgets, paper_convention, recipe_path, solve)
from axisrl.recipe.strategies import chinchilla_transfer, recipe, trajectories_only

__all__ = [
    "RECIPE_AXES", "SYNTHETIC_AXES", "TERMS", "Allocation", "Cost", "CostModel", "InfeasibleBudget",
    "SyntheticOption", "allocation_at", "bootstrap_exponents", "chinchilla_transfer", "compute_efficiency",
    "exponents", "log_budgets", "paper_convention", "recipe", "recipe_path", "solve", "trajectories_only",
]
