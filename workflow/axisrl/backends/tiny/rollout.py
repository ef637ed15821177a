"""Lockstep rollouts: every live episode takes its next step together, scored in one forward.

Each episode keeps a toolworld environment, its incremental compact view and the integer
features of that view; the policy sees all live decisions as one ``Batch`` and the chosen
candidates' surface calls are executed in the environments.
"""

from __future__ import annotations

import contextlib
import gc
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from axisrl.backends.tiny.features import Decision, EpisodeFeatures, collate, collate_episodes
from axisrl.backends.tiny.policy import ToolPointer, segment_entropy, segment_log_softmax
from axisrl.domains.toolworld import ToolworldEnv
from axisrl.domains.toolworld.render import CompactEpisode
from axisrl.domains.toolworld.runtime import FINISH


@contextlib.contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """Rollouts allocate millions of short-lived, acyclic objects; reference counting frees them,
    while the cyclic collector would rescan every live object (the task pool included) again and
    again. It is switched off for the duration and restored after."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class Diverged(RuntimeError):
    """The policy produced non-finite scores or losses."""


class Specs:
    """Parsed environment specs by env id, parsed once so toolworld's runtime caches stay warm."""

    def __init__(self, envs: Sequence[Mapping[str, Any]]) -> None:
        self.by_id = {env["env_id"]: json.loads(env["spec"]) if isinstance(env["spec"], str) else env["spec"]
                      for env in envs}

    def __getitem__(self, env_id: str) -> dict[str, Any]:
        return self.by_id[env_id]


@dataclass
class Episode:
    """One rollout of one task, with what training needs from each of its decisions."""

    task: Mapping[str, Any]
    env: ToolworldEnv
    compact: CompactEpisode
    features: EpisodeFeatures | None
    decisions: list[Decision] = field(default_factory=list)
    actions: list[int] = field(default_factory=list)
    log_probs: list[float] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    done: bool = False
    truncated: bool = False
    tool_calls: int = 0
    errors: int = 0
    success: bool = False
    reward: float = 0.0
    partial: float = 0.0

    @classmethod
    def start(cls, spec: dict[str, Any], task: Mapping[str, Any], episode_seed: int,
              leak_primitive_role: bool | None) -> Episode:
        """``leak_primitive_role=None``: no policy features (a baseline acts on the view alone)."""
        env = ToolworldEnv(spec, task)
        env.reset()
        compact = CompactEpisode(spec, task, episode_seed)
        features = None if leak_primitive_role is None else EpisodeFeatures(compact, leak_primitive_role)
        return cls(task, env, compact, features)

    def act(self, k: int) -> None:
        self.actions.append(k)
        call = self.compact.call(k)
        result = self.env.step(call)
        self.compact.push(call, result.observation)
        self.tool_calls += call["name"] != FINISH
        self.errors += "error" in result.observation
        if result.done:
            self.finish(truncated=call["name"] != FINISH)

    def finish(self, truncated: bool) -> None:
        verdict = self.env.verify()
        self.done, self.truncated = True, truncated
        self.success, self.reward = verdict.success, verdict.reward
        total = verdict.subgoals_total
        self.partial = verdict.subgoals_met / total if total else float(verdict.success)

    def record(self) -> dict[str, Any]:
        return {"task_id": self.task["task_id"], "env_id": self.task["env_id"], "tier": self.task.get("tier"),
                "success": self.success, "reward": self.reward, "partial": self.partial,
                "steps": len(self.actions), "tool_calls": self.tool_calls, "errors": self.errors}


def choose(log_probs: np.ndarray, starts: np.ndarray, counts: np.ndarray, uniforms: np.ndarray | None) -> np.ndarray:
    """Per decision, the local index of a sampled candidate (inverse CDF at ``uniforms``) or,
    without uniforms, of the first most likely one."""
    ends = starts + counts
    if uniforms is None:
        top = np.maximum.reduceat(log_probs, starts)
        first = np.where(log_probs == np.repeat(top, counts), np.arange(len(log_probs)), len(log_probs))
        return np.minimum.reduceat(first, starts) - starts
    cdf = np.cumsum(np.exp(log_probs))
    before = np.where(starts > 0, cdf[np.maximum(starts - 1, 0)], 0.0)
    targets = before + uniforms * (cdf[ends - 1] - before)
    return np.clip(np.searchsorted(cdf, targets, side="right"), starts, ends - 1) - starts


@dataclass
class RolloutStats:
    env_steps: int = 0
    decisions: int = 0
    entropy_sum: float = 0.0
    flops: int = 0


def rollout(policy: ToolPointer, episodes: Sequence[Episode], rng: np.random.Generator | None,
            step_budget: int | None = None) -> RolloutStats:
    """Run ``episodes`` to the end in lockstep (sampling with ``rng``, greedy without). With a
    ``step_budget``, stop at exactly that many env steps: episodes still running are truncated."""
    stats = RolloutStats()
    start_flops = policy.flops
    with torch.no_grad():
        batch_of_episodes = collate_episodes([e.features for e in episodes])
        encoded = policy.encode_episodes(batch_of_episodes)
        live = [k for k, e in enumerate(episodes) if not e.done]
        while live:
            if step_budget is not None and stats.env_steps + len(live) > step_budget:
                for k in live[step_budget - stats.env_steps:]:
                    episodes[k].finish(truncated=True)
                live = live[:step_budget - stats.env_steps]
                if not live:
                    break
            decisions = [episodes[k].features.decision() for k in live]
            batch = collate(batch_of_episodes, decisions, live)
            logits, values = policy(batch, encoded)
            if not torch.isfinite(logits).all():
                raise Diverged("non-finite candidate scores")
            log_probs = segment_log_softmax(logits, batch.cand_decision, len(live))
            stats.entropy_sum += float(segment_entropy(log_probs, batch.cand_decision, len(live)).sum())
            log_probs = log_probs.numpy().astype(np.float64)
            actions = choose(log_probs, batch.cand_start, batch.cand_count,
                             None if rng is None else rng.random(len(live)))
            chosen = log_probs[batch.cand_start + actions]
            for j, k in enumerate(live):
                episode = episodes[k]
                episode.decisions.append(decisions[j])
                episode.log_probs.append(float(chosen[j]))
                if values is not None:
                    episode.values.append(float(values[j]))
                episode.act(int(actions[j]))
            stats.env_steps += len(live)
            stats.decisions += len(live)
            live = [k for k in live if not episodes[k].done]
    stats.flops = policy.flops - start_flops
    return stats
