"""A tiny run's totals and caps: ``RunTotals`` sums its updates' metrics rows (``TrainResult.compute``), and
``visits_within_caps`` sizes its next draw so that a run stops at its env-step cap and closes in on its FLOP cap
from below. Kept apart from the loop in ``train``, which asks them once an update."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from axisrl.backends.tiny.rollout import RolloutStats
    from axisrl.backends.tiny.settings import TrainSettings
    from axisrl.backends.tiny.visits import Visit


SYNTHETIC_COUNTS = ("synthetic_episodes", "synthetic_env_steps", "synthetic_unmatched_steps", "synthetic_missing_tasks")
ROW_TOTALS = (
    "rollout_flops",
    "train_flops",
    "probe_flops",
    "env_steps",
    "scored_decisions",
    "gradient_steps",
    "episodes",
    "zero_variance_groups",
    *SYNTHETIC_COUNTS,
)
"""The metrics row's counts that ``RunTotals`` sums."""


@dataclass
class RunTotals:
    """The run so far, summed over its updates' metrics rows and visits: ``TrainResult.compute``."""

    rollout_flops: int = 0
    train_flops: int = 0
    env_steps: int = 0
    scored_decisions: int = 0
    gradient_steps: int = 0
    episodes: int = 0
    visits: int = 0
    updates: int = 0
    zero_variance_groups: int = 0
    failed_episodes: int = 0
    truncated_episodes: int = 0
    synthetic_episodes: int = 0
    synthetic_env_steps: int = 0
    synthetic_unmatched_steps: int = 0
    synthetic_missing_tasks: int = 0
    probe_flops: int = 0
    tasks_seen: set[str] = field(default_factory=set)
    envs_seen: set[str] = field(default_factory=set)

    def add(self, row: Mapping[str, Any], visit: Visit) -> None:
        """Count one update: its metrics ``row`` and the real rollouts and tasks its ``visit`` played."""
        for key in ROW_TOTALS:
            setattr(self, key, getattr(self, key) + row[key])
        self.visits += row["drawn_groups"]
        self.updates += 1
        self.failed_episodes += sum(not e.success for e in visit.played)
        self.truncated_episodes += sum(e.truncated for e in visit.played)
        self.tasks_seen.update(task["task_id"] for task in visit.drawn_tasks)
        self.envs_seen.update(task["env_id"] for task in visit.drawn_tasks)

    def as_compute(self) -> dict[str, Any]:
        counts = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if not f.name.endswith("_seen")}
        return {**counts, "distinct_tasks_seen": len(self.tasks_seen), "distinct_envs_seen": len(self.envs_seen)}


RECENT_UPDATES = 4
"""Updates whose rollout FLOPs per visit estimate the next one's under a FLOP cap (episodes grow or
shrink as the policy learns, so the recent ones say more)."""


def dearest_visit_flops(metrics: Sequence[Mapping[str, Any]]) -> float:
    """FLOPs one more visit can cost: the recent rollout FLOPs per visit, plus the most training
    FLOPs per trained group of any update so far. A group without a learning signal (all scores
    equal) is not trained, so one that has one costs several times as much; sizing the last
    updates by the average visit let two trained groups overshoot the cap by 3 %."""
    recent = metrics[-RECENT_UPDATES:]
    rollout = sum(row["rollout_flops"] for row in recent) / sum(row["drawn_groups"] for row in recent)
    per_trained = [row["train_flops"] / n for row in metrics for n in [trained_with_signal(row)] if n > 0]
    return rollout + max(per_trained, default=0.0)


def trained_with_signal(row: Mapping[str, Any]) -> int:
    """Groups an update trained on that had a learning signal (at most its groups with one, of those drawn)."""
    return min(row["groups"], row["drawn_groups"] - row["zero_variance_groups"])


def visits_within_caps(
    s: TrainSettings,
    metrics: Sequence[Mapping[str, Any]],
    totals: RunTotals,
    drawn: Sequence[RolloutStats] = (),
    most: int | None = None,
) -> int:
    """Visits the next draw plays, 0 to end it: 0 once the env-step cap is reached; ``most``
    (``visits_per_update``), or under a FLOP cap at most half the visits the cap leaves at the
    dearest a visit can cost (``dearest_visit_flops``), so that a run closes in on its cap from
    below in shrinking updates; with less than two such visits left, one more if that lands nearer
    the cap even when it trains. ``drawn``: the update's draws played so far (dynamic sampling),
    counted as spent."""
    most = s.visits_per_update if most is None else most
    if s.token_cap is not None and totals.env_steps + sum(p.env_steps for p in drawn) >= s.token_cap:
        return 0
    if s.flop_cap is None or not metrics:
        return most
    spent = totals.rollout_flops + totals.train_flops + sum(p.flops for p in drawn)
    left = (s.flop_cap - spent) / dearest_visit_flops(metrics)
    return min(most, math.floor(left / 2)) if left >= 2 else int(left >= 0.5)
