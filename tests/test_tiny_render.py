"""The fast paths the tiny backend relies on in toolworld's compact rendering: bulk-drawn slot
permutations equal to ``random``'s, an incremental episode view equal to a fresh render, and what a
tool descriptor reveals."""

from __future__ import annotations

import json
import random
import re

import pytest

from axisrl.config import validate_config
from axisrl.domains import toolworld as tw
from axisrl.domains.toolworld.render import CompactEpisode, _Permutation, _shuffled

POOL = {"n_worlds": 4, "variants_per_world": 3, "contents_per_variant": 1, "reskins_per_world": 0,
        "tasks_per_env": 8,
        "heldout": {"tasks_per_env": 2, "t0_envs": 1, "t1_envs": 1, "t2_worlds": 1, "t2_variants_per_world": 1}}


@pytest.mark.parametrize("size", [1, 2, 5, 18, 33, 64, 130, 300])
def test_bulk_permutations_match_random_bit_for_bit(size):
    for seed in range(40):
        expected = random.Random(seed * 7919 + 3).sample(range(size), size)
        perm = _Permutation(seed * 7919 + 3, size)
        k = random.Random(seed).randrange(size + 1)
        assert perm.prefix(k) == expected[:k]
        assert perm.prefix(size) == expected
        order = list(range(size))
        random.Random(seed).shuffle(order)
        assert _shuffled(seed, size) == order


def test_an_incremental_view_equals_a_fresh_render_along_random_episodes(schema):
    pool = tw.generate_pool(validate_config({"synthesize": POOL}, schema)["synthesize"])
    specs = {env["env_id"]: json.loads(env["spec"]) for env in pool.envs}
    rng = random.Random(0)
    views = 0
    for episode_seed, task in enumerate(pool.tasks):
        spec = specs[task["env_id"]]
        env, compact = tw.ToolworldEnv(spec, task), CompactEpisode(spec, task, episode_seed)
        env.reset()
        reference, history, done = json.loads(task["reference"]), [], False
        while not done:
            view = compact.view()
            assert view == tw.render_compact(spec, task, history, episode_seed)
            views += 1
            # follow the reference most of the time, so that deep states are reached too
            step = len(history)
            call = (reference[step] if step < len(reference) and rng.random() < 0.7
                    else view["calls"][rng.randrange(len(view["calls"]))])
            result = env.step(call)
            compact.push(call, result.observation)
            history.append((call, result.observation))
            done = result.done
    assert views > 2 * len(pool.tasks)


def test_a_tools_descriptor_shape_names_its_primitive(schema):
    """Why the leak check cannot pass on toolworld (``test_tiny_science``): with slot numbers
    blanked, a tool's descriptor (access, return kind, declared semantics, parameter kinds) belongs
    to one primitive only, in training and held-out worlds alike, so leaking the primitive adds no
    information. A descriptor that two primitives share fails here and makes that check meaningful."""
    config = validate_config({"synthesize": {"n_worlds": 16, "tasks_per_env": 1}}, schema)
    pool = tw.generate_pool(config["synthesize"])
    first_task = {}
    for task in pool.tasks + pool.heldout_tasks:
        first_task.setdefault(task["env_id"], task)
    primitives: dict[tuple[str, ...], set[str]] = {}
    for env in pool.envs + pool.heldout_envs:
        compact = CompactEpisode(json.loads(env["spec"]), first_task[env["env_id"]], 0)
        for descriptor, tool in zip(compact.tools, compact.ordered, strict=True):
            shape = tuple(re.sub(r"^([TFEV])\+?\d+$", r"\1", token) for token in descriptor)
            primitives.setdefault(shape, set()).add(tool.prim if tool else "finish")
    assert len(primitives) > 40
    assert {shape: prims for shape, prims in primitives.items() if len(prims) > 1} == {}
