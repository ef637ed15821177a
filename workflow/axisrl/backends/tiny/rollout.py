"""Lockstep rollouts: every live episode takes its next step together, scored in one forward.

An episode sits on a ``Node``: a toolworld environment, its incremental compact view and the
integer features of that view. The rollouts of one GRPO group start on one node (one task, one
anonymisation) and share it for as long as they choose alike, forking where they part, so a
shared prefix is executed, featurised and scored once. The policy sees the live nodes' decisions
as one ``Batch``; each rollout samples its own action from its node's scores, or, replaying a
script of calls (a synthetic trajectory), takes the candidate that plays the script's next call.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from axisrl import domains
from axisrl.backends.tiny.encoding import Decision, EpisodeFeatures
from axisrl.backends.tiny.features import Batch, collate, collate_episodes
from axisrl.backends.tiny.policy import ToolPointer, segment_entropy, segment_log_softmax
from axisrl.domains import Domain
from axisrl.domains.canon import canonical_json
from axisrl.domains.compact import CompactView
from axisrl.domains.toolworld.model import FINISH, CallError, parse_arguments


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


@functools.lru_cache(maxsize=1024)
def _parsed_spec(spec: str) -> dict[str, Any]:
    """One parsed spec per spec text for the whole process: toolworld caches its compiled runtimes
    and their layouts per spec object, so a job's seeds and evaluations reuse them (as many specs
    as toolworld keeps runtimes)."""
    return json.loads(spec)


class Specs:
    """Parsed environment specs by env id, parsed once per process (specs are read, never
    modified) so toolworld's runtime caches stay warm; and the ``domain`` they belong to, whose
    environment and compact view every episode on them uses."""

    def __init__(self, envs: Sequence[Mapping[str, Any]], domain: str = domains.DEFAULT_DOMAIN) -> None:
        self.domain = domains.load(domain)
        self.domain.require("compact_view")
        self.by_id = {
            env["env_id"]: _parsed_spec(env["spec"]) if isinstance(env["spec"], str) else env["spec"] for env in envs
        }

    def __getitem__(self, env_id: str) -> dict[str, Any]:
        return self.by_id[env_id]


@dataclass
class Node:
    """The environment side of an episode at one decision point: the domain's environment, its
    incremental compact view and that view's integer features. Rollouts that took the same actions
    so far share one node, so a group's common prefix is stepped, featurised and scored once."""

    env: Any
    compact: CompactView
    features: EpisodeFeatures | None
    row: int = -1
    """The row of this episode's start in the rollout's ``EpisodeBatch`` (forks keep it)."""
    done: bool = False
    truncated: bool = False
    tool_calls: int = 0
    errors: int = 0
    success: bool = False
    reward: float = 0.0
    partial: float = 0.0

    @classmethod
    def start(
        cls,
        domain: Domain,
        spec: dict[str, Any],
        task: Mapping[str, Any],
        episode_seed: int,
        leak_primitive_role: bool | None,
        env: Any = None,
    ) -> Node:
        """An episode of ``domain`` at its start. ``leak_primitive_role=None``: no policy features
        (a baseline acts on the view alone). ``env``: an environment with the domain's API to act
        in instead of the real one (a simulated one); it is reset here."""
        env = domain.Env(spec, task) if env is None else env
        env.reset()
        compact = domain.compact_view(spec, task, episode_seed, env)
        features = None if leak_primitive_role is None else EpisodeFeatures(compact, leak_primitive_role)
        return cls(env, compact, features)

    def fork(self) -> Node:
        env = self.env.fork()
        compact = self.compact.fork(env)
        features = None if self.features is None else self.features.fork(compact)
        return replace(self, env=env, compact=compact, features=features)

    def act(self, k: int, costs: RolloutStats | None = None) -> None:
        """Execute candidate ``k``; with ``costs``, the env call and any verification are timed there."""
        call = self.compact.call(k)
        started = time.perf_counter()
        result = self.env.step(call)
        if costs is not None:
            costs.env_seconds += time.perf_counter() - started
            costs.env_calls += 1
        self.compact.push(call, result.observation)
        self.tool_calls += call["name"] != FINISH
        self.errors += "error" in result.observation
        if result.done:
            self.finish(truncated=call["name"] != FINISH, costs=costs)

    def finish(self, truncated: bool, costs: RolloutStats | None = None) -> None:
        started = time.perf_counter()
        verdict = self.env.verify()
        if costs is not None:
            costs.verifier_seconds += time.perf_counter() - started
            costs.verifier_calls += 1
        self.done, self.truncated = True, truncated
        self.success, self.reward = verdict.success, verdict.reward
        total = verdict.subgoals_total
        self.partial = verdict.subgoals_met / total if total else float(verdict.success)


