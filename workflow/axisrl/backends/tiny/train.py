"""GRPO and PPO on toolworld with the ToolPointer policy, one update at a time; and behaviour cloning
(``algo="bc"``), which pretrains the study's base through the same loop.

One update visits ``visits_per_update`` tasks (walking a seeded shuffle of the training tasks,
reshuffled each pass, so every task is visited equally often), rolls out ``d_traj`` episodes
of each (one episode seed, so one anonymisation, per group: the samples of one prompt), then takes
``grpo_minibatches`` optimiser steps (GRPO) or ``ppo_epochs`` x ``ppo_minibatches`` steps (PPO): the update rule
``UPDATES`` holds under ``algo``. A non-finite score, loss, gradient or parameter ends the run
with status ``"failed"`` and the metrics so far.

Behaviour cloning plays no sampled rollouts: each visited task's reference calls are teacher-forced
through the real environment (``d_traj`` copies, so 1 is its sensible value) and the ``bc`` rule
trains on them. A run starts from random weights, or from ``init`` (a base's weights: the value head
that PPO adds and a BC base lacks starts from the seed's random init).

Synthetic trajectories (``SyntheticTrajectories``, GRPO only) join every group: ``per_group``
of them per task beside the ``d_traj`` real rollouts, the group's advantages normalised over
all of them as if they were more samples of the prompt (how many visits an update holds is the
training budget's business, ``axisrl.budget``). Their steps do not count against
``token_cap`` (a cap on real env steps); their FLOPs count against ``flop_cap``.

A FLOP cap ends the run close to the cap: once the cap leaves less than two updates, each update
plays at most half the visits the recent FLOPs per visit say are left.

DAPO's dynamic sampling (``dynamic_sampling``): an update drops the groups whose real rollouts all
scored alike (no learning signal) and draws more tasks, a whole update's worth at a time, until it
has its groups with a signal or has drawn ``max_draws`` times; it trains on the first such groups
(on the first draw's groups when none has one). Every rollout drawn is compute the run spent: it
counts in env_steps, episodes, visits, the FLOPs and the training success; ``groups`` are the
groups trained on, ``drawn_groups`` those played.

After every ``PROBE_EVERY``-th update that stepped (every one under a KL bound), one forward without
gradients re-scores the decisions of the first real rollout of each group it trained on and
measures ``rollout_kl``, the k3 estimate of KL(rollout policy || updated policy) (0 when the update
took no step, None on the updates between); its FLOPs are
``probe_flops``, kept apart from training's unless a KL bound (``kl_bound``, ``KL_BOUNDS``) reads
it to set the next update's learning rate.

Randomness: ``torch.manual_seed(seed)`` for the initial weights, and separate numpy generators
(one ``SeedSequence`` spawn each) for task sampling, episode seeds, action sampling and PPO
minibatches; synthetic trajectories (which ones are replayed, simulator seeds, simulated
actions) draw from a generator of their own, seeded apart from those four so that asking for
them leaves the real rollouts' streams as they were. Thread counts are the caller's business.

One seed, one loop (``train``, as CleanRL's ``ppo.py`` reads): ROLLOUT, the update's groups played;
UPDATE, the rule that ``algo`` names (``UPDATES``) takes its advantages, loss, backward and optimiser
steps; RECORD, the metrics row. A job's seeds train one after another (``train_seeds``): training
them in lockstep, one forward for every seed, bought about 2 % (issue 37) and is gone.

Top to bottom: the result; the parts of an update (its visit, its metrics row); ``train`` and
``train_seeds``; last ``SeedRun``, one seed's state and the parts of its update that the loop calls.
The settings live in ``settings``, the run's totals and caps in ``caps``, the update rules in
``updates`` (their registries ``UPDATES`` and ``KL_BOUNDS`` in ``registry``, below both), the
synthetic trajectories (and ``TaskSampler``, which walks the tasks as well as a task's replay rows) in
``synthetic``, an update's draws and what it trains on of them (``Draw``, ``Visit``) in ``visits``.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import logging
import math
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import torch

from axisrl.backends.tiny.caps import RunTotals, visits_within_caps
from axisrl.backends.tiny.fast_torch import Adam, deterministic_eager_ops
from axisrl.backends.tiny.policy import ToolPointer
from axisrl.backends.tiny.registry import KL_BOUNDS, UPDATES
from axisrl.backends.tiny.rollout import Diverged, Episode, RolloutStats, Specs, no_cyclic_gc, rollout
from axisrl.backends.tiny.settings import TrainSettings
from axisrl.backends.tiny.synthetic import Synthesizer, SyntheticTrajectories, TaskSampler
from axisrl.backends.tiny.updates import (
    UpdateContext,
    UpdateStats,
    rollout_kl,
    trained_scores,
)
from axisrl.backends.tiny.visits import Draw, Visit, new_draw, summed_stats, visit_of, with_signal
from axisrl.diagnostics import EpisodeCounts, step_diagnostics
from axisrl.domains import DEFAULT_DOMAIN

log = logging.getLogger(__name__)

__all__ = [
    "TrainResult",
    "make_policy",
    "param_hash",
    "train",
    "train_seeds",
]


@dataclass
class TrainResult:
    """``status``: "ok", or "failed" when the run diverged or an update raised (``metrics`` then
    stop before it; ``error`` says what happened). Both are deterministic for a seed, so the run is
    recorded as failed at once rather than retried.

    ``metrics``, one row per update: reward_mean (the trained reward, sparse or dense),
    success_mean, entropy (mean over rollout decisions), kl (GRPO: k3 KL to the reference when
    ``kl_coef > 0``, else 0; PPO: mean old - new log-prob of the last minibatch), loss, grad_norm
    (before clipping), env_steps, scored_decisions (distinct decision points scored: a group's
    shared prefix once), gradient_steps (decisions in the loss with a non-zero weight: GRPO skips
    zero-advantage episodes; PPO trains every decision), episodes, rollout_flops, train_flops,
    zero_variance_groups and groups. ``compute``: their totals plus updates, visits (the groups
    played), distinct_tasks_seen, distinct_envs_seen, failed_episodes (not verified) and
    truncated_episodes (stopped without ``finish``). Rows also hold drawn_groups (groups played;
    ``groups`` are those trained on, fewer under dynamic sampling), rollout_kl and probe_flops
    (see the module docstring) and lr (the update's learning rate); ``compute`` totals probe_flops,
    and its ``visits`` are the groups played. Rows also hold the collapse diagnostics of
    the real rollouts (``axisrl.diagnostics.STEP_COLUMNS``: tool_calls_mean, no_tool_call_share,
    turns_mean, parse_failures, truncated_share; see ``_episode_counts``), not totalled in ``compute``.

    Synthetic trajectories are compute like any other: their scored decisions, FLOPs and
    gradient steps count in scored_decisions, rollout_flops, train_flops and gradient_steps, and
    they are group members for zero_variance_groups. What the agent did stays real: reward_mean,
    success_mean, entropy, env_steps, episodes, failed_episodes and truncated_episodes are over the
    real rollouts only. Rows (and ``compute``, as totals) add synthetic_episodes,
    synthetic_env_steps (replayed steps in the real environment, or simulated steps),
    synthetic_unmatched_steps (replayed calls no candidate plays) and synthetic_missing_tasks
    (tasks drawn without replay rows); rows add synthetic_reward_mean (the trained score of the
    update's synthetic trajectories: replay labels, simulated rewards; None without any)."""

    status: str
    metrics: list[dict[str, Any]]
    compute: dict[str, Any]
    state: dict[str, torch.Tensor]
    param_hash: str
    settings: TrainSettings
    timings: dict[str, float] = field(default_factory=dict)
    """Measured, machine-dependent, never compute: CPU seconds of rollouts and of optimisation
    (benchmarks), and the rollouts' cost drivers (wall seconds and counts of env calls,
    verifications and policy forwards; see ``RolloutStats``)."""
    error: str | None = None
    snapshots: dict[int, dict[str, torch.Tensor]] = field(default_factory=dict)
    """The weights after each update count asked for (``train_seeds``' ``snapshots``; 0: the initial weights)."""


COST_DRIVERS = ("env_seconds", "env_calls", "verifier_seconds", "verifier_calls", "policy_seconds")
TIMINGS = ("rollout_seconds", "train_seconds", "rollout_wall_seconds", *COST_DRIVERS)


def param_hash(policy: torch.nn.Module) -> str:
    digest = hashlib.sha256()
    for name, tensor in policy.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().contiguous().numpy().tobytes())
    return digest.hexdigest()


def make_policy(settings: TrainSettings) -> ToolPointer:
    return ToolPointer(settings.width, settings.leak_primitive_role, value_head=settings.algo == "ppo")


def load_base(policy: ToolPointer, base: Mapping[str, torch.Tensor]) -> None:
    """Start ``policy`` from a base's weights. Every weight the base has must fit; the only ones it
    may lack are the value head's (a BC base has none; PPO's critic starts from its seed's init)."""
    missing, unexpected = policy.load_state_dict(dict(base), strict=False)
    stray = [name for name in missing if not name.startswith("critic.")]
    if stray or unexpected:
        raise ValueError(f"the base does not fit this policy: missing {stray}, unexpected {list(unexpected)}")


def _zero_variance_groups(scores: torch.Tensor, group: torch.Tensor) -> int:
    """Groups of two or more whose scores are all equal: every advantage in them is zero."""
    count = 0
    for g in group.unique():
        members = scores[group == g]
        count += len(members) > 1 and bool(members.max() == members.min())
    return count


class Prepared(NamedTuple):
    """One seed's update, ready for its rule: what its rollouts played and the rule's context."""

    played: Played
    context: UpdateContext
    seconds: float
    """CPU seconds of its synthetic rollouts."""


class Played(NamedTuple):
    """What one update's rollouts did: the real ones and the synthetic ones."""

    real: RolloutStats
    synthetic: RolloutStats


class Probe(NamedTuple):
    """The update's ``rollout_kl`` and the FLOPs of the forward that measured it (None: not measured)."""

    kl: float | None = 0.0
    flops: int = 0


PROBE_EVERY = 4
"""``rollout_kl`` is measured after every this many updates (the first included), or after every
update under a KL bound (bench/README.md: the probe's cost)."""


def _add_timings(timings: dict[str, float], played: Played, rollout_seconds: float, train_seconds: float) -> None:
    timings["rollout_seconds"] += rollout_seconds
    timings["train_seconds"] += train_seconds
    for key in COST_DRIVERS:
        timings[key] += getattr(played.real, key) + getattr(played.synthetic, key)
    timings["rollout_wall_seconds"] += played.real.seconds + played.synthetic.seconds


def _episode_counts(episode: Episode) -> EpisodeCounts:
    """A real rollout as the collapse diagnostics count it: one turn per decision; every action is
    a structured call, so none fails to parse; truncated when it stopped without ``finish`` (at the
    environment's ``max_steps`` or the run's env-step cap, the tiny policy's length limits)."""
    return EpisodeCounts(episode.node.tool_calls, len(episode.actions), 0, episode.truncated)


def _metrics_row(
    update: int, visit: Visit, played: Played, out: UpdateStats, probe: Probe, s: TrainSettings, lr: float
) -> dict[str, Any]:
    """The update's metrics row (see ``TrainResult``)."""
    real, synthetic = played
    density = s.reward_density
    rewards = trained_scores(visit.episodes, density)
    synthetic_rewards = trained_scores(visit.synthetic.episodes, density)
    trained_zero_variance = _zero_variance_groups(torch.cat([rewards, synthetic_rewards]), visit.groups)
    return {
        "update": update,
        "reward_mean": float(trained_scores(visit.played, density).mean()),
        "success_mean": float(np.mean([e.success for e in visit.played])),
        "entropy": real.entropy_sum / max(real.decisions, 1),
        "kl": out.kl,
        "rollout_kl": None if s.algo == "bc" else probe.kl,
        "lr": lr,
        "loss": out.loss,
        "grad_norm": out.grad_norm,
        "env_steps": real.env_steps,
        "episodes": len(visit.played),
        "scored_decisions": real.scored_decisions + synthetic.scored_decisions,
        "gradient_steps": out.gradient_steps,
        "rollout_flops": real.flops + synthetic.flops,
        "train_flops": out.train_flops + (probe.flops if s.kl_bound is not None else 0),
        "probe_flops": probe.flops,
        "zero_variance_groups": trained_zero_variance + visit.dropped_zero_variance,
        "groups": len(visit.tasks),
        "drawn_groups": len(visit.drawn_tasks),
        **step_diagnostics([_episode_counts(e) for e in visit.played]),
        "synthetic_episodes": len(visit.synthetic.episodes),
        "synthetic_env_steps": synthetic.env_steps,
        "synthetic_unmatched_steps": synthetic.unmatched_steps,
        "synthetic_missing_tasks": visit.synthetic.missing,
        "synthetic_reward_mean": float(synthetic_rewards.mean()) if visit.synthetic.episodes else None,
    }


def train(
    envs: Sequence[Mapping[str, Any]],
    tasks: Sequence[Mapping[str, Any]],
    settings: TrainSettings,
    seed: int,
    progress: Callable[[dict[str, Any]], None] | None = None,
    synthetic: SyntheticTrajectories | None = None,
    init: Mapping[str, torch.Tensor] | None = None,
    snapshots: Collection[int] = (),
    domain: str = DEFAULT_DOMAIN,
) -> TrainResult:
    """Train a policy on ``tasks`` (rows of env ``envs``, environments of ``domain``), from random
    weights or from ``init`` (a base's weights), with ``synthetic`` trajectories in its groups if
    given; ``progress(row)`` after each update; the result keeps the weights after each update
    count in ``snapshots``. See the module docstring."""
    run = SeedRun(envs, tasks, settings, seed, synthetic, init, domain)
    run.snapshot(0, snapshots)
    rule = UPDATES[settings.algo]
    with no_cyclic_gc():
        for update in range(settings.updates):
            # ROLLOUT: the update's tasks, each played by its group of rollouts (under dynamic
            # sampling, more draws while too few groups have a learning signal)
            started = time.process_time()
            if not run.draw(run.visits_within_caps()):
                break
            run.play_draws(update)
            rollout_seconds = time.process_time() - started
            if not run.running:
                break
            visit, prepared = run.prepare(update)  # its synthetic rollouts' seconds: prepared.seconds
            if prepared is None:
                break
            # UPDATE: the rule's advantages, loss, backward and optimiser steps on what was played
            started = time.process_time()
            try:
                out = rule(prepared.context)
            except Exception as exc:  # a failed run is a result, and the study goes on
                run.fail(update, exc)
                break
            probe = run.probe(update, out, visit)
            train_seconds = time.process_time() - started
            # RECORD: the update's metrics row, totals and snapshot
            run.record(update, visit, prepared, out, probe, rollout_seconds + prepared.seconds, train_seconds)
            run.snapshot(len(run.metrics), snapshots)
            if progress is not None:
                progress(run.metrics[-1])
    return run.result()


def train_seeds(
    envs: Sequence[Mapping[str, Any]],
    tasks: Sequence[Mapping[str, Any]],
    settings: TrainSettings,
    seeds: Sequence[int],
    progress: Callable[[int, dict[str, Any]], None] | None = None,
    synthetic: SyntheticTrajectories | None = None,
    init: Mapping[str, torch.Tensor] | None = None,
    snapshots: Collection[int] = (),
    domain: str = DEFAULT_DOMAIN,
) -> list[TrainResult]:
    """``train`` for each seed of ``seeds``, one after another (a job's seeds); ``progress(seed, row)``."""
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct, got {list(seeds)}")
    return [
        train(
            envs,
            tasks,
            settings,
            seed,
            None if progress is None else functools.partial(progress, seed),
            synthetic,
            init,
            snapshots,
            domain,
        )
        for seed in seeds
    ]


class SeedRun:
    """One seed's run: its generators, policy (and reference), optimiser, task sampler, synthetic
    source, metrics and totals, and the parts of an update that ``train``'s loop calls in turn:
    ``draw`` and ``play_draws`` (ROLLOUT), ``prepare`` (the rule's context), ``probe`` after the
    rule, and ``record`` (RECORD)."""

    def __init__(
        self,
        envs: Sequence[Mapping[str, Any]],
        tasks: Sequence[Mapping[str, Any]],
        settings: TrainSettings,
        seed: int,
        synthetic: SyntheticTrajectories | None,
        init: Mapping[str, torch.Tensor] | None = None,
        domain: str = DEFAULT_DOMAIN,
    ) -> None:
        if not tasks:
            raise ValueError("no training tasks")
        s = self.settings = settings
        per_group = 0 if synthetic is None else synthetic.per_group
        if per_group and s.algo != "grpo":
            raise ValueError(f"synthetic trajectories join GRPO groups; algo {s.algo!r} has none (use algo='grpo')")
        self.seed, self.tasks = seed, tasks
        torch.manual_seed(seed)
        deterministic_eager_ops()
        self.task_rng, self.seed_rng, self.action_rng, self.batch_rng = (
            np.random.default_rng(child) for child in np.random.SeedSequence(seed).spawn(4)
        )
        self.specs = Specs(envs, domain)
        self.policy = make_policy(s)
        if init is not None:
            load_base(self.policy, init)
        self.reference = (
            copy.deepcopy(self.policy).requires_grad_(False) if s.algo == "grpo" and s.kl_coef > 0 else None
        )
        self.optimizer = Adam(self.policy.parameters(), lr=s.lr)
        self.lr_scale = 1.0
        """What the KL bound has made of the learning rate so far (1 without one)."""
        self.warmup = math.ceil(s.lr_warmup_steps_ratio * s.updates)
        self.optimizer.zero_grad()
        self.sampler = TaskSampler(len(tasks), self.task_rng)
        self.horizon = max(spec["max_steps"] for spec in self.specs.by_id.values())
        self.synthesizer = Synthesizer(synthetic, self.specs, s.leak_primitive_role, seed) if per_group else None
        self.metrics: list[dict[str, Any]] = []
        self.totals = RunTotals()
        self.timings = dict.fromkeys(TIMINGS, 0.0)
        self.status, self.error = "ok", None
        self.snapshots: dict[int, dict[str, torch.Tensor]] = {}
        self.running = True
        """False once the run failed or a cap ended it."""
        self.draws: list[Draw] = []
        self.played: list[RolloutStats] = []
        """The update in progress: its draws and what each one's real rollouts did."""

    def snapshot(self, updates: int, wanted: Collection[int]) -> None:
        """Keep the weights after ``updates`` updates, if they are ``wanted``."""
        if updates in wanted:
            self.snapshots[updates] = {k: v.detach().clone() for k, v in self.policy.state_dict().items()}

    def visits_within_caps(self) -> int:
        """Visits the next update's first draw plays; 0 ends the run (the caps leave none)."""
        self.draws, self.played = [], []
        visits = visits_within_caps(self.settings, self.metrics, self.totals)
        self.running = visits > 0
        return visits

    def draw(self, visits: int) -> bool:
        """Draw ``visits`` more tasks for the update in progress (none: False)."""
        if visits == 0:
            return False
        chosen = [self.tasks[k] for k in self.sampler.take(visits)]
        self.draws.append(new_draw(chosen, self.seed_rng.integers(0, 2**62, size=visits), self.specs, self.settings))
        return True

    def short(self) -> bool:
        """Dynamic sampling: whether the draws so far hold fewer groups with a signal than the first draw's size."""
        return sum(sum(with_signal(draw, self.settings)) for draw in self.draws) < len(self.draws[0].tasks)

    def extra_visits(self) -> int:
        """The size of one more draw: the first draw's, or less where a cap (counting the draws so far) is near."""
        return visits_within_caps(self.settings, self.metrics, self.totals, self.played, len(self.draws[0].tasks))

    def play_draws(self, update: int) -> None:
        """Play the update's first draw; under dynamic sampling, draw again while short of groups
        with a signal and play those, up to ``max_draws`` draws in all. A rollout that raises
        (non-finite scores among them) fails the run."""
        s = self.settings
        draws_left = s.max_draws if s.dynamic_sampling else 1
        while True:
            try:
                played = rollout(
                    self.policy,
                    self.draws[-1].episodes,
                    self.action_rng,
                    self.steps_left(),
                    None if s.algo != "bc" else self.draws[-1].scripts,
                )
            except Exception as exc:
                self.fail(update, exc)
                return
            self.played.append(played)
            draws_left -= 1
            if not (draws_left and self.short() and self.draw(self.extra_visits())):
                return

    def probe(self, update: int, out: UpdateStats, visit: Visit) -> Probe:
        """``rollout_kl`` after an update that stepped, when a KL bound reads it or the update is one
        of every ``PROBE_EVERY``: on the decisions of the first real rollout of each group it
        trained on (one in ``d_traj``: re-scoring every rollout of every update cost 30 % of a
        default run's CPU), without gradients. An update that took no step moved nothing: 0.
        Behaviour cloning teacher-forces its episodes (no rollout policy): not measured."""
        s = self.settings
        if not out.gradient_steps:
            return Probe(0.0)
        if s.algo == "bc" or (s.kl_bound is None and update % PROBE_EVERY):
            return Probe(None)
        return Probe(*rollout_kl(self.policy, visit.episodes[:: s.d_traj]))

    def steps_left(self) -> int | None:
        s = self.settings
        drawn = sum(p.env_steps for p in self.played)
        return None if s.token_cap is None else s.token_cap - self.totals.env_steps - drawn

    def prepare(self, update: int) -> tuple[Visit, Prepared | None]:
        """The visit of the update whose draws were played, and what its rule trains on: its
        synthetic rollouts played, the rule's context. None when the run failed (non-finite
        scores, or an exception in its synthetic rollouts)."""
        s, started = self.settings, time.process_time()
        visit = visit_of(self.draws, s, self.synthesizer)
        real = summed_stats(self.played)
        try:
            synthetic = (
                self.synthesizer.rollout(self.policy, visit.synthetic.episodes, visit.synthetic.scripts)
                if self.synthesizer is not None and visit.synthetic.episodes
                else RolloutStats()
            )
        except Exception as exc:
            self.fail(update, exc)
            return visit, None
        self.optimizer.lr = self.lr_scale * (s.lr * min(1.0, (update + 1) / self.warmup) if self.warmup else s.lr)
        context = UpdateContext(
            self.policy,
            self.reference,
            self.optimizer,
            visit.episodes + visit.synthetic.episodes,
            visit.groups,
            s,
            self.horizon,
            self.batch_rng,
        )
        return visit, Prepared(Played(real, synthetic), context, time.process_time() - started)

    def record(
        self,
        update: int,
        visit: Visit,
        prepared: Prepared,
        out: UpdateStats,
        probe: Probe,
        rollout_seconds: float,
        train_seconds: float,
    ) -> None:
        """The update's metrics row and totals; ``*_seconds``: the CPU time of the update's parts.
        A KL bound sets the next update's learning rate from ``probe`` (only after an update that stepped)."""
        _add_timings(self.timings, prepared.played, rollout_seconds, train_seconds)
        row = _metrics_row(update, visit, prepared.played, out, probe, self.settings, prepared.context.optimizer.lr)
        self.metrics.append(row)
        self.totals.add(row, visit)
        s = self.settings
        if s.kl_bound is not None and out.gradient_steps:
            self.lr_scale = KL_BOUNDS[s.kl_bound](self.lr_scale, probe.kl, s.target_kl)

    def fail(self, update: int, exc: Exception) -> None:
        """End the run as failed at ``update``: a failed run is a result, and the study goes on."""
        self.status, self.error = "failed", f"{type(exc).__name__}: {exc}"
        self.running = False
        if not isinstance(exc, Diverged):
            log.error("seed %d: update %d failed", self.seed, update, exc_info=exc)

    def result(self) -> TrainResult:
        state = {k: v.detach().clone() for k, v in self.policy.state_dict().items()}
        return TrainResult(
            self.status,
            self.metrics,
            self.totals.as_compute(),
            state,
            param_hash(self.policy),
            self.settings,
            self.timings,
            self.error,
            self.snapshots,
        )
