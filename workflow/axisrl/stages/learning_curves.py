"""A tiny train job's learning curves on the validation tier V (``learning_curves.points``): each
run's success on V at its start and after every 1/points of its updates, against the compute it
had spent there (its own executed FLOPs, ``rollout_flops + train_flops`` summed over the updates
so far, as runs.parquet's ``executed_compute`` sums them over all of them).

The curve's ends are the run's own numbers: its last point is the V episodes of the job's held-out
evaluation (so it is the run's ``p_V``), and its start, for a run from a base, is the base's
``p_V_base`` (the same weights on the same episodes). Only the points between are played here, on
V's tasks with the episode seeds they have in the whole held-out pool. The CPU seconds they take
are measured and kept apart from the run's compute (runs' ``curve_seconds``), as the held-out
evaluation's are. V is the tier the base is chosen on; no test tier is read."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import polars as pl

from axisrl.laws.data import VALIDATION_TIER

CURVE_COLUMNS = {
    "run_key": pl.String,
    "seed": pl.Int64,
    "update": pl.Int64,
    "compute": pl.Float64,
    "p_V": pl.Float64,
    "n_V": pl.Int64,
}
"""One row per run and curve point."""


def curve_updates(updates: int, points: int) -> list[int]:
    """The update counts a run's curve is read at: 0 and every 1/``points`` of ``updates``."""
    return sorted({round(k * updates / points) for k in range(points + 1)})


class Pending(NamedTuple):
    """A curve point still to be played: which run, after how many updates, and those weights."""

    run: int
    update: int
    state: Mapping[str, Any]


def curves(
    results: Sequence[Any],
    run_keys: Sequence[str],
    seeds: Sequence[int],
    evaluated: Sequence[Sequence[Mapping[str, Any]]],
    starts: Any,
    heldout_envs: Sequence[Mapping[str, Any]],
    heldout_tasks: Sequence[Mapping[str, Any]],
    evaluate_seed: int,
    base_v: float | None,
    domain: str,
) -> tuple[pl.DataFrame, float]:
    """The job's curve frame (``CURVE_COLUMNS``) and the CPU seconds its points took. ``results``:
    the seeds' ``TrainResult`` (with their snapshots); ``evaluated``: each seed's held-out records
    (every tier, from ``starts``); ``base_v``: the base's V success (None: random init). A failed
    run has no curve (its last weights may not be finite)."""
    from axisrl.backends.tiny import evaluate, make_policy

    v_rows = [k for k, task in enumerate(heldout_tasks) if task["tier"] == VALIDATION_TIER]
    if not v_rows:
        raise ValueError("the held-out pool has no validation tier V to draw learning curves on")
    v_tasks = [heldout_tasks[k] for k in v_rows]
    rows: list[dict[str, Any]] = []
    pending: list[Pending] = []
    for run, result in enumerate(results):
        if result.status != "ok":
            continue
        done = len(result.metrics)
        spent = np.cumsum([0.0] + [row["rollout_flops"] + row["train_flops"] for row in result.metrics])
        last = [row["success"] for row in evaluated[run] if row["tier"] == VALIDATION_TIER]
        for update in sorted({*(u for u in result.snapshots if u <= done), done}):
            row = {"run_key": run_keys[run], "seed": seeds[run], "update": update, "compute": float(spent[update])}
            if update == done:
                rows.append({**row, "p_V": float(np.mean(last)), "n_V": len(last)})
            elif update == 0 and base_v is not None:
                rows.append({**row, "p_V": base_v, "n_V": len(v_tasks)})
            else:
                rows.append({**row, "p_V": None, "n_V": len(v_tasks)})
                pending.append(Pending(run, update, result.snapshots[update]))
    started = time.process_time()
    played = {}
    v_starts = starts.subset(v_rows)
    for point in pending:
        policy = make_policy(results[point.run].settings)
        policy.load_state_dict(point.state)
        scored = evaluate(policy, heldout_envs, v_tasks, evaluate_seed, starts=v_starts, domain=domain)
        played[(run_keys[point.run], point.update)] = float(np.mean([r["success"] for r in scored]))
    seconds = time.process_time() - started
    for row in rows:
        if row["p_V"] is None:
            row["p_V"] = played[(row["run_key"], row["update"])]
    return pl.DataFrame(rows, schema=CURVE_COLUMNS), seconds
