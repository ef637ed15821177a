"""tiny backend with trajectory-axis synthetic data: reference solutions replayed teacher-forced
(SWiRL-like) and the policy's rollouts in a stand-in experience model (DreamGym-like) join the
GRPO groups. The stand-ins here (references labelled 1.0, simulators wrapping the real
environment) need nothing from the synthetic-data generators themselves."""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
import torch

from axisrl.backends import tiny
from axisrl.backends.tiny import caps
from axisrl.backends.tiny.rollout import Episode, Specs, call_key, rollout
from axisrl.config import load_config
from axisrl.domains import toolworld as tw
from axisrl.domains.canon import canonical_json
from axisrl.domains.toolworld.env import VerifyResult
from axisrl.domains.toolworld.model import FINISH
from conftest import SCHEMA_PATH, SMOKE_CONFIG

QUICK = {"updates": 3, "visits_per_update": 4, "d_traj": 4, "width": 16}
LEARN = {"updates": 20, "visits_per_update": 4, "d_traj": 4, "width": 16, "lr": 0.03}
LEARN_TASKS = 8
SEEDS = (0, 1)
train_module = importlib.import_module("axisrl.backends.tiny.train")  # the package's ``train`` is the function
updates_module = importlib.import_module("axisrl.backends.tiny.updates")


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def pool() -> tw.Pool:
    return tw.generate_pool(load_config(SMOKE_CONFIG, schema_path=SCHEMA_PATH)["synthesize"])


def quick(**overrides) -> tiny.TrainSettings:
    return tiny.TrainSettings.from_dict({**QUICK, **overrides})


def references(tasks) -> dict[str, list[dict[str, Any]]]:
    """Each task's reference solution as its one replay row, labelled a success."""
    return {t["task_id"]: [{"task_id": t["task_id"], "calls": t["reference"], "label": 1.0}] for t in tasks}


def offered(pool: tw.Pool, task: Mapping[str, Any]) -> bool:
    """Whether the compact view offers every call of the task's reference, compared as canonical
    JSON (independently of ``call_key``). It does not when the reference applies an increment
    whose delta it never read, which the view can only offer once the current value was seen."""
    episode = Episode.start(Specs(pool.envs), task, 11, None)
    for call in json.loads(task["reference"]):
        calls = [canonical_json(episode.compact.call(k)) for k in range(len(episode.compact.candidates()))]
        if canonical_json(call) not in calls:
            return False
        episode.act(calls.index(canonical_json(call)))
    return True


@pytest.fixture(scope="module")
def playable(pool) -> list[dict[str, Any]]:
    return [t for t in pool.tasks if offered(pool, t)]


def honest(spec: dict, task: Mapping[str, Any], seed: int) -> tw.ToolworldEnv:
    """A perfect experience model: the real environment."""
    return tw.ToolworldEnv(spec, task)


class LyingEnv(tw.ToolworldEnv):
    def verify(self) -> VerifyResult:
        return VerifyResult(True, 1.0, 1, 1)


def lying(spec: dict, task: Mapping[str, Any], seed: int) -> LyingEnv:
    """An experience model that steps like the real one but calls every episode a success."""
    return LyingEnv(spec, task)


def test_call_key_matches_a_call_however_it_is_spelled():
    call = {"name": "get_run", "arguments": {"id": "RUN-7", "n": 3}}
    assert call_key(call) == call_key({"arguments": '{"n": 3, "id": "RUN-7"}', "name": "get_run"})
    assert call_key(call) != call_key({"name": "get_run", "arguments": {"id": "RUN-7", "n": 4}})
    assert call_key({"name": FINISH, "arguments": {"answer": 17}}) == call_key(
        {"name": FINISH, "arguments": {"answer": " 17"}}
    )
    assert call_key({"name": FINISH, "arguments": {}}) == call_key({"name": FINISH})
    assert call_key("get_run") is None and call_key({"name": "get_run", "arguments": "{oops"}) is None


