"""Compute-optimal data recipe: which of model size, environments, tasks and trajectories to buy at a budget.

Why: a fitted joint law says how loss falls along each axis, but the recipe also needs what each
unit costs; ``cost`` states that in one currency (the paper's Table 19 terms, switchable),
``problem`` poses the optimisation at one budget, ``solve`` finds the Lagrangian optimum numerically
at a budget and along a grid of them, ``exponents`` measures the exponents along the optimal path with their
checks and bootstrap intervals, and ``strategies`` spells out the baselines of Figure 5b. The
study-level pieces (law, tables, designs, efficiency) are ``study``'s. Methods: ``docs/methods.md``.
"""

from axisrl.recipe.cost import RECIPE_AXES, SYNTHETIC_AXES, TERMS, Cost, CostModel, SyntheticOption
from axisrl.recipe.exponents import bootstrap_exponents, exponents, paper_convention
from axisrl.recipe.problem import Allocation, InfeasibleBudget, allocation_at
from axisrl.recipe.solve import compute_efficiency, log_budgets, recipe_path, solve
from axisrl.recipe.strategies import chinchilla_transfer, recipe, trajectories_only

__all__ = [
    "RECIPE_AXES",
    "SYNTHETIC_AXES",
    "TERMS",
    "Allocation",
    "Cost",
    "CostModel",
    "InfeasibleBudget",
    "SyntheticOption",
    "allocation_at",
    "bootstrap_exponents",
    "chinchilla_transfer",
    "compute_efficiency",
    "exponents",
    "log_budgets",
    "paper_convention",
    "recipe",
    "recipe_path",
    "solve",
    "trajectories_only",
]
