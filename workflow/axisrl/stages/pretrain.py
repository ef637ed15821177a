"""The pretrain stage: the tiny study's base, as the paper's runs start from a pretrained LLM.

One job per policy width: it makes the pretraining pool (tier P, no signature shared with the
study's pools), behaviour-clones its reference solutions for ``pretrain.steps`` steps, evaluates
every checkpoint on the validation tier V, and keeps as the base the earliest checkpoint whose V
success reaches ``pretrain.base_success`` (the rule config/README.md states; the best checkpoint,
flagged, if none does), V played greedily or, with ``pretrain.select: sampled``, with sampled actions
as RL's rollouts act. Only then is the chosen base played on the held-out tiers, once, so that
every run can be read against its base's own success (``p_T2_base``): T2 is never read to choose.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import polars as pl

from axisrl.artifacts import read_artifact, write_artifact
from axisrl.config import StageSpec
from axisrl.laws.data import VALIDATION_TIER
from axisrl.stages.dedup import heldout
from axisrl.stages.pools import ENV_COLUMNS, TASK_COLUMNS
from axisrl.threads import limit_threads

log = logging.getLogger("axisrl")

SIGNATURE_COLUMNS = ("sig_api", "sig_schema", "sig_sem", "skin")
"""The environment signatures the pretraining pool may share with none of the study's pools."""
BASE_RUN_KEY = "base"
"""The run key of the base's own held-out episodes."""
SELECTION_BLOCK = 8
"""Checkpoints evaluated on V a block at a time; the next block only while none has reached the
target (the rule chooses the earliest that does, so later checkpoints cannot change the choice)."""


def rate(rows: Sequence[Mapping[str, Any]]) -> float:
    return float(np.mean([row["success"] for row in rows]))


def taken_signatures(frames: Sequence[pl.DataFrame]) -> dict[str, set[str]]:
    """Every signature of the study's pools (dedup's environment frames carry them)."""
    return {column: {value for frame in frames for value in frame[column].to_list()} for column in SIGNATURE_COLUMNS}


SELECTED_ON = {"greedy": "p_V", "sampled": "p_V_sampled"}
"""The checkpoints column each ``pretrain.select`` chooses the base on."""


def choose_base(checkpoints: pl.DataFrame, base_success: float, column: str = "p_V") -> int:
    """The rule: the earliest checkpoint (fewest BC steps) whose V success (``column``) is at least
    ``base_success``; if none reaches it, the one with the highest V success (the earliest of ties).
    Checkpoints not evaluated (null: past the first that reached it) are not candidates.
    Returns its row."""
    reached = (checkpoints[column] >= base_success).fill_null(False)
    if reached.any():
        return int(reached.arg_true()[0])
    return int(checkpoints[column].arg_max())


class Scores(NamedTuple):
    """A checkpoint's V episodes, played greedily and (under ``select: sampled``) sampled."""

    greedy: list[dict[str, Any]]
    sampled: list[dict[str, Any]] | None

    def selected(self, select: str) -> float:
        return rate(self.sampled if select == "sampled" else self.greedy)


