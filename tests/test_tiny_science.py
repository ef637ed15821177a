"""tiny backend science as the default study does it: what the study relies on, checked end to end. The five
claims over many seeds are science checks (``pytest -m science``, marked ``science``); after them, the default
suite tests the mechanism each relies on, on two runs or none.

One fixture trains every policy once the way the default study's d_env sweep trains its runs: the
study's pool (``config/config.yaml``'s ``synthesize``), its centre ``d_task`` and ``d_traj``, its
width and train settings (``plan.backend_settings``) and its environment and task selection
(``datasets.select_training_data``: the first ``d_env`` signature-distinct environments in generation
order), at d_env = 1, 4 and 32 (12 seeds each), and d_env = 1 with and without the primitive role
leaked at 48 seeds (the leak check's; its first 12 are the sweep's d_env = 1 runs).
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

The leak (``train.leak_primitive_role``) adds each tool's true primitive to its descriptor. In
toolworld the descriptor's (access, return kind, semantics) already names the primitive
(``test_tiny_render.py::test_a_tools_descriptor_shape_names_its_primitive``), and the leak adds the
role code and nothing else (``test_a_descriptor_carries_the_primitive_role_only_when_it_is_leaked``
there), so the check is that it does not change how often the first call's primitive is right: the
share of T2 episodes whose first call's primitive is the first of the task's skeleton, per run,
paired by seed at d_env = 1, is the same with the leak and without within +-0.1 (TOST at 5 %: the
90 % interval of the difference lies inside). Measured 2026-12-02 (Intel Xeon with AVX-512), 48
seeds: 0.685 with the leak, 0.682 without, difference 0.002 [-0.066, 0.071]. The untrained policies
the runs start from are right 0.237 of the time (trained minus untrained 0.445 [0.370, 0.520], which
the same check fails), so the first call is learnt, just not from the leak; more environments do
help it (0.658 at d_env = 4, 0.798 at 32, 12 seeds). T2 success moves no more with the leak:
-0.001 [-0.030, 0.027] (90 %). The whole file took 12 minutes on one core there.

Why 0.1 and 48 seeds: a run's first-call accuracy spreads by 0.20 (standard deviation over seeds,
0.19 with the leak) and the two are uncorrelated by seed (the leak's extra embedding changes every
initial weight drawn after it), so the paired difference spreads by 0.28 per seed. 0.1 is half a
seed's spread, and under a third of the 0.32 between the runs' 0.68 and a first call always right.
At 12 seeds the 90 % half-width is 0.15, more than the margin: the four 12-seed blocks gave +0.088
[-0.050, 0.226], +0.156 [0.052, 0.260], -0.059 [-0.177, 0.058] and -0.175 [-0.348, -0.002]. +-0.05
would need about 90 seeds. The xfail this replaces (the leak raises T2 success) measured -0.005
[-0.054, 0.044] (95 %) on seeds 0-11, +0.054 on seeds 0-5 and -0.064 on 6-11; at d_env = 32 the leak
lowered success by 0.076 (12 seeds; 0.25 against 0.33), and with (access, return kind, semantics)
blanked from every descriptor d_env = 32 scored 0.35 with and without the leak on the 16-world pool:
T2 success here is not limited by knowing what a tool does.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import polars as pl
import pytest
import torch
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

SCIENCE_LR = 0.003
"""The learning rate these claims were measured at (the default before issue 27 lowered it to 0.001
for take-off on the validation tier); at 0.001 the d_env comparison here was not confirmed."""

D_ENVS = (1, 4, 32)
SEEDS = tuple(range(12))
"""Seeds of the d_env sweep."""
LEAK_SEEDS = tuple(range(48))
"""Seeds of the leak check, with and without the leak at d_env = 1 (the sweep's 12 first)."""
RUNS = [(1, False, LEAK_SEEDS), (4, False, SEEDS), (32, False, SEEDS), (1, True, LEAK_SEEDS)]
"""(d_env, leak_primitive_role, seeds) of every trained setting."""
LOCKSTEP_SEEDS = 12
"""Seeds trained and evaluated one after another (``train_seeds``, ``evaluate``), as a train job does."""
FIRST_CALL_MARGIN = 0.1
"""How far apart two settings' mean first-call accuracies may be and still count as the same (the
module docstring says why)."""


@pytest.fixture(scope="module")
def config() -> dict:
    return load_config(DEFAULT_CONFIG, schema_path=SCHEMA_PATH)


class SweepPool(NamedTuple):
    """The default study's pool as the d_env sweep reads it: its environments signed, its tasks (every one
    kept), the T2 tasks and, per T2 task, the primitive its skeleton calls first."""

    pool: tw.Pool
    envs: pl.DataFrame
    tasks: pl.DataFrame
    heldout: list[dict]
    intended: dict[str, str]


@pytest.fixture(scope="module")
def pool(config) -> SweepPool:
    pool = tw.generate_pool(config["synthesize"])
    envs = env_signatures(pl.DataFrame(pool.envs, schema={k: ENV_COLUMNS[k] for k in pool.envs[0]}))
    tasks = pl.DataFrame(pool.tasks, infer_schema_length=None).with_columns(keep=pl.lit(True))
    heldout = [t for t in pool.heldout_tasks if t["tier"] == "T2"]
    intended = {task["task_id"]: task["skeleton"].split(">")[0] for task in heldout}
    return SweepPool(pool, envs, tasks, heldout, intended)


def sweep_design(config: dict, d_env: int) -> dict:
    """The d_env sweep's design at ``d_env``: the study's centre d_task and d_traj, its width, GRPO."""
    centre = config["study"]["centre"]
    return Design(
        d_env=d_env,
        d_task=centre["d_task"],
        d_traj=centre["d_traj"],
        width=config["study"]["width"],
        algo="grpo",
        reward_density="sparse",
    ).as_dict()


def sweep_settings(config: dict, d_env: int, leak: bool = False) -> tiny.TrainSettings:
    """The settings a sweep run at ``d_env`` trains with, at ``SCIENCE_LR``, from random weights."""
    settings = {**backend_settings(config["train"], sweep_design(config, d_env)), "lr": SCIENCE_LR}
    return tiny.TrainSettings.from_dict({**settings, "leak_primitive_role": leak})


def evaluate(pool: SweepPool, config: dict, policies: list[tiny.ToolPointer]) -> list[list[dict]]:
    """Each policy's T2 episodes, with the study's evaluation seed and each first call's primitive named."""
    seed = config["evaluate"]["seed"]
    starts = tiny.HeldoutStarts(pool.pool.heldout_envs, pool.heldout, seed, policies[0].leak_primitive_role)
    return [
        tiny.evaluate(policy, pool.pool.heldout_envs, pool.heldout, seed=seed, starts=starts, first_primitive=True)
        for policy in policies
    ]


def t2_row(pool: SweepPool, policy: str, d_env: int | None, seed: int | None, episodes: list[dict]) -> dict:
    """One policy's row of the ``study`` frame (``success`` is added over the frame)."""
    named = "first_primitive" in episodes[0]  # the baselines' records do not name it
    t2 = [e for e in episodes if e["tier"] == "T2"]
    firsts = [named and e["first_primitive"] == pool.intended[e["task_id"]] for e in t2]
    return {
        "policy": policy,
        "d_env": d_env,
        "seed": seed,
        "trials": len(pool.heldout),
        "successes": sum(bool(e["success"]) for e in t2),
        "first_call": float(np.mean(firsts)) if named else None,
    }


def baseline(pool: SweepPool, config: dict, kind: str) -> dict:
    """The ``random`` or ``memoriser`` baseline's T2 row."""
    p = pool.pool
    episodes = tiny.baseline_episodes(kind, p.envs, p.tasks, p.heldout_envs, pool.heldout, config["evaluate"]["seed"])
    return t2_row(pool, kind, None, None, episodes)


def trained_rows(pool: SweepPool, config: dict, d_env: int, leak: bool, seeds: list[int]) -> list[dict]:
    """The T2 rows of the sweep's runs at ``d_env`` on ``seeds``, trained together (``train_seeds``)."""
    envs, tasks = (f.to_dicts() for f in select_training_data(pool.envs, pool.tasks, sweep_design(config, d_env)))
    results = tiny.train_seeds(envs, tasks, sweep_settings(config, d_env, leak), seeds)
    assert [result.status for result in results] == ["ok"] * len(seeds)
    policies = [tiny.policy_of(tiny.checkpoint(result)) for result in results]
    policy = "leak" if leak else "plain"
    return [
        t2_row(pool, policy, d_env, seed, episodes) for seed, episodes in zip(seeds, evaluate(pool, config, policies))
    ]


@pytest.fixture(scope="module")
def study(config, pool, one_thread) -> pl.DataFrame:
    """One row per policy on the T2 tier: ``policy`` (plain, leak, untrained, random or memoriser),
    ``d_env`` and ``seed`` (null for the baselines), ``successes``, ``trials``, ``success`` and
    ``first_call``: the share of episodes whose first call's primitive is the first of the task's
    skeleton (null for the baselines). ``untrained`` is the d_env = 1 plain run's policy before its
    first update (``train`` draws it the same way)."""
    rows = []
    for d_env, leak, seeds in RUNS:
        for wave in range(0, len(seeds), LOCKSTEP_SEEDS):  # each seed's run and records are those it has alone
            wave_seeds = list(seeds[wave : wave + LOCKSTEP_SEEDS])
            if (d_env, leak) == (1, False):
                untrained = []
                for seed in wave_seeds:
                    torch.manual_seed(seed)
                    untrained.append(tiny.make_policy(sweep_settings(config, d_env)))
                for seed, episodes in zip(wave_seeds, evaluate(pool, config, untrained)):
                    rows.append(t2_row(pool, "untrained", d_env, seed, episodes))
            rows.extend(trained_rows(pool, config, d_env, leak, wave_seeds))
    rows.extend(baseline(pool, config, kind) for kind in ("random", "memoriser"))
    frame = pl.DataFrame(rows, infer_schema_length=None).with_columns(success=pl.col("successes") / pl.col("trials"))
    with pl.Config(tbl_rows=-1, fmt_table_cell_list_len=-1, fmt_str_lengths=400):
        for column in ("success", "first_call"):
            print(
                f"\nT2 {column}:",
                frame.group_by("policy", "d_env", maintain_order=True).agg(
                    pl.col(column).mean().alias("mean"), pl.col(column).round(3).alias("runs")
                ),
            )
    return frame


def _success(study: pl.DataFrame, policy: str, d_env: int | None = None, column: str = "success") -> np.ndarray:
    """Per-seed T2 success (or another ``column``) of one setting, in seed order."""
    rows = study.filter(pl.col("policy") == policy)
    return (rows if d_env is None else rows.filter(pl.col("d_env") == d_env)).sort("seed")[column].to_numpy()


def paired_interval(a: np.ndarray, b: np.ndarray, level: float = 0.90) -> tuple[float, float]:
    """The ``level`` interval (Student t) of the mean of ``a - b``, paired by position."""
    difference = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    half = stats.t.ppf(0.5 + level / 2, len(difference) - 1) * difference.std(ddof=1) / np.sqrt(len(difference))
    return float(difference.mean() - half), float(difference.mean() + half)


def equivalent(a: np.ndarray, b: np.ndarray, margin: float) -> bool:
    """TOST at 5 %: ``a`` and ``b`` (paired) differ by less than ``margin`` on average, both
    one-sided tests rejecting, i.e. the 90 % interval of the difference lies inside +-``margin``."""
    low, high = paired_interval(a, b)
    return -margin < low and high < margin


@pytest.mark.science
def test_a_trained_policy_beats_random_on_unseen_worlds(study):
    assert _success(study, "plain", 32).mean() > _success(study, "random")[0] + 0.1


@pytest.mark.science
def test_the_memoriser_is_near_zero_on_unseen_worlds(study):
    assert _success(study, "memoriser")[0] <= 0.05


@pytest.mark.science
def test_more_environments_at_fixed_tasks_and_updates_generalise_better(study, config):
    """The fitted trend of T2 success over log2 d_env, runs as replicates, rises: its interval excludes 0."""
    centre = config["study"]["centre"]
    runs = study.filter((pl.col("policy") == "plain") & pl.col("seed").is_in(SEEDS)).with_columns(
        d_task=centre["d_task"], d_traj=centre["d_traj"]
    )
    trend = success_trends(runs, ["d_env"]).row(0, named=True)
    print("T2 success per doubling of d_env:", trend)
    assert trend["slope_lo"] > 0


@pytest.mark.science
def test_leaking_the_primitive_role_leaves_the_first_call_as_often_right(study):
    """Paired by seed at d_env = 1 (48 seeds), the share of T2 episodes whose first call's primitive
    is right is the same with the leak as without, within ``FIRST_CALL_MARGIN`` (TOST at 5 %)."""
    leak, plain = _success(study, "leak", 1, "first_call"), _success(study, "plain", 1, "first_call")
    success = paired_interval(_success(study, "leak", 1), _success(study, "plain", 1))
    print(
        f"first call right: {leak.mean():.3f} with the leak, {plain.mean():.3f} without; difference "
        f"{leak.mean() - plain.mean():.3f} {np.round(paired_interval(leak, plain), 3).tolist()} (90 %); "
        f"T2 success difference {np.round(success, 3).tolist()}"
    )
    assert equivalent(leak, plain, FIRST_CALL_MARGIN)


@pytest.mark.science
def test_the_first_call_check_fails_a_policy_whose_first_call_differs(study):
    """The same check on the trained runs against the untrained policies they started from (same
    seeds): their first call is right less often, the check must say so, and not say they are the same."""
    trained, untrained = _success(study, "plain", 1, "first_call"), _success(study, "untrained", 1, "first_call")
    low, high = paired_interval(trained, untrained)
    print(f"first call right: {trained.mean():.3f} trained, {untrained.mean():.3f} untrained; [{low:.3f}, {high:.3f}]")
    assert not equivalent(trained, untrained, FIRST_CALL_MARGIN)
    assert low > FIRST_CALL_MARGIN


# The mechanism each science check above relies on, in the default suite: a few runs or none, no claim over seeds.

MECHANISM_SEEDS = [0, 1]


def test_two_runs_of_the_sweep_at_d_env_32_beat_random_on_unseen_worlds(config, pool, one_thread):
    """What ``test_a_trained_policy_beats_random_on_unseen_worlds`` measures over 12 seeds, on 2: their mean T2
    success clears the random baseline's by 0.1 (measured: 0.33 and 0.25 against 0.01 on an AMD EPYC). Catches a
    trainer that learns nothing that transfers (an update that does not climb, an evaluation of the wrong pool);
    one seed that does not take off still passes, as the science check's bimodal seeds allow."""
    success = [row["successes"] / row["trials"] for row in trained_rows(pool, config, 32, False, MECHANISM_SEEDS)]
    random = baseline(pool, config, "random")
    assert np.mean(success) > random["successes"] / random["trials"] + 0.1, success


def test_the_memoriser_replays_training_solutions_that_unseen_worlds_do_not_take(config, pool):
    """``test_the_memoriser_is_near_zero_on_unseen_worlds`` needs no training: the baseline alone, on the default
    pool's T2 tier, is at most 0.05. Catches held-out worlds that share a training world's solutions."""
    memoriser = baseline(pool, config, "memoriser")
    assert memoriser["successes"] / memoriser["trials"] <= 0.05


@pytest.mark.parametrize("d_env", D_ENVS)
def test_each_sweep_run_trains_on_its_d_env_environments_and_the_centres_tasks(config, pool, d_env):
    """What the d_env trend compares: a run at d_env trains on d_env signature-distinct environments, with tasks of
    each, and on the centre's d_task tasks whatever d_env. Catches a selection that ignores d_env (a flat trend by
    construction) or lets d_task move with it (a trend of tasks, not environments)."""
    design = sweep_design(config, d_env)
    envs, tasks = select_training_data(pool.envs, pool.tasks, design)
    identity = f"env_{design['env_level']}"  # environments told apart by signature, as the study counts them
    assert envs[identity].n_unique() == d_env
    assert tasks.join(envs.select("env_id", identity), on="env_id")[identity].n_unique() == d_env
    assert tasks.height == config["study"]["centre"]["d_task"]


def test_the_equivalence_check_tells_equal_settings_from_ones_half_a_spread_apart():
    """The leak checks' TOST, on draws with the paired spread the module docstring measured (0.28 per seed, 48
    seeds): the same mean passes, a difference of 0.3 (the untrained policy's case) fails and its interval lies
    above the margin, and 6 seeds are too few to call the same means the same. Catches a test at the wrong level, on
    one side only, or blind to how many seeds it has."""
    rng = np.random.default_rng(0)
    a, spread = rng.normal(0.68, 0.2, 48), rng.normal(0, 0.28, 48)
    same = a + spread - spread.mean()  # the same mean, the differences spread as measured
    shifted = same - 0.3
    assert equivalent(a, same, FIRST_CALL_MARGIN)
    assert not equivalent(a, shifted, FIRST_CALL_MARGIN) and paired_interval(a, shifted)[0] > FIRST_CALL_MARGIN
    assert not equivalent(a[:6], same[:6], FIRST_CALL_MARGIN)  # 6 seeds cannot show the same means the same
