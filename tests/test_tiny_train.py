"""tiny backend: settings, determinism, divergence, budgets, checkpoints, evaluation, baselines,
and the policy's indifference to tool order, slot numbering and incremental rendering."""

from __future__ import annotations

import importlib
import json
from typing import NamedTuple

import numpy as np
import pytest
import torch

from axisrl.backends import tiny
from axisrl.backends.tiny import algos, caps
from axisrl.backends.tiny.encoding import EpisodeFeatures
from axisrl.backends.tiny.fast_torch import Adam
from axisrl.backends.tiny.features import collate, collate_episodes
from axisrl.backends.tiny.policy import ToolPointer
from axisrl.backends.tiny.rollout import Diverged, Episode, Node, Specs, call_key, rollout
from axisrl.backends.tiny.synthetic import TaskSampler
from axisrl.backends.tiny.vocab import PRIMITIVES
from axisrl.config import validate_config
from axisrl.diagnostics import STEP_COLUMNS, EpisodeCounts, run_diagnostics, step_diagnostics
from axisrl.domains import toolworld as tw
from axisrl.domains.toolworld.compact import CompactEpisode

POOL = {
    "n_worlds": 4,
    "variants_per_world": 2,
    "contents_per_variant": 1,
    "reskins_per_world": 0,
    "tasks_per_env": 6,
    "heldout": {
        "tasks_per_env": 3,
        "t0_envs": 2,
        "t1_envs": 2,
        "t2_worlds": 2,
        "t2_variants_per_world": 1,
        "validation_worlds": 0,
    },
}
QUICK = {"updates": 3, "visits_per_update": 4, "d_traj": 4, "width": 16}
RECORD_KEYS = {"task_id", "env_id", "tier", "success", "reward", "partial", "steps", "tool_calls", "errors"}
train_module = importlib.import_module("axisrl.backends.tiny.train")  # the package's ``train`` is the function
updates_module = importlib.import_module("axisrl.backends.tiny.updates")
visits_module = importlib.import_module("axisrl.backends.tiny.visits")


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def pool(schema) -> tw.Pool:
    return tw.generate_pool(validate_config({"synthesize": POOL}, schema)["synthesize"])


def quick(**overrides) -> tiny.TrainSettings:
    return tiny.TrainSettings.from_dict({**QUICK, **overrides})


def test_a_checkpoint_from_before_the_renames_names_its_settings_as_today():
    """Checkpoints of a finished study hold ``group_size``, ``max_rollout_steps`` and ``max_flops``."""
    old = tiny.TrainSettings.from_dict({"group_size": 4, "max_rollout_steps": 150, "max_flops": 2.5e7})
    assert (old.d_traj, old.token_cap, old.flop_cap) == (4, 150, 2.5e7)


def test_settings_reject_unknown_keys_and_bad_values():
    with pytest.raises(ValueError, match="unknown"):
        tiny.TrainSettings.from_dict({"learning_rate": 0.1})
    with pytest.raises(ValueError, match="loss_agg_mode"):
        tiny.TrainSettings(loss_agg_mode="mean")
    with pytest.raises(ValueError, match="visits_per_update"):
        tiny.TrainSettings(visits_per_update=0)
    with pytest.raises(ValueError, match=r"algo must be one of \['bc', 'grpo', 'ppo'\]"):
        tiny.TrainSettings(algo="dpo")
    assert set(updates_module.UPDATES) == {"bc", "grpo", "ppo"}
    assert tiny.TrainSettings().clip_high == 0.28 and tiny.TrainSettings(algo="ppo").clip_high == 0.2


@pytest.mark.parametrize("algo", ["grpo", "ppo"])
def test_the_same_seed_gives_the_same_parameters_and_metrics(pool, algo):
    first = tiny.train(pool.envs, pool.tasks, quick(algo=algo), seed=3)
    again = tiny.train(pool.envs, pool.tasks, quick(algo=algo), seed=3)
    other = tiny.train(pool.envs, pool.tasks, quick(algo=algo), seed=4)
    assert first.status == "ok" and len(first.metrics) == QUICK["updates"]
    assert first.param_hash == again.param_hash and first.metrics == again.metrics
    assert first.param_hash != other.param_hash


