"""tiny backend science as the default study does it (slow): what the study relies on, checked end to end.

One fixture trains every policy once the way the default study's d_env sweep trains its runs: the
study's pool (``config/config.yaml``'s ``synthesize``), its centre ``d_task`` and ``d_traj``, its
width and train settings (``plan.backend_settings``) and its environment and task selection
(``datasets.select_training_data``: the first ``d_env`` signature-distinct environments in generation
order), at d_env = 1, 4 and 32, and d_env = 1 again with the primitive role leaked; 12 seeds each.
Tasks are the raw pool's (no embedding dedup: that needs the embedding model, and a task set the
study did not train on makes this a replication rather than a rerun). Held-out success is on
unseen worlds (T2) with the study's evaluation seed. Run with ``-s`` to see the numbers.

Why 12 seeds: runs are bimodal (a seed's policy takes off or not). Measured 2026-12-01 (Intel Xeon
with AVX-512), T2 success per doubling of d_env: seeds 0-3 0.036 [0.016, 0.055], seeds 4-7 0.028
[-0.002, 0.057], seeds 8-11 0.015 [-0.022, 0.051]; all 12: 0.026 [0.011, 0.041], p = 0.002 (means
0.20, 0.22 and 0.33 at d_env = 1, 4 and 32). So 4 seeds at 3 points cannot tell this effect from 0
reliably. The default study (6 points, 4 seeds, embedding-deduplicated tasks) gives 0.035 [0.012, 0.059].

This file used a 16-world pool (4 variants, 1 content, 100 updates, width 32) until then, where
the trend did not hold (4 seeds). With tasks spread over d_env environments of as many worlds as
possible (not the study's selection): 0.17, 0.40, 0.33, slope 0.026 [-0.010, 0.062]. With the
study's selection (d_env = 4 is one world's 4 variants, 32 is 9 worlds): 0.18, 0.26, 0.20. At the
study's training settings on that pool (the first selection): 0.28 at d_env = 1, 0.17 at 32. So the
d_env effect depends on the pool; the acceptance names the default study's.

The leak (same day, paired by seed): at d_env = 1 seeds 0-5 all gained (+0.054 on average), seeds
6-11 lost 0.064 on average; over 12 seeds -0.005 [-0.054, 0.044]. At d_env = 32 the leak lowered
success by 0.076 on average (12 seeds; 0.25 against 0.33). In toolworld the descriptor's (access, return kind,
semantics) already names the primitive, and with those blanked from every descriptor, d_env = 32
scored 0.35 with and without the leak on the 16-world pool: T2 success here is not limited by
knowing what a tool does.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy import stats

from axisrl.backends import tiny
from axisrl.config import load_config
from axisrl.datasets import select_training_data
from axisrl.dedup import env_signatures
from axisrl.domains import toolworld as tw
from axisrl.laws import success_trends
from axisrl.plan import Design, backend_settings
from axisrl.stages.pools import ENV_COLUMNS
from conftest import DEFAULT_CONFIG, SCHEMA_PATH

pytestmark = pytest.mark.slow

D_ENVS = (1, 4, 32)
SEEDS = tuple(range(12))
RUNS = [*((d_env, False) for d_env in D_ENVS), (1, True)]
"""(d_env, leak_primitive_role) of every trained setting."""


@pytest.fixture(scope="module")
def config() -> dict:
    return load_config(DEFAULT_CONFIG, schema_path=SCHEMA_PATH)


@pytest.fixture(scope="module")
def study(config, one_thread) -> pl.DataFrame:
    """One row per policy on the T2 tier: ``policy`` (plain, leak, random or memoriser), ``d_env`` and
    ``seed`` (null for the baselines), ``successes``, ``trials`` and ``success``."""
    pool = tw.generate_pool(config["synthesize"])
    envs = env_signatures(pl.DataFrame(pool.envs, schema={k: ENV_COLUMNS[k] for k in pool.envs[0]}))
    tasks = pl.DataFrame(pool.tasks, infer_schema_length=None).with_columns(keep=pl.lit(True))
    heldout = [t for t in pool.heldout_tasks if t["tier"] == "T2"]
    centre, eval_seed = config["study"]["centre"], config["evaluate"]["seed"]
    rows = []

    def record(policy: str, d_env: int | None, seed: int | None, episodes: list[dict]) -> None:
        rows.append(
            {
                "policy": policy,
                "d_env": d_env,
                "seed": seed,
                "trials": len(heldout),
                "successes": sum(bool(e["success"]) for e in episodes if e["tier"] == "T2"),
            }
        )

    for d_env, leak in RUNS:
        design = Design(
            d_env=d_env,
            d_task=centre["d_task"],
            d_traj=centre["d_traj"],
            width=config["study"]["width"],
            algo="grpo",
            reward_density="sparse",
        ).as_dict()
        run_envs, run_tasks = (frame.to_dicts() for frame in select_training_data(envs, tasks, design))
        settings = tiny.TrainSettings.from_dict(
            {**backend_settings(config["train"], design), "leak_primitive_role": leak}
        )
        for seed in SEEDS:
            result = tiny.train(run_envs, run_tasks, settings, seed)
            assert result.status == "ok"
            policy = tiny.make_policy(settings)
            policy.load_state_dict(result.state)
            record(
                "leak" if leak else "plain",
                d_env,
                seed,
                tiny.evaluate(policy, pool.heldout_envs, heldout, seed=eval_seed),
            )
    for kind in ("random", "memoriser"):
        record(
            kind, None, None, tiny.baseline_episodes(kind, pool.envs, pool.tasks, pool.heldout_envs, heldout, eval_seed)
        )
    frame = pl.DataFrame(rows).with_columns(success=pl.col("successes") / pl.col("trials"))
    with pl.Config(tbl_rows=-1, fmt_table_cell_list_len=-1, fmt_str_lengths=200):
        print(
            "\nT2 success:",
            frame.group_by("policy", "d_env", maintain_order=True).agg(
                pl.col("success").mean().alias("mean"), pl.col("success").round(3).alias("runs")
            ),
        )
    return frame


def _success(study: pl.DataFrame, policy: str, d_env: int | None = None) -> np.ndarray:
    """Per-seed T2 success of one setting, in seed order."""
    rows = study.filter(pl.col("policy") == policy)
    return (rows if d_env is None else rows.filter(pl.col("d_env") == d_env)).sort("seed")["success"].to_numpy()


def test_a_trained_policy_beats_random_on_unseen_worlds(study):
    assert _success(study, "plain", 32).mean() > _success(study, "random")[0] + 0.1


def test_the_memoriser_is_near_zero_on_unseen_worlds(study):
    assert _success(study, "memoriser")[0] <= 0.05


def test_more_environments_at_fixed_tasks_and_updates_generalise_better(study, config):
    """The fitted trend of T2 success over log2 d_env, runs as replicates, rises: its interval excludes 0."""
    centre = config["study"]["centre"]
    runs = study.filter(pl.col("policy") == "plain").with_columns(d_task=centre["d_task"], d_traj=centre["d_traj"])
    trend = success_trends(runs, ["d_env"]).row(0, named=True)
    print("T2 success per doubling of d_env:", trend)
    assert trend["slope_lo"] > 0


@pytest.mark.xfail(
    strict=False,
    reason=(
        "in toolworld the descriptor's (access, return kind, semantics) already names the primitive (86 "
        "descriptor shapes in the default pool, none shared by two primitives; "
        "test_tiny_render.py::test_a_tools_descriptor_shape_names_its_primitive), so the leak adds no "
        "information; measured over 12 paired seeds at d_env = 1 the gain is -0.005 [-0.054, 0.044] "
        "(+0.054 on seeds 0-5, -0.064 on seeds 6-11)"
    ),
)
def test_leaking_the_primitive_role_raises_unseen_world_success(study):
    """Paired by seed, the leak's gain in T2 success has a 95 % interval above 0."""
    gain = stats.ttest_rel(_success(study, "leak", 1), _success(study, "plain", 1)).confidence_interval(0.95)
    print("T2 success gained by the leak at d_env = 1:", gain)
    assert gain.low > 0
