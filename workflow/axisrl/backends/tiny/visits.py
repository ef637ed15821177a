"""One update's draws and what it trains on: the tasks drawn and their real rollouts (``Draw``), and
the update's ``Visit``, every group of its one draw or, under DAPO's dynamic sampling, the first
groups with a learning signal among its draws (``visit_of``), with the synthetic trajectories of
the groups kept. Kept apart from ``train`` so that the trainer reads as its loop."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import torch

from axisrl.backends.tiny.rollout import Episode, RolloutStats, Specs
from axisrl.backends.tiny.synthetic import Synthesizer, SyntheticEpisodes
from axisrl.backends.tiny.updates import trained_scores

if TYPE_CHECKING:
    from axisrl.backends.tiny.settings import TrainSettings


class Draw(NamedTuple):
    """Tasks drawn for an update and their real rollouts, ``d_traj`` of each task, task by task."""

    tasks: list[Mapping[str, Any]]
    episode_seeds: np.ndarray
    episodes: list[Episode]
    scripts: list[list[Any]] | None = None
    """Behaviour cloning: each episode's reference calls, teacher-forced instead of sampled."""


class Visit(NamedTuple):
    """What one update trains on: its visited tasks and the episodes on them; and what it played."""

    tasks: list[Mapping[str, Any]]
    episodes: list[Episode]
    """``d_traj`` real rollouts of each task, task by task."""
    synthetic: SyntheticEpisodes
    groups: torch.Tensor
    """The group (index of the task) of every episode, real then synthetic."""
    played: list[Episode]
    """Every real rollout the update drew (``episodes`` and, under dynamic sampling, the dropped groups')."""
    drawn_tasks: list[Mapping[str, Any]]
    dropped_zero_variance: int = 0
    """Groups drawn, not trained on, whose rollouts all scored alike."""


def summed_stats(stats: Sequence[RolloutStats]) -> RolloutStats:
    """One update's draws as one rollout: counts, FLOPs and seconds added."""
    if len(stats) == 1:
        return stats[0]
    total = RolloutStats()
    for field_ in dataclasses.fields(RolloutStats):
        values = [getattr(part, field_.name) for part in stats]
        setattr(total, field_.name, sum(values))
    return total


def new_draw(tasks: list[Mapping[str, Any]], episode_seeds: np.ndarray, specs: Specs, s: TrainSettings) -> Draw:
    """The episodes of ``tasks``, each task's on one start (one anonymisation) from its episode seed."""
    episodes = [
        episode
        for g, task in enumerate(tasks)
        for episode in Episode.group(specs, task, int(episode_seeds[g]), s.leak_primitive_role, s.d_traj)
    ]
    scripts = [json.loads(task["reference"]) for task in tasks for _ in range(s.d_traj)] if s.algo == "bc" else None
    return Draw(tasks, episode_seeds, episodes, scripts)


def with_signal(draw: Draw, s: TrainSettings) -> list[bool]:
    """Per drawn task: whether its played rollouts' trained scores differ (a group with a learning signal)."""
    scores = trained_scores(draw.episodes, s.reward_density).view(len(draw.tasks), s.d_traj)
    return (scores.max(dim=1).values > scores.min(dim=1).values).tolist()


def visit_of(draws: Sequence[Draw], s: TrainSettings, synthesizer: Synthesizer | None) -> Visit:
    """The update's visit from its played draws: every group of the one draw, or under dynamic
    sampling the first groups with a signal, as many as the first draw has (the first draw's
    groups when none has one); the synthetic trajectories of the groups kept join them."""
    signals = [with_signal(draw, s) if s.dynamic_sampling else [] for draw in draws]
    everything = [(k, g) for k, draw in enumerate(draws) for g in range(len(draw.tasks))]
    kept = everything
    if s.dynamic_sampling:
        signal = [(k, g) for k, g in everything if signals[k][g]]
        kept = signal[: len(draws[0].tasks)] or [(0, g) for g in range(len(draws[0].tasks))]
    size = s.d_traj
    tasks = [draws[k].tasks[g] for k, g in kept]
    episode_seeds = np.asarray([draws[k].episode_seeds[g] for k, g in kept])
    episodes = [e for k, g in kept for e in draws[k].episodes[g * size : (g + 1) * size]]
    synthetic = (
        synthesizer.episodes(tasks, episode_seeds) if synthesizer is not None else SyntheticEpisodes([], [], None, 0)
    )
    groups = torch.cat(
        [torch.arange(len(tasks)).repeat_interleave(size), torch.tensor(synthetic.groups, dtype=torch.int64)]
    )
    dropped = set(everything) - set(kept)
    dropped_zero_variance = sum(not signals[k][g] for k, g in dropped)
    played = [e for draw in draws for e in draw.episodes]
    drawn_tasks = [task for draw in draws for task in draw.tasks]
    return Visit(tasks, episodes, synthetic, groups, played, drawn_tasks, dropped_zero_variance)