def test_metrics_and_compute_totals_agree(pool):
    result = tiny.train(pool.envs, pool.tasks, quick(kl_coef=0.05, loss_agg_mode="seq-mean-token-mean"), seed=0)
    keys = {
        "update",
        "reward_mean",
        "success_mean",
        "entropy",
        "kl",
        "loss",
        "grad_norm",
        "env_steps",
        "episodes",
        "rollout_flops",
        "train_flops",
        "zero_variance_groups",
        "groups",
        "drawn_groups",
        "rollout_kl",
        "probe_flops",
        "lr",
    }
    assert all(keys <= set(row) for row in result.metrics)
    assert list(result.compute) == [
        "rollout_flops",
        "train_flops",
        "env_steps",
        "scored_decisions",
        "gradient_steps",
        "episodes",
        "visits",
        "updates",
        "zero_variance_groups",
        "failed_episodes",
        "truncated_episodes",
        *caps.SYNTHETIC_COUNTS,
        "probe_flops",
        "distinct_tasks_seen",
        "distinct_envs_seen",
    ]
    for key in ("env_steps", "episodes", "rollout_flops", "train_flops", "zero_variance_groups", "probe_flops"):
        assert result.compute[key] == sum(row[key] for row in result.metrics)
    assert result.compute["visits"] == QUICK["updates"] * QUICK["visits_per_update"]
    assert result.compute["episodes"] == result.compute["visits"] * QUICK["d_traj"]
    assert result.compute["distinct_tasks_seen"] == QUICK["updates"] * QUICK["visits_per_update"]
    assert all(row["rollout_flops"] > 0 and row["train_flops"] > 0 for row in result.metrics)
    assert all(row["kl"] >= 0 for row in result.metrics)


def test_metrics_rows_carry_the_collapse_diagnostics_of_their_rollouts(pool, monkeypatch):
    """Every decision is a turn and an env step, and an episode calls ``finish`` at most once and
    only if it was not truncated, so turns - tool calls = the share that finished; the columns are
    read off the rollouts and change nothing else (the same parameters and other metrics)."""
    result = tiny.train(pool.envs, pool.tasks, quick(updates=4), seed=0)
    for row in result.metrics:
        assert set(STEP_COLUMNS) <= set(row) and row["parse_failures"] == 0
        assert row["turns_mean"] * row["episodes"] == pytest.approx(row["env_steps"])
        assert row["turns_mean"] - row["tool_calls_mean"] == pytest.approx(1 - row["truncated_share"])
        assert 0 <= row["no_tool_call_share"] <= 1 and row["tool_calls_mean"] > 0
    truncated = sum(row["truncated_share"] * row["episodes"] for row in result.metrics)
    assert truncated == pytest.approx(result.compute["truncated_episodes"])
    monkeypatch.setattr(train_module, "step_diagnostics", lambda episodes: {})
    plain = tiny.train(pool.envs, pool.tasks, quick(updates=4), seed=0)
    assert plain.param_hash == result.param_hash
    assert plain.metrics == [{k: v for k, v in row.items() if k not in STEP_COLUMNS} for row in result.metrics]


def test_a_rollout_is_counted_as_the_diagnostics_define(pool):
    """Finishing at once: one turn, no tool call; calling tools until ``max_steps``: every turn a
    call, truncated."""
    task = pool.tasks[0]
    specs = Specs(pool.envs)
    spec = specs[task["env_id"]]
    finisher, caller = (Episode.start(specs, task, 0, False) for _ in range(2))
    names = [finisher.compact.call(k)["name"] for k in range(len(finisher.compact.candidates()))]
    finisher.act(names.index("finish"))
    while not caller.done:
        caller.act(
            next(k for k in range(len(caller.compact.candidates())) if caller.compact.call(k)["name"] != "finish")
        )
    counts = [train_module._episode_counts(e) for e in (finisher, caller)]
    assert counts == [EpisodeCounts(0, 1, 0, False), EpisodeCounts(spec["max_steps"], spec["max_steps"], 0, True)]
    assert step_diagnostics(counts) == {
        "tool_calls_mean": spec["max_steps"] / 2,
        "no_tool_call_share": 0.5,
        "turns_mean": (1 + spec["max_steps"]) / 2,
        "parse_failures": 0,
        "truncated_share": 0.5,
    }


def test_tasks_are_visited_evenly(pool):
    sampler = TaskSampler(5, np.random.default_rng(0))
    drawn = sampler.take(12)
    assert sorted(drawn[:5]) == list(range(5)) and sorted(drawn[5:10]) == list(range(5))