def test_reference_solutions_replay_through_the_compact_view(pool, playable):
    """Teacher-forced through the real environment, every reference the view can express is
    replayed call for call and succeeds; the few it cannot stop, truncated, at that call."""
    assert len(playable) >= 0.9 * len(pool.tasks)
    torch.manual_seed(0)
    policy = tiny.make_policy(quick())
    specs = Specs(pool.envs)
    episodes = [Episode.start(specs, t, 11, False) for t in pool.tasks]
    scripts = [json.loads(t["reference"]) for t in pool.tasks]
    stats = rollout(policy, episodes, None, scripts=scripts)
    ids = {t["task_id"] for t in playable}
    for task, episode, script in zip(pool.tasks, episodes, scripts):
        if task["task_id"] in ids:
            assert episode.success and not episode.truncated and len(episode.actions) == len(script)
        else:
            assert episode.truncated and len(episode.actions) < len(script)
    assert stats.unmatched_steps == len(pool.tasks) - len(playable)
    assert stats.env_steps == sum(len(e.actions) for e in episodes) and stats.flops > 0
    assert all(p <= 0 for e in episodes for p in e.log_probs)


def test_synthetic_trajectories_join_the_groups(pool, playable, monkeypatch):
    """An update visits visits_per_update tasks; each group holds its real rollouts and its
    synthetic trajectories (scored by their labels) under one group id."""
    seen: list[tuple[torch.Tensor, torch.Tensor]] = []
    advantage = updates_module.compute_grpo_outcome_advantage

    def recording(scores, index, *args):
        seen.append((scores, index))
        return advantage(scores, index, *args)

    monkeypatch.setattr(updates_module, "compute_grpo_outcome_advantage", recording)  # where grpo_update looks it up
    settings = quick(visits_per_update=4, d_traj=4)
    result = tiny.train(
        pool.envs, playable, settings, seed=0, synthetic=tiny.SyntheticTrajectories(2, references(playable))
    )
    groups = 4
    compute = result.compute
    assert compute["episodes"] == QUICK["updates"] * groups * 4
    assert compute["synthetic_episodes"] == QUICK["updates"] * groups * 2
    assert compute["synthetic_unmatched_steps"] == 0 and compute["synthetic_missing_tasks"] == 0
    assert compute["synthetic_env_steps"] > 0 and compute["env_steps"] == sum(r["env_steps"] for r in result.metrics)
    for key in caps.SYNTHETIC_COUNTS:
        assert compute[key] == sum(row[key] for row in result.metrics)
    assert all(row["synthetic_reward_mean"] == 1.0 and row["groups"] == groups for row in result.metrics)
    expected = torch.tensor([g for g in range(groups) for _ in range(4)] + [g for g in range(groups) for _ in range(2)])
    assert len(seen) == QUICK["updates"]
    for scores, index in seen:
        assert torch.equal(index, expected) and torch.all(scores[groups * 4 :] == 1.0)

    missing = tiny.train(
        pool.envs, playable, settings, seed=0, synthetic=tiny.SyntheticTrajectories(2, references(playable[::2]))
    )
    drawn = missing.compute["synthetic_episodes"] // 2 + missing.compute["synthetic_missing_tasks"]
    assert drawn == QUICK["updates"] * groups and missing.compute["synthetic_missing_tasks"] > 0


def test_unexpressible_replays_are_counted_as_unmatched(pool, playable):
    """Each of a group's replays that reaches a call the view cannot offer counts once."""
    ids = {t["task_id"] for t in playable}
    others = [t for t in pool.tasks if t["task_id"] not in ids]
    result = tiny.train(
        pool.envs,
        others,
        quick(updates=1, visits_per_update=len(others)),
        seed=0,
        synthetic=tiny.SyntheticTrajectories(4, references(others)),
    )
    assert result.compute["synthetic_unmatched_steps"] == 4 * len(others)


def test_no_synthetic_trajectories_is_the_plain_run(pool):
    plain = tiny.train(pool.envs, pool.tasks, quick(), seed=3)
    for synthetic in (
        tiny.SyntheticTrajectories(0, references(pool.tasks)),
        tiny.SyntheticTrajectories(0, simulator=honest),
    ):
        again = tiny.train(pool.envs, pool.tasks, quick(), seed=3, synthetic=synthetic)
        assert again.param_hash == plain.param_hash and again.metrics == plain.metrics
    assert plain.compute["synthetic_episodes"] == 0 and plain.metrics[0]["synthetic_reward_mean"] is None


