"""Trajectory-axis synthetic data for the tiny trainer: what a run is given (``SyntheticTrajectories``)
and how each update's synthetic trajectories are built and played (``Synthesizer``).

Kept apart from ``train`` so that the trainer reads as its loop; the synthetic trajectories' own
generator (``SYNTHETIC_STREAM``) lives here with the code that draws from it. ``TaskSampler`` is
here because both walk with it: the trainer its training tasks, the synthesizer a task's replay rows.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from axisrl.backends.tiny.policy import ToolPointer
from axisrl.backends.tiny.rollout import Episode, RolloutStats, Specs, rollout

__all__ = ["SYNTHETIC_STREAM", "Synthesizer", "SyntheticEpisodes", "SyntheticTrajectories", "TaskSampler"]


@dataclass(frozen=True)
class SyntheticTrajectories:
    """Trajectory-axis synthetic data: ``per_group`` synthetic trajectories (``D_s``) added to each
    task's group of ``d_traj`` real rollouts (``D_r``), from exactly one source:

    * ``replay`` (SWiRL-like: generated, filtered trajectories used as training signal): task id
      -> rows with ``calls`` (canonical JSON list of tool calls in the environment's own names,
      ending with ``finish``, like a task's ``reference``) and ``label`` (the claimed reward, which
      is what the trajectory is trained on, not its verified outcome). Each is teacher-forced
      through the real environment, the policy scoring every replayed decision (its log-prob is
      the surrogate's old log-prob, as for a sampled action), and ends truncated at the first call
      no candidate plays. A task's rows are used in a seeded order, reshuffled after each pass; a
      task without rows gets only its real rollouts.
    * ``simulator`` (DreamGym-like: the policy's own rollouts in a learned experience model):
      ``simulator(spec, task, seed)`` builds an environment with the domain's API (``reset``,
      ``step``, ``fork``, ``verify``; it must end an episode within the spec's ``max_steps``) in
      which ``per_group`` extra rollouts of the task are sampled, rewarded by its ``verify()``."""

    per_group: int
    replay: Mapping[str, Sequence[Mapping[str, Any]]] | None = None
    simulator: Callable[[dict[str, Any], Mapping[str, Any], int], Any] | None = None

    def __post_init__(self) -> None:
        if self.per_group < 0:
            raise ValueError(f"per_group must be >= 0, got {self.per_group}")
        if (self.replay is None) == (self.simulator is None):
            raise ValueError("synthetic trajectories need exactly one of replay and simulator")


SYNTHETIC_STREAM = 0x53594E
"""Seeds the synthetic trajectories' generator, ``SeedSequence([seed, SYNTHETIC_STREAM])``, apart
from the run's ``SeedSequence(seed).spawn(4)``."""


class TaskSampler:
    """Walks a seeded shuffle of the tasks (or of one task's replay rows), reshuffling after each full pass."""

    def __init__(self, n_tasks: int, rng: np.random.Generator) -> None:
        self.n, self.rng = n_tasks, rng
        self.order: list[int] = []

    def take(self, count: int) -> list[int]:
        out: list[int] = []
        while len(out) < count:
            if not self.order:
                self.order = self.rng.permutation(self.n).tolist()
            out.append(self.order.pop(0))
        return out


class SyntheticEpisodes(NamedTuple):
    """One update's synthetic trajectories, not yet played."""

    episodes: list[Episode]
    groups: list[int]
    """The group (index of the visited task) of each."""
    scripts: list[list[Any]] | None
    """Each replay's calls; None when simulated."""
    missing: int
    """Visited tasks without replay rows."""


class Synthesizer:
    """Builds each update's synthetic trajectories (see ``SyntheticTrajectories``) from their own
    generator; a task's replay rows are walked like the tasks (``TaskSampler``)."""

    def __init__(self, synthetic: SyntheticTrajectories, specs: Specs, leak_primitive_role: bool, seed: int) -> None:
        self.synthetic, self.specs, self.leak = synthetic, specs, leak_primitive_role
        self.rng = np.random.default_rng(np.random.SeedSequence([seed, SYNTHETIC_STREAM]))
        self.samplers: dict[str, TaskSampler] = {}

    def episodes(self, chosen: Sequence[Mapping[str, Any]], episode_seeds: np.ndarray) -> SyntheticEpisodes:
        """Each task's trajectories share a start node of their own under the group's anonymisation."""
        size, replay, simulator = self.synthetic.per_group, self.synthetic.replay, self.synthetic.simulator
        episodes: list[Episode] = []
        groups: list[int] = []
        scripts: list[list[Any]] = []
        missing = 0
        for g, task in enumerate(chosen):
            spec, episode_seed = self.specs[task["env_id"]], int(episode_seeds[g])
            if simulator is not None:
                env = simulator(spec, task, int(self.rng.integers(0, 2**62)))
                group = Episode.group(self.specs, task, episode_seed, self.leak, size, env)
            else:
                rows = replay.get(task["task_id"], ())
                if not rows:
                    missing += 1
                    continue
                group = Episode.group(self.specs, task, episode_seed, self.leak, size)
                picks = self.samplers.setdefault(task["task_id"], TaskSampler(len(rows), self.rng)).take(size)
                for episode, pick in zip(group, picks, strict=True):
                    episode.label = float(rows[pick]["label"])
                    scripts.append(json.loads(rows[pick]["calls"]))
            episodes += group
            groups += [g] * size
        return SyntheticEpisodes(episodes, groups, None if replay is None else scripts, missing)

    def rollout(
        self, policy: ToolPointer, episodes: Sequence[Episode], scripts: list[list[Any]] | None
    ) -> RolloutStats:
        """Replays are teacher-forced; simulated rollouts sample from the synthetic generator."""
        return rollout(policy, episodes, self.rng if scripts is None else None, scripts=scripts)