def test_the_env_step_cap_is_exact_and_the_flop_cap_stops_the_run(pool):
    capped = tiny.train(pool.envs, pool.tasks, quick(updates=50, token_cap=70), seed=0)
    assert capped.status == "ok" and capped.compute["env_steps"] == 70
    full = tiny.train(pool.envs, pool.tasks, quick(updates=1), seed=0)
    budget = full.compute["rollout_flops"] + full.compute["train_flops"]
    flop_capped = tiny.train(pool.envs, pool.tasks, quick(updates=50, flop_cap=2.5 * budget), seed=0)
    assert 2 <= flop_capped.compute["updates"] < 50
    spent = flop_capped.compute["rollout_flops"] + flop_capped.compute["train_flops"]
    dearest = max(row["rollout_flops"] + row["train_flops"] for row in flop_capped.metrics)
    # updates close in on the cap in whole visits, so the run ends less than an update from it
    assert abs(spent - 2.5 * budget) < dearest
    assert any(row["groups"] < QUICK["visits_per_update"] for row in flop_capped.metrics)


def test_divergence_ends_the_run_with_status_failed(pool, monkeypatch):
    exploded = tiny.train(pool.envs, pool.tasks, quick(updates=30, lr=1e9), seed=0)
    assert exploded.status == "failed" and len(exploded.metrics) < 30

    def nan_loss(*args, **kwargs):
        loss, clip_fraction = algos.compute_policy_loss(*args, **kwargs)
        return loss * torch.nan, clip_fraction

    monkeypatch.setattr(updates_module, "compute_policy_loss", nan_loss)
    injected = tiny.train(pool.envs, pool.tasks, quick(updates=8), seed=0)
    assert injected.status == "failed" and len(injected.metrics) < 8  # the first update that trains fails


def test_checkpoint_round_trip_and_evaluation_records(pool, tmp_path):
    result = tiny.train(pool.envs, pool.tasks, quick(updates=1), seed=0)
    other = tiny.train(pool.envs, pool.tasks, quick(updates=1), seed=1)
    tiny.save_checkpoints({0: tiny.checkpoint(result), 1: tiny.checkpoint(other)}, tmp_path / "policies.pt")
    policy = tiny.load_policy(tmp_path / "policies.pt", seed=0)
    assert train_module.param_hash(policy) == result.param_hash
    second = tiny.load_policy(tmp_path / "policies.pt", seed=1)
    assert train_module.param_hash(second) == other.param_hash != result.param_hash
    with pytest.raises(KeyError, match="not seed 2"):
        tiny.load_policy(tmp_path / "policies.pt", seed=2)
    records = tiny.evaluate(policy, pool.heldout_envs, pool.heldout_tasks, seed=0)
    assert [r["task_id"] for r in records] == [t["task_id"] for t in pool.heldout_tasks]
    assert all(set(r) == RECORD_KEYS and 1 <= r["steps"] <= 10 for r in records)
    assert records == tiny.evaluate(policy, pool.heldout_envs, pool.heldout_tasks, seed=0)


@pytest.mark.parametrize("algo", ["grpo", "ppo"])
def test_an_evaluation_in_chunks_gives_the_records_of_one_batch(pool, monkeypatch, algo):
    """``EVAL_CHUNK_ACTIVATIONS`` only bounds memory: a policy (a PPO policy's value head too) that
    plays the held-out tasks five episodes at a time gives the records it gives in one batch."""
    evaluate_module = importlib.import_module("axisrl.backends.tiny.evaluate")
    torch.manual_seed(1)
    policy = tiny.make_policy(quick(algo=algo))
    whole = tiny.evaluate(policy, pool.heldout_envs, pool.heldout_tasks, seed=0, first_primitive=True)
    monkeypatch.setattr(evaluate_module, "EVAL_CHUNK_ACTIVATIONS", 16 * 5)  # five episodes a chunk at width 16
    chunked = tiny.evaluate(policy, pool.heldout_envs, pool.heldout_tasks, seed=0, first_primitive=True)
    assert chunked == whole and len(whole) > 5


