"""A run's training budget: what it executes, derived once from its design and the convention.

The plan (which designs are feasible), the train stage (what the trainer is told), the cost model
(how many rollouts a design is charged) and the recipe (what a strategy run may spend) all read
``training_budget``; nothing else works out a run's updates, visits or caps.

A *visit* is one task played once by a group of ``d_traj`` rollouts (a GRPO group; the seed
paper's "cell"). Each convention is named for what it holds fixed:

* ``fixed_visits`` (the default, the paper's "fixed cells and updates"): ``train.updates`` updates
  of ``train.visits_per_update`` visits each, so a run plays ``updates x visits_per_update x
  d_traj`` rollouts and a larger ``d_traj`` buys more rollouts.
* ``token_cap`` (the paper's "exact rollout-token cap"): ``train.episodes_per_update`` rollouts
  per update (``episodes_per_update // d_traj`` visits) until exactly ``train.token_cap`` env steps;
  rollouts stay fixed whatever ``d_traj``.
* ``iso_flop``: the same updates until ``train.flop_cap`` rollout + training FLOPs.
* ``charged_flops`` (the recipe's strategy and validation runs): ``fixed_visits`` updates until the
  run has executed the FLOPs its design is charged (the design's ``flop_budget``), so a strategy at
  k x the centre's budget spends k x whatever its policy's FLOPs per rollout turn out to be.

Capped conventions may take up to ``train.capped_update_factor x train.updates`` updates.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from axisrl.synthesis import synthetic_amounts

CONVENTIONS = {
    "fixed_visits": "train.updates updates of train.visits_per_update task visits, d_traj rollouts per visit",
    "token_cap": "train.episodes_per_update rollouts per update until exactly train.token_cap env steps",
    "iso_flop": "train.episodes_per_update rollouts per update until train.flop_cap FLOPs",
    "charged_flops": "train.visits_per_update visits per update until the design's flop_budget FLOPs are spent",
}
"""Convention name -> what it holds fixed (the schema's enum and the docs list the same names)."""
DEFAULT_CONVENTION = "fixed_visits"
PLANNED_CONVENTIONS = ("fixed_visits", "token_cap", "iso_flop")
"""What a plan family may ask for; ``charged_flops`` designs come from the recipe only."""


@dataclass(frozen=True)
class TrainingBudget:
    """What one run of a design executes. ``updates`` is exact for ``fixed_visits`` and the most a
    capped run may take; ``visits_per_update`` is the number of groups an update plays, each of
    ``d_traj`` real rollouts plus ``synthetic_per_visit`` synthetic trajectories."""

    convention: str
    updates: int
    visits_per_update: int
    d_traj: int
    synthetic_per_visit: int = 0
    token_cap: int | None = None
    flop_cap: float | None = None

    @property
    def visits(self) -> int:
        """Task visits of the whole run (exact for ``fixed_visits``; the most a capped run plays)."""
        return self.updates * self.visits_per_update

    @property
    def rollouts(self) -> int:
        """Real rollouts of the whole run (exact for ``fixed_visits``; the most a capped run plays)."""
        return self.visits * self.d_traj

    def trainer_settings(self) -> dict[str, Any]:
        """The backend settings this budget sets (the tiny trainer's and the verl overrides' names)."""
        return {
            "updates": self.updates,
            "visits_per_update": self.visits_per_update,
            "d_traj": self.d_traj,
            "token_cap": self.token_cap,
            "flop_cap": self.flop_cap,
        }


TRAIN_KEYS = {
    "fixed_visits": ("updates", "visits_per_update"),
    "token_cap": ("updates", "episodes_per_update", "token_cap", "capped_update_factor"),
    "iso_flop": ("updates", "episodes_per_update", "flop_cap", "capped_update_factor"),
    "charged_flops": ("updates", "visits_per_update", "capped_update_factor"),
}
"""The ``train`` keys each convention reads: a run's key covers these and no other budget key."""
BUDGET_KEYS = frozenset(key for keys in TRAIN_KEYS.values() for key in keys)


def training_budget(design: Mapping[str, Any], train: Mapping[str, Any]) -> TrainingBudget:
    """The budget of a design (``Design.as_dict()``) under the study's ``train`` settings."""
    convention = design["budget"]
    if convention not in CONVENTIONS:
        raise ValueError(f"unknown budget convention {convention!r}; expected one of {sorted(CONVENTIONS)}")
    if (convention == "charged_flops") != (design.get("flop_budget") is not None):
        raise ValueError(
            "a design has a flop_budget exactly when its budget is charged_flops, got "
            f"budget={convention} flop_budget={design.get('flop_budget')}"
        )
    d_traj = int(design["d_traj"])
    synthetic = int(synthetic_amounts(design)["d_traj_synthetic"])  # joined to each visit's group
    if convention in ("fixed_visits", "charged_flops"):
        visits = int(train["visits_per_update"])
    else:
        visits = max(1, int(train["episodes_per_update"]) // (d_traj + synthetic))
    capped = convention != "fixed_visits"
    return TrainingBudget(
        convention,
        int(train["updates"]) * (int(train["capped_update_factor"]) if capped else 1),
        visits,
        d_traj,
        synthetic,
        token_cap=int(train["token_cap"]) if convention == "token_cap" else None,
        flop_cap={"iso_flop": train.get("flop_cap"), "charged_flops": design.get("flop_budget")}.get(convention),
    )


EVALUATION_ROLLOUTS = 2300
"""About what a tiny run's held-out evaluation and start-up cost, in training rollouts: the default
study's train jobs take about 1.2 ms a rollout plus 2.8 s a seed (bench/README.md)."""


def expected_work(design: Mapping[str, Any], train: Mapping[str, Any], n_seeds: int) -> float:
    """A tiny train job's work in rollouts (its evaluation and a PPO update's epochs included): what
    the workflow starts its train jobs in order of, longest first, so that no long job starts last
    and runs alone while a core idles. A scheduling estimate only; no run is charged it."""
    epochs = int(train["ppo_epochs"]) if design["algo"] == "ppo" else 1
    return n_seeds * (training_budget(design, train).rollouts * epochs + EVALUATION_ROLLOUTS)


def visits_per_run(train: Mapping[str, Any]) -> int:
    """Task visits of a ``fixed_visits`` run (the same for every design): the cost model's ``V``."""
    return training_budget({"budget": DEFAULT_CONVENTION, "d_traj": 1}, train).visits


def budget_problems(design: Mapping[str, Any], train: Mapping[str, Any]) -> list[str]:
    """Why a design cannot execute the budget it is charged (empty when it can): an update's
    visits must be distinct tasks, and a capped update must hold at least one group."""
    budget = training_budget(design, train)
    problems = []
    if budget.convention in ("fixed_visits", "charged_flops") and budget.visits_per_update > design["d_task"]:
        problems.append(
            f"train.visits_per_update={budget.visits_per_update} exceeds d_task={design['d_task']} "
            "(an update would visit a task twice)"
        )
    if budget.convention in ("token_cap", "iso_flop"):
        if design["d_traj"] + budget.synthetic_per_visit > train["episodes_per_update"]:
            problems.append(
                f"d_traj={design['d_traj']} exceeds train.episodes_per_update="
                f"{train['episodes_per_update']} (an update cannot hold one group)"
            )
        elif budget.visits_per_update > design["d_task"]:
            problems.append(
                f"{budget.visits_per_update} groups per update (train.episodes_per_update // d_traj) "
                f"exceed d_task={design['d_task']} (an update would visit a task twice)"
            )
    return problems