def pretrain(
    spec: StageSpec, settings: Mapping[str, Any], inputs: Mapping[str, str], outputs: Mapping[str, str]
) -> None:
    """Make the pretraining pool, behaviour-clone a base on it, choose the base on V, evaluate it."""
    limit_threads(1)
    from axisrl import domains
    from axisrl.backends.tiny import HeldoutStarts, TrainSettings, checkpoint, evaluate, save_checkpoints, train_seeds
    from axisrl.backends.tiny.train import make_policy, param_hash

    p = settings["pretrain"]
    taken = taken_signatures(
        [read_artifact(inputs[name], "dedup") for name in ("envs", "placebo_envs", "heldout_envs")]
    )
    started = time.process_time()
    env_rows, task_rows = domains.load(settings["domain"]).require("generate_pretrain_pool")(
        settings["synthesize"], p, taken
    )
    envs = pl.DataFrame(env_rows, schema=ENV_COLUMNS).with_columns(source=pl.lit("real"))
    tasks = pl.DataFrame(task_rows, schema=TASK_COLUMNS).with_columns(source=pl.lit("real"))
    log.info(
        "pretraining pool: %d envs, %d tasks (%.1f CPU s)", envs.height, tasks.height, time.process_time() - started
    )

    bc = TrainSettings(
        algo="bc",
        width=settings["width"],
        updates=p["steps"],
        visits_per_update=p["references_per_step"],
        d_traj=1,
        lr=p["lr"],
        leak_primitive_role=settings["leak_primitive_role"],
    )
    wanted = sorted({*range(0, p["steps"] + 1, p["checkpoint_every"]), p["steps"]})
    started = time.process_time()
    result = train_seeds(
        env_rows,
        task_rows,
        bc,
        [p["seed"]],
        progress=lambda _, row: log.info("bc step %d loss %.3f", row["update"] + 1, row["loss"]),
        snapshots=wanted,
        domain=settings["domain"],
    )[0]
    bc_seconds = time.process_time() - started
    if result.status != "ok":
        raise RuntimeError(f"behaviour cloning failed: {result.error}")

    heldout_envs, heldout_tasks = heldout(inputs)
    validation = heldout_tasks.filter(pl.col("tier") == VALIDATION_TIER)
    if validation.is_empty():
        raise ValueError(
            "the held-out pool has no validation tier V to choose the base on (synthesize.heldout.validation_worlds)"
        )
    steps = sorted(result.snapshots)
    policies = []
    for step in steps:
        policy = make_policy(bc)
        policy.load_state_dict(result.snapshots[step])
        policies.append(policy.eval())
    started = time.process_time()
    heldout_rows, v_tasks, domain = heldout_envs.to_dicts(), validation.to_dicts(), settings["domain"]
    starts = HeldoutStarts(heldout_rows, v_tasks, settings["evaluate_seed"], bc.leak_primitive_role, domain)
    select, sampled, seed = p["select"], p["select"] == "sampled", settings["evaluate_seed"]

    def play(policy: Any, greedy: bool) -> list[dict[str, Any]]:
        return evaluate(policy, heldout_rows, v_tasks, seed, greedy=greedy, starts=starts, domain=domain)

    scored: list[Scores] = []
    while len(scored) < len(steps) and not any(s.selected(select) >= p["base_success"] for s in scored):
        block = policies[len(scored) : len(scored) + SELECTION_BLOCK]  # later ones only if needed
        scored += [Scores(play(policy, True), play(policy, False) if sampled else None) for policy in block]
        log.info("base selection: %d of %d checkpoints played on V (%s)", len(scored), len(steps), select)
    selection_seconds = time.process_time() - started
    flops = np.cumsum([0] + [row["rollout_flops"] + row["train_flops"] for row in result.metrics])
    unplayed = [None] * (len(steps) - len(scored))
    columns = {
        "bc_steps": steps,
        "loss": [result.metrics[step - 1]["loss"] if step else None for step in steps],
        "n_V": [len(s.greedy) for s in scored] + unplayed,
        "p_V": [rate(s.greedy) for s in scored] + unplayed,
        "bc_flops": [int(flops[step]) for step in steps],
        "param_hash": [param_hash(policy) for policy in policies],
    }
    if sampled:
        columns["p_V_sampled"] = [rate(s.sampled) for s in scored] + unplayed
    types = {"loss": pl.Float64, "n_V": pl.Int64, "p_V": pl.Float64, "p_V_sampled": pl.Float64}
    frame = pl.DataFrame(columns, schema_overrides={k: v for k, v in types.items() if k in columns})
    column = SELECTED_ON[select]
    row = choose_base(frame, p["base_success"], column)
    reached = bool(frame[column][row] >= p["base_success"])
    frame = frame.with_columns(
        chosen=pl.int_range(pl.len()) == row,
        reached=pl.lit(reached),
        bc_cpu_seconds=pl.lit(bc_seconds),
        selection_cpu_seconds=pl.lit(selection_seconds),
    )
    chosen = frame.row(row, named=True)
    if not reached:
        log.warning(
            "no checkpoint reached %s V success %.3f; the base is the best one (%d steps, %.3f)",
            select,
            p["base_success"],
            chosen["bc_steps"],
            chosen[column],
        )
    log.info(
        "base: %d BC steps, V success %.3f greedy%s (n=%d)",
        chosen["bc_steps"],
        chosen["p_V"],
        f", {chosen['p_V_sampled']:.3f} sampled" if sampled else "",
        chosen["n_V"],
    )

    episodes = evaluate(policies[row], heldout_rows, heldout_tasks.to_dicts(), settings["evaluate_seed"], domain=domain)
    base = {
        **checkpoint(result),
        "state_dict": result.snapshots[chosen["bc_steps"]],
        "param_hash": chosen["param_hash"],
        "bc_steps": chosen["bc_steps"],
        "bc_flops": chosen["bc_flops"],
    }
    save_checkpoints({0: base}, outputs["base"])
    write_artifact(envs, outputs["envs"], spec)
    write_artifact(tasks, outputs["tasks"], spec)
    write_artifact(frame, outputs["checkpoints"], spec)
    write_artifact(
        pl.DataFrame([{"run_key": BASE_RUN_KEY, "seed": 0, **row} for row in episodes], infer_schema_length=None),
        outputs["episodes"],
        spec,
    )