def test_an_evaluation_can_name_each_episodes_first_primitive(pool):
    """``first_primitive=True`` adds that one field and changes no other; an episode names the
    primitive of the tool it called first: its skeleton's first on playing its reference's first
    call, ``finish`` on finishing at once, None before its first step."""
    policy = tiny.make_policy(quick())
    plain = tiny.evaluate(policy, pool.heldout_envs, pool.heldout_tasks, seed=0)
    named = tiny.evaluate(policy, pool.heldout_envs, pool.heldout_tasks, seed=0, first_primitive=True)
    assert [{k: v for k, v in r.items() if k != "first_primitive"} for r in named] == plain
    assert all(set(r) == RECORD_KEYS | {"first_primitive"} and r["first_primitive"] in PRIMITIVES for r in named)
    specs, played = Specs(pool.envs), 0
    for episode_seed, task in enumerate(pool.tasks):
        for first in (json.loads(task["reference"])[0], {"name": "finish", "arguments": {}}):
            episode = Episode.start(specs, task, episode_seed, False)
            assert episode.first_primitive() is None
            keys = [call_key(episode.compact.call(k)) for k in range(len(episode.compact.candidates()))]
            if call_key(first) in keys:
                episode.act(keys.index(call_key(first)))
                assert episode.first_primitive() == (
                    first["name"] if first["name"] == "finish" else task["skeleton"].split(">")[0]
                )
                played += 1
    assert played > 1.8 * len(pool.tasks)


def test_shared_heldout_starts_play_like_fresh_ones(pool):
    """A train job evaluates its seeds on one set of started held-out episodes, forked per policy:
    each policy's records must be those of its own fresh evaluation, whatever was played before."""
    policies = [
        tiny.policy_of(tiny.checkpoint(tiny.train(pool.envs, pool.tasks, quick(updates=1), seed=seed)))
        for seed in (0, 1)
    ]
    starts = tiny.HeldoutStarts(pool.heldout_envs, pool.heldout_tasks, seed=0, leak_primitive_role=False)
    shared = [tiny.evaluate(p, pool.heldout_envs, pool.heldout_tasks, seed=0, starts=starts) for p in policies * 2]
    fresh = [tiny.evaluate(p, pool.heldout_envs, pool.heldout_tasks, seed=0) for p in policies]
    assert shared == fresh * 2 and fresh[0] != fresh[1]
    leaky = tiny.make_policy(quick(leak_primitive_role=True))
    with pytest.raises(ValueError, match="leak_primitive_role"):
        tiny.evaluate(leaky, pool.heldout_envs, pool.heldout_tasks, seed=0, starts=starts)


def test_the_memoriser_replays_training_solutions_and_random_acts_uniformly(pool):
    """On its own training tasks the memoriser replays the solutions (except calls the compact view
    cannot offer, e.g. an increment whose delta was never read); random rarely succeeds."""
    replayed = tiny.baseline_episodes("memoriser", pool.envs, pool.tasks, pool.envs, pool.tasks, seed=0)
    random = tiny.baseline_episodes("random", pool.envs, pool.tasks, pool.envs, pool.tasks, seed=0)
    assert all(set(r) == RECORD_KEYS for r in replayed + random)
    assert np.mean([r["success"] for r in replayed]) > 0.75
    assert np.mean([r["success"] for r in random]) < 0.25
    with pytest.raises(ValueError):
        tiny.baseline_episodes("oracle", pool.envs, pool.tasks, pool.heldout_envs, pool.heldout_tasks, seed=0)


def _walk(pool: tw.Pool, task: dict, episode_seed: int, steps: int) -> tuple[list[CompactEpisode], list[tuple]]:
    """Views along the task's reference solution, with the (call, observation) history."""
    spec = json.loads(next(e["spec"] for e in pool.envs if e["env_id"] == task["env_id"]))
    env = tw.ToolworldEnv(spec, task)
    env.reset()
    compact = CompactEpisode(spec, task, episode_seed)
    history = []
    for call in json.loads(task["reference"])[:steps]:
        observation = env.step(call).observation
        compact.push(call, observation)
        history.append((call, observation))
    return spec, compact, history


def _logits(policy: ToolPointer, features: list[EpisodeFeatures]) -> list[torch.Tensor]:
    batch = collate(collate_episodes(features), [f.decision() for f in features], range(len(features)))
    with torch.no_grad():
        logits, _ = policy(batch)
    return [logits[s : s + n] for s, n in zip(batch.cand_start, batch.cand_count)]