@dataclass
class Episode:
    """One rollout of one task: the node it has reached and what training needs from each of its
    decisions (a decision reached by several rollouts of a group is one shared object)."""

    task: Mapping[str, Any]
    node: Node
    decisions: list[Decision] = field(default_factory=list)
    actions: list[int] = field(default_factory=list)
    log_probs: list[float] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    label: float | None = None
    """A replayed synthetic trajectory's claimed reward, which training uses instead of the
    verified outcome (what a generator's or judge's label is worth is what the study measures)."""

    @classmethod
    def start(
        cls, specs: Specs, task: Mapping[str, Any], episode_seed: int, leak_primitive_role: bool | None
    ) -> Episode:
        """One rollout of ``task`` on its environment in ``specs``."""
        node = Node.start(specs.domain, specs[task["env_id"]], task, episode_seed, leak_primitive_role)
        return cls(task, node)

    @classmethod
    def group(
        cls,
        specs: Specs,
        task: Mapping[str, Any],
        episode_seed: int,
        leak_primitive_role: bool,
        size: int,
        env: Any = None,
    ) -> list[Episode]:
        """``size`` rollouts of one task under one anonymisation, like the samples of one prompt
        (in ``env`` if given, see ``Node.start``)."""
        node = Node.start(specs.domain, specs[task["env_id"]], task, episode_seed, leak_primitive_role, env)
        return [cls(task, node) for _ in range(size)]

    features = property(lambda self: self.node.features)
    compact = property(lambda self: self.node.compact)
    done = property(lambda self: self.node.done)
    truncated = property(lambda self: self.node.truncated)
    success = property(lambda self: self.node.success)
    reward = property(lambda self: self.node.reward)
    partial = property(lambda self: self.node.partial)

    def act(self, k: int) -> None:
        """Take candidate ``k`` alone (a baseline's step; ``rollout`` steps shared nodes itself)."""
        self.actions.append(k)
        self.node.act(k)

    def first_primitive(self) -> str | None:
        """The primitive of the tool this episode called first (``finish`` if that call was
        ``finish``), read back from its view's first step; None before it or if the call did not parse."""
        steps = self.compact.steps
        if not steps or steps[0][0][0] == "A?":
            return None
        return self.compact.primitive(int(steps[0][0][0][1:]))

    def record(self) -> dict[str, Any]:
        node = self.node
        return {
            "task_id": self.task["task_id"],
            "env_id": self.task["env_id"],
            "tier": self.task.get("tier"),
            "success": node.success,
            "reward": node.reward,
            "partial": node.partial,
            "steps": len(self.actions),
            "tool_calls": node.tool_calls,
            "errors": node.errors,
        }


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
    """What one ``rollout`` call did (env steps, decisions), computed (scored decisions, FLOPs)
    and cost in wall time (env calls, verifications, policy forwards)."""

    env_steps: int = 0
    """One per rollout per step taken, shared or not: what the agents did."""
    decisions: int = 0
    scored_decisions: int = 0
    """Distinct decision points the policy scored (shared prefixes once): what was computed."""
    entropy_sum: float = 0.0
    flops: int = 0
    env_seconds: float = 0.0
    env_calls: int = 0
    verifier_seconds: float = 0.0
    verifier_calls: int = 0
    policy_seconds: float = 0.0
    """Wall time in the policy's forward passes: the share of a rollout the model is busy."""
    seconds: float = 0.0
    """Wall time of the whole rollout. The ``*_seconds`` are measured cost drivers, never compute."""
    unmatched_steps: int = 0
    """Scripted calls that no candidate plays (each ends its replay, truncated)."""


