"""tiny backend science on a small pool (slow): what the study relies on, checked end to end.

One fixture trains every policy once: D_T = 32 training tasks spread over d_env = 1 or 32
environments (same tasks per update, same updates), and the 1-env setting again with the
primitive role leaked. Held-out success is measured on unseen worlds (T2) with the same episode
seeds for every policy. Run with ``-s`` to see the numbers.

Seen while choosing these settings (T2 success, sparse reward): at 60 updates (4 seeds)
d_env=1 0.12-0.23 (mean 0.18) vs d_env=32 0.16-0.39 (0.32), yet another 2-seed draw tied (0.20
vs 0.20); at 100 updates (4 seeds) d_env=1 0.11-0.37 (0.20) vs d_env=32 0.25-0.34 (0.30). Runs
are bimodal (learning takes off or not), so two seeds decide by about one seed's noise: the last
run of this file before group rollouts shared one anonymisation gave d_env=1 0.20/0.45 vs
d_env=32 0.24/0.44; after: 0.305/0.219 vs 0.211/0.422, and the leak 0.297/0.266. The leak moved
d_env=1 from 0.18 to 0.30 at 60 updates (4 seeds) but from 0.33 to 0.19 at 100 updates (2 seeds), and d_env=32 from
0.32 to 0.34: noise, since the descriptor's (access, return kind, semantics) already names the
primitive; that check is expected to fail. With a dense reward (partial credit) the d_env
ordering reversed at 60 updates (0.27 vs 0.13; the 32-env runs also learned their own tasks worse).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from axisrl.backends import tiny
from axisrl.config import validate_config
from axisrl.domains import toolworld as tw

pytestmark = pytest.mark.slow

POOL = {"seed": 0, "n_worlds": 16, "variants_per_world": 4, "contents_per_variant": 1, "reskins_per_world": 0,
        "tasks_per_env": 32,
        "heldout": {"tasks_per_env": 8, "t0_envs": 4, "t1_envs": 4, "t2_worlds": 8, "t2_variants_per_world": 2}}
SETTINGS = {"updates": 100, "episodes_per_update": 64, "group_size": 8, "width": 32}
N_TASKS = 32
RUNS = {"d_env=1": (1, False), "d_env=32": (32, False), "d_env=1 leak": (1, True)}
SEEDS = (0, 1)


def _subset(pool: tw.Pool, d_env: int) -> tuple[list[dict], list[dict]]:
    """``N_TASKS`` tasks from ``d_env`` environments spread over the worlds (equal shares)."""
    envs = pool.envs[::len(pool.envs) // d_env][:d_env]
    ids = {env["env_id"] for env in envs}
    per_env = N_TASKS // d_env
    tasks = [t for env in envs for t in [t for t in pool.tasks if t["env_id"] == env["env_id"]][:per_env]]
    assert len(tasks) == N_TASKS and {t["env_id"] for t in tasks} == ids
    return envs, tasks


def _t2_success(records: list[dict]) -> float:
    return float(np.mean([r["success"] for r in records if r["tier"] == "T2"]))


@pytest.fixture(scope="module")
def study(schema) -> dict[str, list[float]]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    pool = tw.generate_pool(validate_config({"synthesize": POOL}, schema)["synthesize"])
    heldout = [t for t in pool.heldout_tasks if t["tier"] == "T2"]
    out: dict[str, list[float]] = {}
    for name, (d_env, leak) in RUNS.items():
        envs, tasks = _subset(pool, d_env)
        settings = tiny.TrainSettings.from_dict({**SETTINGS, "leak_primitive_role": leak})
        out[name] = []
        for seed in SEEDS:
            result = tiny.train(envs, tasks, settings, seed)
            assert result.status == "ok"
            policy = tiny.make_policy(settings)
            policy.load_state_dict(result.state)
            out[name].append(_t2_success(tiny.evaluate(policy, pool.heldout_envs, heldout, seed=0)))
    for kind in ("random", "memoriser"):
        out[kind] = [_t2_success(tiny.baseline_episodes(kind, pool.envs, pool.tasks, pool.heldout_envs, heldout, 0))]
    torch.set_num_threads(threads)
    print("\nT2 success:", {name: [round(v, 3) for v in values] for name, values in out.items()})
    return out


def test_a_trained_policy_beats_random_on_unseen_worlds(study):
    assert np.mean(study["d_env=32"]) > study["random"][0] + 0.1


def test_the_memoriser_is_near_zero_on_unseen_worlds(study):
    assert study["memoriser"][0] <= 0.05


@pytest.mark.xfail(strict=False, reason=(
    "2 seeds cannot resolve it: runs are bimodal; measured 0.34 vs 0.33 and 0.32 vs 0.26 (2 seeds, this "
    "file's settings), 0.30 vs 0.20 and 0.32 vs 0.18 (4 seeds); the default study's fitted d_env trend "
    "is the real check"))
def test_more_environments_at_fixed_tasks_and_updates_generalise_better(study):
    assert np.mean(study["d_env=32"]) > np.mean(study["d_env=1"])


@pytest.mark.xfail(strict=False, reason=(
    "not reliable: in toolworld the descriptor's (access, return kind, semantics) already names the "
    "primitive (86 descriptor shapes in the default pool, none shared by two primitives), so the leak adds "
    "no information (hiding return kind, semantics and even parameter kinds still leaves the interface "
    "naming it); measured differences (-0.14 to +0.12 over 2-4 seeds) are optimisation noise"))
def test_leaking_the_primitive_role_raises_unseen_world_success(study):
    assert np.mean(study["d_env=1 leak"]) > np.mean(study["d_env=1"])