def test_incremental_features_score_like_a_fresh_rendering(pool):
    """Features built step by step (caches, symbols numbered as they appear) give the same scores
    as features of a view rebuilt from the whole history."""
    torch.manual_seed(0)
    policy = ToolPointer(16)
    task = next(t for t in pool.tasks if t["n_steps"] >= 2)
    spec, _, _ = _walk(pool, task, 5, 0)
    incremental = EpisodeFeatures(CompactEpisode(spec, task, 5), False)
    env = tw.ToolworldEnv(spec, task)
    env.reset()
    for call in json.loads(task["reference"]):
        incremental.decision()
        incremental.compact.push(call, env.step(call).observation)
        _, fresh_compact, _ = _walk(pool, task, 5, len(incremental.compact.steps))
        fresh = EpisodeFeatures(fresh_compact, False)
        assert incremental.compact.view() == fresh_compact.view()
        got, expected = _logits(policy, [incremental, fresh])
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_without_slot_embeddings_scores_do_not_depend_on_the_anonymisation(pool):
    """No tool ids or positions: under another episode seed (other slots, another tool order) the
    candidates get the same scores, up to their order, once slot embeddings are switched off."""
    torch.manual_seed(0)
    policy = ToolPointer(16)
    with torch.no_grad():
        policy.sym_slot.weight.zero_()
    for task in pool.tasks[:6]:
        scores = []
        for seed in (1, 2):
            _, compact, _ = _walk(pool, task, seed, 1)
            [logits] = _logits(policy, [EpisodeFeatures(compact, False)])
            scores.append(torch.sort(logits).values)
        torch.testing.assert_close(scores[0], scores[1], rtol=1e-5, atol=1e-5)


def test_forked_nodes_branch_like_fresh_episodes(pool):
    """A node forked mid-episode and then stepped differently from its parent shows exactly the
    view, features and scores of an episode that took the same actions on its own."""
    torch.manual_seed(0)
    policy = ToolPointer(16)
    specs = Specs(pool.envs)
    for task in [t for t in pool.tasks if t["n_steps"] >= 2][:4]:
        spec = specs[task["env_id"]]
        shared = Node.start(specs.domain, spec, task, 7, False)
        shared.features.decision()
        shared.act(0)
        shared.features.decision()
        branch = shared.fork()
        n = len(shared.compact.candidates())
        shared.act(n - 1)
        branch.act(0)
        for node, actions in ((shared, [0, n - 1]), (branch, [0, 0])):
            alone = Node.start(specs.domain, spec, task, 7, False)
            for k in actions:
                alone.features.decision()
                alone.act(k)
            assert node.compact.view() == alone.compact.view()
            assert (node.done, node.success, node.tool_calls) == (alone.done, alone.success, alone.tool_calls)
            if not node.done:
                got, expected = _logits(policy, [node.features, alone.features])
                torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_a_group_shares_its_common_prefix(pool):
    """Rollouts of one group start on one node: the first decision is scored once for all of them,
    while env steps still count every rollout."""
    torch.manual_seed(0)
    policy = ToolPointer(16)
    specs = Specs(pool.envs)
    task = pool.tasks[0]
    episodes = Episode.group(specs, task, 3, False, 8)
    stats = rollout(policy, episodes, np.random.default_rng(0))
    assert stats.env_steps == sum(len(e.actions) for e in episodes)
    assert stats.scored_decisions < stats.decisions
    assert len({id(e.decisions[0]) for e in episodes}) == 1


def test_adam_matches_torch_optim_fused_adam_bit_for_bit():
    torch.manual_seed(0)
    reference, ours = torch.nn.Linear(5, 3), torch.nn.Linear(5, 3)
    ours.load_state_dict(reference.state_dict())
    initial = reference.weight.detach().clone()
    optimizers = torch.optim.Adam(reference.parameters(), lr=3e-3, fused=True), Adam(ours.parameters(), lr=3e-3)
    for _ in range(20):
        x = torch.randn(4, 5)
        for model, optimizer in zip((reference, ours), optimizers, strict=True):
            optimizer.zero_grad()
            model(x).pow(2).sum().backward()
            optimizer.step()
    assert all(torch.equal(a, b) for a, b in zip(reference.parameters(), ours.parameters(), strict=True))
    assert not torch.equal(reference.weight, initial)


