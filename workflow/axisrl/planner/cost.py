"""What a design costs: CPU-seconds per tiny run fitted to a finished study's measured train jobs (or the
stated model) and GPU-hours from ``axisrl.cluster_cost``. Which measured jobs are a study's the caller
says by their train keys (``axisrl.stages.registry.train_keys``: the stages' keys, which sit above the
planner). Apart because pricing reads result files and configs, not simulated studies."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from axisrl.planner.model import TIER, SweepDesign


@dataclass(frozen=True)
class RunCost:
    """What one run of a design costs: ``unit`` (cpu_seconds or gpu_hours) per run, from
    ``base + per_rollout * rollouts`` (tiny) or the GPU cost model at its ``d_traj`` (cluster).
    ``base`` holds the evaluation of ``episodes`` T2 episodes a run; a design with another T2 pool
    pays ``per_episode`` for each episode more or less (0: not measured, so the pool is not searched).
    ``source`` says what priced it, for the reader of a cost: measured jobs, or a model."""

    unit: str
    base: float = 0.0
    per_rollout: float = 0.0
    visits: float = 0.0
    config: Mapping[str, Any] | None = None
    per_episode: float = 0.0
    episodes: int = 0
    source: str = ""

    def of(self, design: SweepDesign) -> float:
        """The design's total: every distinct sweep point times its seeds."""
        points = [design.centre | {axis: x} for axis, values in design.grids.items() for x in values]
        distinct = {tuple(sorted(p.items())) for p in points}
        pool = self.per_episode * (design.episodes - self.episodes)
        return design.seeds * sum(self.per_run(dict(p)["d_traj"]) + pool for p in distinct)

    def per_run(self, d_traj: int) -> float:
        """One run at ``d_traj`` with the measured T2 pool."""
        if self.unit == "gpu_hours":
            from axisrl.cluster_cost import run_gpu_hours

            return run_gpu_hours(self.config, d_traj)
        return self.base + self.per_rollout * self.visits * d_traj


POOL_FACTORS = (0.5, 1.0, 2.0)
"""T2 pools ``search`` tries, as multiples of the design's, where the evaluation's cost is measured."""


STATED_RUN_SECONDS = (4.35, 0.00084)
"""CPU-seconds of a tiny run, base and per rollout, fitted to the default study's train jobs (AMD
EPYC, 2 vCPUs: bench/README, an adaptive second wave): the price where a study has no measured jobs."""


def measured_jobs(results: Path, keys: Collection[str] | None = None) -> list[str]:
    """The train keys under ``results`` with a benchmark and a runs table (``keys``: of these only)."""
    benchmarks = sorted((results / "benchmarks" / "train").glob("*.tsv"))
    return [
        bench.stem
        for bench in benchmarks
        if (keys is None or bench.stem in keys) and (results / "train" / bench.stem / "runs.parquet").exists()
    ]


def measured_cpu_cost(results: Path, visits: float, keys: Collection[str] | None = None) -> RunCost:
    """CPU-seconds per tiny-backend run, ``base + per_rollout * rollouts``, fitted by least squares to
    a finished study's train jobs (``results/benchmarks/train/<key>.tsv`` wall seconds against the
    rollouts of the runs in ``results/train/<key>/runs.parquet``; ``keys``: only these jobs). One
    process per core: a job's wall seconds are its CPU-seconds. A held-out episode costs what its
    runs measured (``heldout_seconds_per_episode``, median; 0 for a study from before it) and
    ``base`` holds the evaluation of their T2 pool (``episodes``, read off the jobs' episodes)."""
    jobs, per_episode, t2 = [], [], []
    for key in measured_jobs(results, keys):
        runs = results / "train" / key / "runs.parquet"
        frame = pl.read_parquet(runs)
        seconds = float(pl.read_csv(results / "benchmarks" / "train" / f"{key}.tsv", separator="\t")["s"][0])
        jobs.append((seconds, frame.height, float(frame["episodes"].sum())))
        episodes = runs.with_name("episodes.parquet")
        if "heldout_seconds_per_episode" in frame.columns and episodes.exists():
            per_episode += frame["heldout_seconds_per_episode"].to_list()
            n_t2 = pl.scan_parquet(episodes).filter(pl.col("tier") == TIER).select(pl.len()).collect().item()
            t2.append(n_t2 / frame.height)
    if len(jobs) < 2:
        raise ValueError(f"{results}: fewer than 2 measured train jobs to fit CPU-seconds per run from")
    seconds, n_runs, rollouts = (np.array(column) for column in zip(*jobs, strict=True))
    (base, per_rollout), *_ = np.linalg.lstsq(np.column_stack((n_runs, rollouts)), seconds, rcond=None)
    source = (
        f"CPU-seconds fitted to {len(jobs)} measured train jobs{'' if keys is None else ' of this study'} in {results}"
    )
    if not per_episode:
        return RunCost("cpu_seconds", float(base), float(per_rollout), visits, source=source)
    return RunCost(
        "cpu_seconds",
        float(base),
        float(per_rollout),
        visits,
        per_episode=float(np.median(per_episode)),
        episodes=round(float(np.median(t2))),
        source=source,
    )


def cpu_cost(results: Path | None, visits: float, keys: Collection[str] | None) -> RunCost:
    """A tiny study's CPU-seconds: fitted to its own measured train jobs in ``results`` (``keys``, its
    train keys; None: every job there) where there are 2 or more, else ``STATED_RUN_SECONDS``:
    another study's jobs price other designs, and fitted to them a run's cost came out negative."""
    if results is not None and len(measured_jobs(results, keys)) >= 2:
        return measured_cpu_cost(results, visits, keys)
    if results is None or not results.is_dir():
        why = "no results folder to read measured train jobs from"
    else:
        found, ours = len(measured_jobs(results)), len(measured_jobs(results, keys))
        why = f"{results} holds {found} measured train jobs, {ours} of this study (by train key)"
    base, per_rollout = STATED_RUN_SECONDS
    return RunCost(
        "cpu_seconds",
        base,
        per_rollout,
        visits,
        source=f"the stated cost model ({base:g} s a run + {per_rollout:g} s a rollout, the default study's): {why}",
    )


def check_positive(cost: RunCost, design: SweepDesign) -> None:
    """Refuse a cost model that prices a run of the design at 0 or less (a fit to too few or too
    alike jobs can): no such cost is a price."""
    for d_traj in sorted({*design.grids["d_traj"], design.centre["d_traj"]}):
        if not cost.per_run(d_traj) > 0:
            raise ValueError(
                f"{cost.source} prices a run at d_traj={d_traj} at {cost.per_run(d_traj):.3g} "
                f"{cost.unit.replace('_', '-')}: a cost must be positive (too few or too alike jobs to fit)"
            )