def distinct(items: Sequence[Any]) -> tuple[list[Any], np.ndarray]:
    """The distinct objects of ``items`` in first-appearance order, and each item's index among them."""
    index: dict[int, int] = {}
    unique: list[Any] = []
    positions = np.empty(len(items), dtype=np.int64)
    for j, item in enumerate(items):
        u = index.get(id(item))
        if u is None:
            u = index[id(item)] = len(unique)
            unique.append(item)
        positions[j] = u
    return unique, positions


def call_key(call: Any) -> str | None:
    """What makes two calls one action, so that a scripted call (in the environment's own names,
    as a task's ``reference`` spells it) can be found among a view's candidates: the name and the
    arguments as canonical JSON, OpenAI-style JSON-string arguments parsed and a ``finish`` answer
    taken as the text the verifier reads. None for what is not a ``{"name", "arguments"}`` call."""
    if not isinstance(call, Mapping) or not isinstance(call.get("name"), str):
        return None
    try:
        arguments = dict(parse_arguments(call.get("arguments")))
    except CallError:
        return None
    if call["name"] == FINISH and "answer" in arguments:
        answer = arguments["answer"]
        arguments["answer"] = (answer if isinstance(answer, str) else json.dumps(answer)).strip()
    return canonical_json([call["name"], arguments])


def _scripted_actions(
    episodes: Sequence[Episode], live: Sequence[int], scripts: Sequence[Sequence[Any]], costs: RolloutStats
) -> dict[int, int]:
    """The candidate that plays each live episode's next scripted call, by episode index. An
    episode whose script has run out, or whose next call no candidate plays (an unmatched step),
    ends there as truncated instead (on a fork: its node may be shared)."""
    offered: dict[int, dict[str | None, int]] = {}
    forced: dict[int, int] = {}
    for k in live:
        episode, script = episodes[k], scripts[k]
        t = len(episode.actions)
        if t < len(script):
            node = episode.node
            keys = offered.get(id(node))
            if keys is None:  # keyed once per node, the first candidate winning a tie
                keys = offered[id(node)] = {}
                for c in range(len(node.compact.candidates())):
                    keys.setdefault(call_key(node.compact.call(c)), c)
            action = keys.get(call_key(script[t]))
            if action is not None:
                forced[k] = action
                continue
            costs.unmatched_steps += 1
        episode.node = episode.node.fork()
        episode.node.finish(truncated=True, costs=costs)
    return forced


def _step_nodes(nodes: Sequence[Node], node_of: np.ndarray, actions: np.ndarray, costs: RolloutStats) -> list[Node]:
    """Take every rollout's action; rollouts at one node that choose differently get forks of it
    (made before the node moves on), those that choose alike keep sharing. Returns each rollout's node."""
    children: dict[tuple[int, int], Node] = {}
    choices: dict[int, list[int]] = {}
    for u, a in zip(node_of.tolist(), actions.tolist()):
        if a not in choices.setdefault(u, []):
            choices[u].append(a)
    for u, distinct in choices.items():
        node = nodes[u]
        targets = [node.fork() for _ in distinct[1:]] + [node]
        for a, target in zip(distinct, targets):
            target.act(a, costs)
            children[(u, a)] = target
    return [children[(u, a)] for u, a in zip(node_of.tolist(), actions.tolist())]