def test_an_update_that_raises_is_recorded_as_failed_with_its_error(pool, monkeypatch):
    calls = {"n": 0}
    real_rollout = train_module.rollout

    def flaky_rollout(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 4:
            raise RuntimeError("environment server went away")
        return real_rollout(*args, **kwargs)

    monkeypatch.setattr(train_module, "rollout", flaky_rollout)
    result = tiny.train(pool.envs, pool.tasks, quick(updates=8), seed=0)
    assert result.status == "failed" and len(result.metrics) == 3
    assert result.error == "RuntimeError: environment server went away"
    assert tiny.train(pool.envs, pool.tasks, quick(updates=2), seed=0).error is None


@pytest.mark.parametrize(
    "overrides",
    [
        {"updates": 10, "flop_cap": 2.5e7},  # the cap ends the seeds at different updates
        {"algo": "ppo", "ppo_epochs": 2},
        {"kl_coef": 0.1, "grpo_minibatches": 2, "token_cap": 150},
        {"updates": 4, "dynamic_sampling": True, "kl_bound": "adaptive_lr"},  # seeds draw again, each its own way
    ],
)
def test_a_run_is_a_function_of_its_seed_whatever_its_settings(pool, overrides):
    """Every update rule, cap and draw reads the seed's own generators: the same seed twice gives
    the same run (parameters, metrics, compute), another seed another, PPO's value head, GRPO's
    minibatches, KL term, caps and dynamic sampling's extra draws included."""
    settings = quick(**overrides)
    runs = tiny.train_seeds(pool.envs, pool.tasks, settings, [3, 4, 5])
    again = tiny.train(pool.envs, pool.tasks, settings, seed=3)
    assert (runs[0].param_hash, runs[0].metrics, runs[0].compute) == (again.param_hash, again.metrics, again.compute)
    assert runs[1].param_hash != runs[0].param_hash
    if "flop_cap" in overrides:
        assert len({len(r.metrics) for r in runs}) > 1


def test_a_seed_that_fails_stops_alone(pool, monkeypatch):
    """A seed whose update diverges fails there, and a job's next seed trains as it would alone."""

    real_rule, calls = updates_module.UPDATES["grpo"], {}

    def diverge_on_the_first_seeds_third_update(u):
        calls.setdefault(id(u.policy), []).append(None)
        if list(calls).index(id(u.policy)) == 0 and len(calls[id(u.policy)]) == 3:
            raise Diverged("non-finite loss")
        return real_rule(u)

    monkeypatch.setitem(updates_module.UPDATES, "grpo", diverge_on_the_first_seeds_third_update)
    runs = tiny.train_seeds(pool.envs, pool.tasks, quick(updates=4), [4, 5])
    assert [r.status for r in runs] == ["failed", "ok"]
    assert runs[0].error == "Diverged: non-finite loss" and len(runs[0].metrics) == 2
    assert len(runs[1].metrics) == 4
    monkeypatch.setitem(updates_module.UPDATES, "grpo", real_rule)
    assert runs[1].param_hash == tiny.train(pool.envs, pool.tasks, quick(updates=4), seed=5).param_hash


@pytest.mark.parametrize("loss_agg_mode", algos.LOSS_AGG_MODES)
def test_a_grpo_update_in_chunks_accumulates_the_gradient_of_one_pass(pool, monkeypatch, loss_agg_mode):
    """Chunks only bound memory: every aggregation's normaliser is batch-wide, so cutting the
    update into one chunk per episode accumulates the gradient of one pass over the whole batch."""
    settings = quick(loss_agg_mode=loss_agg_mode, norm_adv_by_std_in_grpo=True, kl_coef=0.1, reward_density="dense")
    specs = Specs(pool.envs)
    episodes = [
        episode
        for g, task in enumerate(pool.tasks[:16])
        for episode in Episode.group(specs, task, g, False, settings.d_traj)
    ]
    torch.manual_seed(1)
    reference = ToolPointer(settings.width).requires_grad_(False)  # another policy: the KL term has a gradient
    torch.manual_seed(0)
    policy = ToolPointer(settings.width)
    rollout(policy, episodes, np.random.default_rng(0))
    group = torch.arange(16).repeat_interleave(settings.d_traj)
    assert len({e.partial for e in episodes}) > 1  # some advantages are not zero
    horizon = max(spec["max_steps"] for spec in specs.by_id.values())
    gradients = {}
    for budget in (10**9, 1):
        taken: list[list[torch.Tensor]] = []

        def record(model, *_, taken=taken):  # the accumulated gradient, instead of the optimiser step
            taken.append([p.grad.clone() for p in model.parameters() if p.grad is not None])
            return 0.0

        monkeypatch.setattr(updates_module, "GRPO_CHUNK_ACTIVATIONS", budget)
        monkeypatch.setattr(updates_module, "_step", record)
        context = updates_module.UpdateContext(
            policy, reference, None, episodes, group, settings, horizon, np.random.default_rng(0)
        )
        out = updates_module.UPDATES["grpo"](context)
        policy.zero_grad()
        gradients[budget] = (out, taken[0])
    (whole, whole_grads), (chunked, chunked_grads) = gradients[10**9], gradients[1]
    assert chunked.loss == pytest.approx(whole.loss, rel=1e-5, abs=1e-7)
    assert chunked.kl == pytest.approx(whole.kl, rel=1e-5, abs=1e-7) and whole.kl != 0
    assert len(chunked_grads) == len(whole_grads) > 0
    assert all(torch.allclose(a, b, rtol=1e-4, atol=1e-7) for a, b in zip(whole_grads, chunked_grads, strict=True))
    assert any(bool(g.abs().max() > 0) for g in whole_grads)


# ----------------------------------------------------------------------------------------- a base, by behaviour cloning


def test_behaviour_cloning_plays_the_references_and_lowers_their_loss(pool):
    """``bc`` teacher-forces each visited task's reference through the real environment and trains
    the cross-entropy of the reference calls, which falls. A reference succeeds unless one of its
    calls is not among the policy's candidates (a value its view has not shown): it is cut there."""
    settings = quick(algo="bc", d_traj=1, updates=12, visits_per_update=8, lr=3e-3)
    result = tiny.train(pool.envs, pool.tasks, settings, seed=0)
    assert result.status == "ok"
    assert np.mean([row["success_mean"] for row in result.metrics]) > 0.9
    assert result.compute["failed_episodes"] == result.compute["truncated_episodes"]
    assert all(row["gradient_steps"] == row["env_steps"] > 0 for row in result.metrics)
    losses = [row["loss"] for row in result.metrics]
    assert np.mean(losses[-3:]) < np.mean(losses[:3])
    assert result.compute["train_flops"] > 0


def test_a_run_starts_from_its_base_and_keeps_the_snapshots_it_asks_for(pool):
    """A run from ``init`` starts from the base's weights (its snapshot 0 is the base), its last
    snapshot is its final state; PPO's value head, which a BC base lacks, starts from the seed's
    init; a base of another width does not fit."""
    base = tiny.train(pool.envs, pool.tasks, quick(algo="bc", d_traj=1), seed=5).state
    result = tiny.train_seeds(pool.envs, pool.tasks, quick(), [0], init=base, snapshots=[0, 3])[0]
    assert set(result.snapshots) == {0, 3}
    assert all(torch.equal(result.snapshots[0][name], weight) for name, weight in base.items())
    assert all(torch.equal(result.snapshots[3][name], weight) for name, weight in result.state.items())
    assert result.param_hash != tiny.train(pool.envs, pool.tasks, quick(), seed=0).param_hash
    ppo = tiny.train_seeds(pool.envs, pool.tasks, quick(algo="ppo"), [0], init=base, snapshots=[0])[0]
    fresh = tiny.make_policy(quick(algo="ppo"))
    assert all(torch.equal(ppo.snapshots[0][name], weight) for name, weight in base.items())
    assert {name for name in ppo.snapshots[0] if name not in base} == {n for n in fresh.state_dict() if "critic" in n}
    with pytest.raises(RuntimeError, match="size mismatch"):
        tiny.train(pool.envs, pool.tasks, quick(width=32), seed=0, init=base)


class Scored(NamedTuple):
    """An episode as ``trained_scores`` reads it."""

    reward: float
    label: float | None = None
    partial: float = 0.0


def _draw(scores: list[list[float]], first_task: int) -> visits_module.Draw:
    tasks = [{"task_id": f"t{first_task + g}", "env_id": "e"} for g in range(len(scores))]
    episodes = [Scored(score) for group in scores for score in group]
    return visits_module.Draw(tasks, np.arange(len(scores)), episodes)


def test_dynamic_sampling_keeps_the_first_groups_with_a_signal_and_counts_every_draw():
    settings = quick(d_traj=2, dynamic_sampling=True)
    draws = [_draw([[0, 0], [1, 0], [1, 1]], 0), _draw([[0, 1], [0, 0], [1, 0]], 3)]
    visit = visits_module.visit_of(draws, settings, None)
    assert [task["task_id"] for task in visit.tasks] == ["t1", "t3", "t5"]  # as many as the first draw had
    assert [e.reward for e in visit.episodes] == [1, 0, 0, 1, 1, 0] and visit.groups.tolist() == [0, 0, 1, 1, 2, 2]
    assert len(visit.played) == 12 and len(visit.drawn_tasks) == 6
    assert visit.dropped_zero_variance == 3  # t0, t2 and t4 played alike; none had a signal left over
    nothing = visits_module.visit_of([_draw([[0, 0], [1, 1]], 0), _draw([[0, 0], [0, 0]], 2)], settings, None)
    assert [task["task_id"] for task in nothing.tasks] == ["t0", "t1"] and nothing.dropped_zero_variance == 2
    plain = visits_module.visit_of(draws[:1], quick(d_traj=2), None)
    assert [task["task_id"] for task in plain.tasks] == ["t0", "t1", "t2"] and plain.dropped_zero_variance == 0


def test_a_dynamic_sampling_run_pays_for_every_draw(pool):
    """Drawn groups are compute the run spent (visits, episodes, env steps); an update trains on at
    most a plain update's groups and draws again only while it is short of groups with a signal."""
    v, g = QUICK["visits_per_update"], QUICK["d_traj"]
    result = tiny.train(pool.envs, pool.tasks, quick(updates=6, dynamic_sampling=True, max_draws=3), seed=0)
    rows = result.metrics
    assert all(row["drawn_groups"] in (v, 2 * v, 3 * v) and 1 <= row["groups"] <= v for row in rows)
    assert any(row["drawn_groups"] > v for row in rows)  # from random weights most groups score alike
    assert result.compute["visits"] == sum(row["drawn_groups"] for row in rows) > 6 * v
    assert result.compute["episodes"] == result.compute["visits"] * g == sum(row["episodes"] for row in rows)
    for row in rows:  # short: fewer groups with a signal than a plain update's, so the update drew again
        with_signal = row["drawn_groups"] - row["zero_variance_groups"]
        assert (row["drawn_groups"] == v) or with_signal - min(with_signal, v) < v
        assert row["groups"] == (min(with_signal, v) or v)
    assert run_diagnostics(rows)["zero_variance_share"] == pytest.approx(
        sum(row["zero_variance_groups"] for row in rows) / result.compute["visits"]
    )


def test_rollout_kl_is_zero_without_a_step_and_measured_every_few_updates_with_one(pool):
    every = train_module.PROBE_EVERY
    result = tiny.train(pool.envs, pool.tasks, quick(updates=6, algo="ppo"), seed=0)  # PPO always steps
    for row in result.metrics:
        measured = row["update"] % every == 0
        assert (row["rollout_kl"] is not None) == measured and (row["probe_flops"] > 0) == measured
        assert not measured or row["rollout_kl"] > 0
    grpo = tiny.train(pool.envs, pool.tasks, quick(updates=6), seed=0).metrics
    assert all(row["rollout_kl"] == 0 and row["probe_flops"] == 0 for row in grpo if not row["gradient_steps"])
    policy = train_module.make_policy(quick())
    episodes = Episode.group(Specs(pool.envs), pool.tasks[0], 7, False, 4)
    rollout(policy, episodes, np.random.default_rng(0))
    kl, flops = updates_module.rollout_kl(policy, episodes)
    assert abs(kl) < 1e-6 and flops > 0  # the rollout policy itself: no divergence


def test_the_adaptive_lr_bound_follows_the_measured_kl(pool):
    bound = updates_module.KL_BOUNDS["adaptive_lr"]
    assert bound(1.0, 0.05, 0.01) == pytest.approx(1 / 1.5) and bound(1.0, 0.001, 0.01) == pytest.approx(1.5)
    assert bound(1.0, 0.01, 0.01) == 1.0 and bound(9.0, 0.0, 0.01) == 10.0 and bound(0.01, 1.0, 0.01) == 0.01
    settings = quick(updates=6, algo="ppo", kl_bound="adaptive_lr", target_kl=0.001)
    rows = tiny.train(pool.envs, pool.tasks, settings, seed=0).metrics
    assert all(row["rollout_kl"] > 0 for row in rows)  # measured every update: the bound reads it
    scale = 1.0
    for row in rows:
        assert row["lr"] == pytest.approx(settings.lr * scale)
        scale = bound(scale, row["rollout_kl"], settings.target_kl)
    assert len({round(row["lr"], 12) for row in rows}) > 1
    plain = tiny.train(pool.envs, pool.tasks, quick(updates=6, algo="ppo"), seed=0).metrics
    assert rows[0]["train_flops"] == plain[0]["train_flops"] + rows[0]["probe_flops"]  # the bound reads the probe
