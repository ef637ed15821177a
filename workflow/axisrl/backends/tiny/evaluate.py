"""Held-out evaluation of a policy, and the two reference points it is read against.

``evaluate`` plays one episode per task (greedy by default) with a fixed episode seed per task,
so every run is scored on identical anonymisations. ``baseline_episodes`` plays the same
held-out tasks with a uniformly random policy, or with a memoriser that replays the training
reference solutions whose surface calls (tool names and argument values) match what the
held-out environment offers, and acts randomly otherwise: on unseen worlds (T2) nothing
matches, so it is no better than random.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from axisrl.backends.tiny.policy import ToolPointer
from axisrl.backends.tiny.rollout import Diverged, Episode, Specs, no_cyclic_gc, rollout
from axisrl.domains import DEFAULT_DOMAIN
from axisrl.domains.canon import canonical_json

EVAL_CHUNK_ACTIVATIONS = 256 * 64
"""Episodes x policy width rolled out together: a batch's activations grow with both, so this
bounds its memory (256 episodes at width 64; a width-256 policy in batches of 64 episodes;
bench/README.md has what one large batch held)."""


def _episode_seeds(tasks: Sequence[Mapping[str, Any]], seed: int) -> list[int]:
    return np.random.default_rng(seed).integers(0, 2**62, size=len(tasks)).tolist()


class HeldoutStarts:
    """Every held-out task's episode at its start, made once and forked for each policy that is
    evaluated on them: a job's seeds play identical starts (a fork of a start plays exactly like a
    fresh one), so the environments, views and features are built once per job, not per seed."""

    def __init__(
        self,
        envs: Sequence[Mapping[str, Any]],
        tasks: Sequence[Mapping[str, Any]],
        seed: int,
        leak_primitive_role: bool,
        domain: str = DEFAULT_DOMAIN,
    ) -> None:
        self.made_for = (seed, leak_primitive_role, [task["task_id"] for task in tasks], domain)
        """What ``evaluate`` checks its own arguments against."""
        specs = Specs(envs, domain)
        with no_cyclic_gc():
            self.episodes = [
                Episode.start(specs, task, episode_seed, leak_primitive_role)
                for task, episode_seed in zip(tasks, _episode_seeds(tasks, seed))
            ]

    def subset(self, keep: Sequence[int]) -> HeldoutStarts:
        """The starts of the tasks at positions ``keep`` alone (one tier's, say), each with the episode
        seed it has in the whole pool, so a policy scored on them plays what it plays there."""
        part = object.__new__(HeldoutStarts)
        seed, leak_primitive_role, task_ids, domain = self.made_for
        part.made_for = (seed, leak_primitive_role, [task_ids[k] for k in keep], domain)
        part.episodes = [self.episodes[k] for k in keep]
        return part

    def fork(self, start: int, stop: int) -> list[Episode]:
        return [Episode(episode.task, episode.node.fork()) for episode in self.episodes[start:stop]]


def evaluate(
    policy: ToolPointer,
    envs: Sequence[Mapping[str, Any]],
    tasks: Sequence[Mapping[str, Any]],
    seed: int,
    greedy: bool = True,
    starts: HeldoutStarts | None = None,
    first_primitive: bool = False,
    domain: str = DEFAULT_DOMAIN,
) -> list[dict[str, Any]]:
    """One episode per task: task_id, env_id, tier, success, reward (sparse), partial (subgoal
    fraction), steps, tool_calls, errors. ``starts``: the same ``envs``, ``tasks`` and ``seed``
    already started (``HeldoutStarts``), to evaluate several policies on them. ``first_primitive``:
    each record also has ``first_primitive``, the primitive of the episode's first call
    (``Episode.first_primitive``), read after the episode ended; nothing else changes. Non-finite
    scores raise ``Diverged``."""
    starts = _starts_for(policy, envs, tasks, seed, starts, domain)
    action_rng = None if greedy else np.random.default_rng([seed, 1])
    policy.eval()
    records = []
    chunk = max(1, EVAL_CHUNK_ACTIVATIONS // policy.width)
    with no_cyclic_gc():
        for start in range(0, len(tasks), chunk):
            episodes = starts.fork(start, start + chunk)
            try:
                rollout(policy, episodes, action_rng)
            except Diverged:
                raise Diverged("non-finite candidate scores in evaluation") from None
            records += _records(episodes, first_primitive)
    return records


def _starts_for(
    policy: ToolPointer,
    envs: Sequence[Mapping[str, Any]],
    tasks: Sequence[Mapping[str, Any]],
    seed: int,
    starts: HeldoutStarts | None,
    domain: str,
) -> HeldoutStarts:
    if starts is None:
        return HeldoutStarts(envs, tasks, seed, policy.leak_primitive_role, domain)
    if starts.made_for != (seed, policy.leak_primitive_role, [task["task_id"] for task in tasks], domain):
        raise ValueError(
            "held-out starts were made for other tasks, another seed, another leak_primitive_role or another domain"
        )
    return starts


def _records(episodes: Sequence[Episode], first_primitive: bool) -> list[dict[str, Any]]:
    return [
        {**episode.record(), "first_primitive": episode.first_primitive()} if first_primitive else episode.record()
        for episode in episodes
    ]


class Memoriser:
    """The next surface call after each prefix of a training reference solution, keyed by the
    instruction too when it was seen in training (then that task's own solution is replayed)."""

    def __init__(self, train_tasks: Sequence[Mapping[str, Any]]) -> None:
        self.next: dict[tuple[str | None, tuple[str, ...]], Counter[str]] = {}
        for task in train_tasks:
            calls = [canonical_json(call) for call in json.loads(task["reference"])]
            for t in range(len(calls)):
                for instruction in (task["instruction"], None):
                    self.next.setdefault((instruction, tuple(calls[:t])), Counter())[calls[t]] += 1

    def choose(self, instruction: str, history: tuple[str, ...], candidates: list[str]) -> int | None:
        """The candidate the most matching training solutions take next, if any is offered."""
        for key in ((instruction, history), (None, history)):
            known = self.next.get(key)
            if known:
                counts = [known.get(call, 0) for call in candidates]
                if max(counts) > 0:
                    return counts.index(max(counts))
        return None


def baseline_episodes(
    kind: str,
    train_envs: Sequence[Mapping[str, Any]],
    train_tasks: Sequence[Mapping[str, Any]],
    heldout_envs: Sequence[Mapping[str, Any]],
    heldout_tasks: Sequence[Mapping[str, Any]],
    seed: int,
    domain: str = DEFAULT_DOMAIN,
) -> list[dict[str, Any]]:
    """Held-out episodes (same records as ``evaluate``) of the ``"random"`` or ``"memoriser"``
    baseline; ``train_envs`` is accepted for symmetry, the memoriser needs only the tasks."""
    if kind not in ("random", "memoriser"):
        raise ValueError(f"unknown baseline {kind!r}; expected 'random' or 'memoriser'")
    memoriser = Memoriser(train_tasks) if kind == "memoriser" else None
    specs = Specs(heldout_envs, domain)
    rng = np.random.default_rng([seed, 2])
    records = []
    with no_cyclic_gc():
        for task, episode_seed in zip(heldout_tasks, _episode_seeds(heldout_tasks, seed)):
            episode = Episode.start(specs, task, episode_seed, None)
            history: tuple[str, ...] = ()
            while not episode.done:
                count = len(episode.compact.candidates())
                choice = None
                if memoriser is not None:
                    calls = [canonical_json(episode.compact.call(k)) for k in range(count)]
                    choice = memoriser.choose(task["instruction"], history, calls)
                k = int(rng.integers(count)) if choice is None else choice
                history += (canonical_json(episode.compact.call(k)),)
                episode.act(k)
            records.append(episode.record())
    return records
