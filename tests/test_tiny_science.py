"""tiny backend science on a small pool (slow): what the study relies on, checked end to end.

One fixture trains every policy once: D_T = 32 training tasks spread over d_env = 1, 4 or 32
environments (same tasks per update, same updates; 4 seeds), and the 1-env setting again with the
primitive role leaked (2 seeds). Held-out success is measured on unseen worlds (T2) with the same episode
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

So the d_env check reads the fitted trend over runs, as the default study's ``trends`` frame does:
d_env = 1, 4 and 32 with 4 seeds each. Measured (2026-12-01, Intel Xeon with AVX-512): T2 success
0.17, 0.40 and 0.33 (means of 4 seeds), slope per doubling 0.026 [-0.010, 0.062]. The full grid 1, 2,
4, 8, 16, 32 at these settings (4 seeds) gave 0.17, 0.21, 0.40, 0.38, 0.24, 0.33, slope 0.024
[-0.003, 0.050]; at the default study's training settings (40 updates, width 64) on this pool it
did not rise at all (0.28 at d_env = 1, 0.17 at 32). On the default study (larger pool, 4 seeds) the
trend excludes 0: 0.035 [0.012, 0.059].

The leak, same day: at d_env = 1 (2 seeds) 0.18 and 0.47 against 0.17 and 0.16 without it (so the
check passed by one seed that took off); at d_env = 32 (4 seeds) 0.27 against 0.33. With access,
return kind and semantics blanked from every descriptor (parameter kinds left, under which only
get/delete and update/transition share shapes), d_env = 32 scored 0.35 without the leak and 0.35
with it: T2 success here is not limited by knowing what a tool does.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
import torch

from axisrl.backends import tiny
from axisrl.config import validate_config
from axisrl.domains import toolworld as tw
from axisrl.laws import success_trends

pytestmark = pytest.mark.slow

POOL = {"seed": 0, "n_worlds": 16, "variants_per_world": 4, "contents_per_variant": 1, "reskins_per_world": 0,
        "tasks_per_env": 32,
        "heldout": {"tasks_per_env": 8, "t0_envs": 4, "t1_envs": 4, "t2_worlds": 8, "t2_variants_per_world": 2}}
SETTINGS = {"updates": 100, "episodes_per_update": 64, "group_size": 8, "width": 32}
N_TASKS = 32
D_ENVS = (1, 4, 32)
TREND_SEEDS = (0, 1, 2, 3)
RUNS = {**{f"d_env={d_env}": (d_env, False, TREND_SEEDS) for d_env in D_ENVS}, "d_env=1 leak": (1, True, (0, 1))}


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
    out: dict[str, list[float]] = {"T2 tasks": [len(heldout)]}
    for name, (d_env, leak, seeds) in RUNS.items():
        envs, tasks = _subset(pool, d_env)
        settings = tiny.TrainSettings.from_dict({**SETTINGS, "leak_primitive_role": leak})
        out[name] = []
        for seed in seeds:
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
    "on this small pool success rises from d_env = 1 to 4 and then not further (0.17, 0.40, 0.33), so the "
    "linear trend's interval includes 0: 0.026 [-0.010, 0.062] per doubling (4 seeds); the default study's "
    "d_env trend excludes 0 (README, bench/README)"))
def test_more_environments_at_fixed_tasks_and_updates_generalise_better(study):
    """The fitted trend of T2 success over log2 d_env, runs as replicates, rises: its interval excludes 0."""
    n_t2 = study["T2 tasks"][0]
    runs = pl.DataFrame([{"d_env": d_env, "d_task": N_TASKS, "d_traj": SETTINGS["group_size"], "seed": seed,
                          "successes": round(p * n_t2), "trials": n_t2}
                         for d_env in D_ENVS for seed, p in zip(TREND_SEEDS, study[f"d_env={d_env}"])])
    trend = success_trends(runs, ["d_env"]).row(0, named=True)
    print("T2 success per doubling of d_env:", trend)
    assert trend["slope_lo"] > 0


@pytest.mark.xfail(strict=False, reason=(
    "not reliable: in toolworld the descriptor's (access, return kind, semantics) already names the "
    "primitive (86 descriptor shapes in the default pool, none shared by two primitives; "
    "test_tiny_render.py::test_a_tools_descriptor_shape_names_its_primitive), so the leak adds "
    "no information (hiding return kind, semantics and even parameter kinds still leaves the interface "
    "naming it); measured differences (-0.14 to +0.12 over 2-4 seeds) are optimisation noise"))
def test_leaking_the_primitive_role_raises_unseen_world_success(study):
    leaked = study["d_env=1 leak"]
    assert np.mean(leaked) > np.mean(study["d_env=1"][:len(leaked)])