def rollout(
    policy: ToolPointer,
    episodes: Sequence[Episode],
    rng: np.random.Generator | None,
    step_budget: int | None = None,
    scripts: Sequence[Sequence[Any]] | None = None,
) -> RolloutStats:
    """Run ``episodes`` to the end together, one batch and one forward per step (sampling with
    ``rng``, greedy without). With a ``step_budget``, stop at exactly that many env steps: episodes
    still running are truncated. Episodes that share a node (``Episode.group``) are scored once per
    decision point they share. With ``scripts`` (a list of calls per episode) every episode is
    teacher-forced instead: it takes the candidate that plays its script's next call
    (``call_key``), scored and recorded like a sampled action, and ends truncated when its script
    runs out or no candidate plays the call. Non-finite scores raise ``Diverged``."""
    stats = RolloutStats()
    start_flops = policy.flops
    started = time.perf_counter()
    with torch.inference_mode():  # no_grad's result, with less bookkeeping per op: nothing here is trained on
        roots, _ = distinct([e.node for e in episodes])
        for r, root in enumerate(roots):
            root.row = r
        batch_of_episodes = collate_episodes([root.features for root in roots])
        encoded = policy.encode_episodes(batch_of_episodes)
        live = [k for k, e in enumerate(episodes) if not e.done]
        while live:
            live, forced = _live_within(episodes, live, stats, step_budget, scripts)
            if not live:
                break
            nodes, node_of = distinct([episodes[k].node for k in live])
            decisions = [node.features.decision() for node in nodes]
            batch = collate(batch_of_episodes, decisions, [node.row for node in nodes])
            forward_started = time.perf_counter()
            logits, values = policy(batch, encoded)
            stats.policy_seconds += time.perf_counter() - forward_started
            actions, log_probs = _choose(logits, batch, node_of, rng, forced, live, stats)
            node_values = None if values is None else values.tolist()
            stepped = _step_nodes(nodes, node_of, actions, stats)
            for k, node, u, action, log_prob in zip(live, stepped, node_of.tolist(), actions.tolist(), log_probs):
                episode = episodes[k]
                episode.decisions.append(decisions[u])
                episode.actions.append(action)
                episode.log_probs.append(log_prob)
                if node_values is not None:
                    episode.values.append(node_values[u])
                episode.node = node
            stats.env_steps += len(live)
            stats.decisions += len(live)
            stats.scored_decisions += len(nodes)
            live = [k for k in live if not episodes[k].done]
    stats.flops = policy.flops - start_flops
    stats.seconds = time.perf_counter() - started
    return stats


def _live_within(
    episodes: Sequence[Episode],
    live: list[int],
    stats: RolloutStats,
    step_budget: int | None,
    scripts: Sequence[Sequence[Any]] | None,
) -> tuple[list[int], dict[int, int]]:
    """One seed's episodes that take the next step, and their scripted actions: replays whose
    script goes on (``_scripted_actions``), then no more than the step budget leaves (the rest
    end truncated)."""
    forced: dict[int, int] = {}
    if scripts is not None and live:
        forced = _scripted_actions(episodes, live, scripts, stats)
        live = [k for k in live if k in forced]
    if step_budget is not None and stats.env_steps + len(live) > step_budget:
        for k in live[step_budget - stats.env_steps :]:
            episodes[k].node = episodes[k].node.fork()
            episodes[k].node.finish(truncated=True, costs=stats)
        live = live[: step_budget - stats.env_steps]
    return live, forced


def _choose(
    logits: torch.Tensor,
    batch: Batch,
    node_of: np.ndarray,
    rng: np.random.Generator | None,
    forced: dict[int, int],
    live: Sequence[int],
    stats: RolloutStats,
) -> tuple[np.ndarray, list[float]]:
    """The live episodes' actions (scripted, sampled with ``rng`` or greedy) and their log-probs,
    from the scores of the batch's decisions (one per distinct node). Non-finite scores raise ``Diverged``."""
    if not torch.isfinite(logits).all():
        raise Diverged("non-finite candidate scores")
    n_nodes, segment, starts, counts = len(batch.cand_count), batch.cand_decision, batch.cand_start, batch.cand_count
    log_probs = segment_log_softmax(logits, segment, n_nodes)
    entropy = segment_entropy(log_probs, segment, n_nodes).numpy()
    stats.entropy_sum += float(entropy[node_of].sum())
    log_probs = log_probs.numpy().astype(np.float64)
    if forced:
        actions = np.array([forced[k] for k in live], dtype=np.int64)
    elif rng is None:
        actions = choose(log_probs, starts, counts, None)[node_of]
    else:
        actions = choose(log_probs, starts[node_of], counts[node_of], rng.random(len(live)))
    return actions, log_probs[starts[node_of] + actions].tolist()