@pytest.mark.parametrize("kind", ["replay", "simulate"])
def test_the_same_seed_gives_the_same_synthetic_run(pool, playable, kind):
    calls: list[int] = []

    def counting(spec, task, seed):
        calls.append(seed)
        return honest(spec, task, seed)

    synthetic = (
        tiny.SyntheticTrajectories(4, references(playable))
        if kind == "replay"
        else tiny.SyntheticTrajectories(4, simulator=counting)
    )
    first = tiny.train(pool.envs, playable, quick(), seed=3, synthetic=synthetic)
    again = tiny.train(pool.envs, playable, quick(), seed=3, synthetic=synthetic)
    plain = tiny.train(pool.envs, playable, quick(), seed=3)
    assert first.param_hash == again.param_hash and first.metrics == again.metrics
    assert first.param_hash != plain.param_hash
    assert first.compute["synthetic_episodes"] == QUICK["updates"] * QUICK["visits_per_update"] * 4
    if kind == "simulate":  # one experience model per group, its rollouts sharing it
        assert (
            len(calls) == 2 * QUICK["updates"] * QUICK["visits_per_update"]
            and calls[: len(calls) // 2] == calls[len(calls) // 2 :]
        )
        assert first.compute["synthetic_unmatched_steps"] == 0 and first.compute["synthetic_env_steps"] > 0


def test_synthetic_trajectories_are_grpo_only_and_one_source():
    with pytest.raises(ValueError, match="GRPO"):
        tiny.train([], [{"task_id": "t"}], quick(algo="ppo"), seed=0, synthetic=tiny.SyntheticTrajectories(1, {}))
    with pytest.raises(ValueError, match="exactly one"):
        tiny.SyntheticTrajectories(1)
    with pytest.raises(ValueError, match="exactly one"):
        tiny.SyntheticTrajectories(1, {}, honest)
    with pytest.raises(ValueError, match="per_group"):
        tiny.SyntheticTrajectories(-1, {})


@pytest.fixture(scope="module")
def learned(pool, playable) -> dict[str, list[tuple[tiny.TrainResult, float, float]]]:
    """Per source and seed: the run, greedy success on its training tasks and the mean per-step
    log-probability of their reference solutions under the trained policy."""
    tasks = playable[:LEARN_TASKS]
    settings = tiny.TrainSettings(**LEARN)
    specs = Specs(pool.envs)
    sources = {
        "none": None,
        "replay": tiny.SyntheticTrajectories(4, references(tasks)),
        "honest": tiny.SyntheticTrajectories(4, simulator=honest),
        "lying": tiny.SyntheticTrajectories(4, simulator=lying),
    }
    out: dict[str, list[tuple[tiny.TrainResult, float, float]]] = {}
    for name, synthetic in sources.items():
        for seed in SEEDS:
            result = tiny.train(pool.envs, tasks, settings, seed=seed, synthetic=synthetic)
            policy = tiny.make_policy(settings)
            policy.load_state_dict(result.state)
            success = np.mean([r["success"] for r in tiny.evaluate(policy, pool.envs, tasks, seed=0)])
            episodes = [Episode.start(specs, t, 5, False) for t in tasks]
            rollout(policy, episodes, None, scripts=[json.loads(t["reference"]) for t in tasks])
            log_prob = np.mean([p for e in episodes for p in e.log_probs])
            out.setdefault(name, []).append((result, float(success), float(log_prob)))
    return out


def test_replayed_references_speed_learning(learned):
    """References labelled a success raise their likelihood under the policy far above what
    real rollouts alone reach in as many updates, and the greedy policy solves more tasks."""
    for (_, _, plain), (_, _, replayed) in zip(learned["none"], learned["replay"]):
        assert replayed > plain + 0.5
    assert sum(s for _, s, _ in learned["replay"]) > sum(s for _, s, _ in learned["none"])


def test_a_lying_simulator_rewards_what_the_real_environment_does_not(learned):
    """Every simulated episode claims success, so the synthetic reward is 1 while the agent's real
    success stays low and does not beat what an honest simulator's runs reach."""
    for result, _, _ in learned["lying"]:
        assert all(row["synthetic_reward_mean"] == 1.0 for row in result.metrics)
        assert np.mean([row["success_mean"] for row in result.metrics]) < 0.25
    assert sum(s for _, s, _ in learned["lying"]) <= sum(s for _, s, _ in learned["honest"])
    assert sum(s for _, s, _ in learned["lying"]) < sum(s for _, s, _ in learned["replay"])
