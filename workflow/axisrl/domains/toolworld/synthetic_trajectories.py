"""Trajectory synthesis (``swirl``; axis ``d_traj``): the reference of a real task with step
errors, kept unless the step-wise judge catches one.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from typing import Any

from axisrl.domains.canon import canonical_json, derive_seed
from axisrl.domains.toolworld.defects import step_variants, with_step_errors
from axisrl.domains.toolworld.model import FINISH
from axisrl.domains.toolworld.runtime import compile_spec
from axisrl.domains.toolworld.synthetic_common import SyntheticPool, method_stats, replay
from axisrl.domains.toolworld.world import Spec


def trajectory_method(
    method: str,
    fid: Mapping[str, Any],
    seed: int,
    n_trajectories: int,
    targets: Sequence[Mapping[str, Any]],
    specs: Mapping[str, Spec],
    real_tasks: Mapping[str, list[dict[str, Any]]],
    out: SyntheticPool,
) -> dict[str, Any]:
    """SWiRL: per real task of the target environments, generated trajectories (the reference
    with step errors) that the step-wise judge lets through, up to ``n_trajectories`` kept out of
    at most ``4 * n_trajectories + 16`` drafts. ``label`` is the generator's claim (1.0);
    ``true_success`` is the verified outcome. ``n_steps`` counts tool calls, not ``finish``.
    Stats add ``error_prone_steps`` (drafted steps that could go wrong) beside
    ``injected_step_error`` (those that did), the measured per-step error rate."""
    drafts = kept_total = injected_steps = prone_steps = kept_defective = 0
    for env in targets:
        spec = specs[env["env_id"]]
        rt = compile_spec(spec)
        for task in real_tasks.get(env["env_id"], []):
            rng = random.Random(derive_seed(seed, "synthetic", method, task["task_id"]))
            reference = json.loads(task["reference"])
            variants = [step_variants(rt, task, call) for call in reference]
            outcomes: dict[str, bool] = {}
            kept = 0
            for _ in range(4 * n_trajectories + 16):
                if kept == n_trajectories:
                    break
                drafts += 1
                calls, errors = with_step_errors(rng, reference, variants, fid["step_error"])
                injected_steps += errors
                prone_steps += sum(bool(options) for options in variants)
                if any(rng.random() < fid["judge_recall"] for _ in range(errors)):
                    continue
                text = canonical_json(calls)
                if text not in outcomes:
                    outcomes[text] = replay(spec, task, calls)[0].verify().success
                out.trajectories.append(
                    {
                        "task_id": task["task_id"],
                        "env_id": task["env_id"],
                        "source": method,
                        "trajectory_index": kept,
                        "calls": text,
                        "label": 1.0,
                        "true_success": outcomes[text],
                        "n_steps": sum(c["name"] != FINISH for c in calls),
                        "step_errors": errors,
                        "defect": "step_error" if errors else None,
                    }
                )
                kept += 1
                kept_defective += errors > 0
            kept_total += kept
    stats = method_stats(method, drafts, kept_total, {"step_error": injected_steps}, {"step_error": kept_defective})
    return {**stats, "error_prone_steps": prone_steps}
