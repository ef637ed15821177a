"""The tiny backend's compact view of toolworld: bulk-drawn slot permutations equal to ``random``'s,
an incremental episode view equal to a fresh render, what a tool descriptor reveals (and that it
carries the primitive role only when that is leaked), and that the view is the same for a re-skin
and hides every name and id."""

from __future__ import annotations

import json
import random
import re

import pytest
from domain_fixtures import SMALL

from axisrl.backends.tiny.encoding import EpisodeFeatures
from axisrl.backends.tiny.policy import ToolPointer
from axisrl.backends.tiny.vocab import PRIMITIVES
from axisrl.config import load_config, validate_config
from axisrl.domains import toolworld as tw
from axisrl.domains.toolworld.compact import CompactEpisode, render_compact
from axisrl.domains.toolworld.runtime import compile_spec
from axisrl.domains.toolworld.slots import Permutation, shuffled
from conftest import DEFAULT_CONFIG, SCHEMA_PATH

POOL = {
    "n_worlds": 4,
    "variants_per_world": 3,
    "contents_per_variant": 1,
    "reskins_per_world": 0,
    "tasks_per_env": 8,
    "heldout": {
        "tasks_per_env": 2,
        "t0_envs": 1,
        "t1_envs": 1,
        "t2_worlds": 1,
        "t2_variants_per_world": 1,
        "validation_worlds": 0,
    },
}
RESKINNED = SMALL
"""A pool with a re-skinned copy of each world's first environment (``domain_fixtures.SMALL``)."""


@pytest.fixture(scope="module")
def pool(schema) -> tw.Pool:
    """A pool with a re-skin of every world."""
    return tw.generate_pool(validate_config({"synthesize": RESKINNED}, schema)["synthesize"])


@pytest.fixture(scope="module")
def specs(pool) -> dict[str, dict]:
    return {env["env_id"]: json.loads(env["spec"]) for env in pool.envs + pool.heldout_envs}


@pytest.mark.parametrize("size", [1, 2, 5, 18, 33, 64, 130, 300])
def test_bulk_permutations_match_random_bit_for_bit(size):
    for seed in range(40):
        expected = random.Random(seed * 7919 + 3).sample(range(size), size)
        perm = Permutation(seed * 7919 + 3, size)
        k = random.Random(seed).randrange(size + 1)
        assert perm.prefix(k) == expected[:k]
        assert perm.prefix(size) == expected
        order = list(range(size))
        random.Random(seed).shuffle(order)
        assert shuffled(seed, size) == order


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
            assert view == render_compact(spec, task, history, episode_seed)
            views += 1
            # follow the reference most of the time, so that deep states are reached too
            step = len(history)
            call = (
                reference[step]
                if step < len(reference) and rng.random() < 0.7
                else view["calls"][rng.randrange(len(view["calls"]))]
            )
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


TOOL_ENCODING = (
    "tool_table",
    "tool_struct",
    "param_tool",
    "param_pos",
    "param_kind",
    "param_slot",
    "param_req",
    "param_start",
    "sym_kind",
    "sym_slot",
)
"""``EpisodeFeatures``' arrays of a tool besides its role code (``tool_prim``), and the symbols they name."""


def test_a_descriptor_carries_the_primitive_role_only_when_it_is_leaked():
    """What the leak check (``test_tiny_science``) compares: on every training and held-out
    environment of the default pool, no descriptor token names a primitive and, with the leak off,
    every tool's role code is 0 and the policy has no embedding to read it; with the leak on (the
    control) each tool's code is its own primitive's, all the pool's primitives (``finish``
    included) are told apart, and the rest of the tool's encoding is the same as without the leak."""
    pool = tw.generate_pool(load_config(DEFAULT_CONFIG, schema_path=SCHEMA_PATH)["synthesize"])
    first_task = {}
    for task in pool.tasks + pool.heldout_tasks:
        first_task.setdefault(task["env_id"], task)
    leaked_roles = set()
    for env in pool.envs + pool.heldout_envs:
        compact = CompactEpisode(json.loads(env["spec"]), first_task[env["env_id"]], 0)
        plain, leaked = EpisodeFeatures(compact, False), EpisodeFeatures(compact, True)
        assert not {token for descriptor in compact.tools for token in descriptor} & set(PRIMITIVES)
        assert plain.tool_prim == [0] * len(compact.tools)
        assert [PRIMITIVES[code] for code in leaked.tool_prim] == [
            tool.prim if tool else "finish" for tool in compact.ordered
        ]
        assert all(getattr(plain, name) == getattr(leaked, name) for name in TOOL_ENCODING)
        leaked_roles.update(PRIMITIVES[code] for code in leaked.tool_prim)
    envs = pool.envs + pool.heldout_envs
    assert leaked_roles == {tool.prim for env in envs for tool in compile_spec(json.loads(env["spec"])).tools} | {
        "finish"
    }
    assert len(leaked_roles) > 5
    assert ToolPointer(8, leak_primitive_role=False).prim is None
    assert not any(name.startswith("prim.") for name in ToolPointer(8, leak_primitive_role=False).state_dict())
    assert ToolPointer(8, leak_primitive_role=True).prim is not None


def _compact_episode(spec: dict, task: dict, seed: int) -> list[dict]:
    """Views along the reference; each reference call must be a candidate, except an increment
    whose delta was never observable (the view offers goal - observed value once a row was read)."""
    rt = compile_spec(spec)
    env = tw.ToolworldEnv(spec, task)
    env.reset()
    views, history = [], []
    previous = None
    for call in json.loads(task["reference"]):
        view = render_compact(spec, task, history, seed)
        tool = rt.tool_by_name.get(call["name"])
        blind_increment = tool and tool.prim == "update" and rt.update_mode == "increment" and previous != "get"
        assert call in view["calls"] or blind_increment, "the reference action must be a candidate"
        previous = tool and tool.prim
        assert len(view["calls"]) == len(view["candidates"])
        views.append({k: v for k, v in view.items() if k != "calls"})
        history.append((call, env.step(call).observation))
    return views


def test_compact_view_is_the_same_for_a_reskin_and_changes_with_the_episode_seed(pool, specs):
    reskins = [env for env in pool.envs if env["skin_index"]]
    assert reskins
    for skinned in reskins:
        base = next(b for b in pool.envs if b["world_id"] == skinned["world_id"] and b["skin_index"] == 0)
        base_tasks = {t["goal"]: t for t in pool.tasks if t["env_id"] == base["env_id"]}
        pairs = [
            (base_tasks[t["goal"]], t)
            for t in pool.tasks
            if t["env_id"] == skinned["env_id"] and t["goal"] in base_tasks
        ]
        assert pairs
        for original, copy in pairs:
            assert original["instruction"] != copy["instruction"] or original["reference"] != copy["reference"]
            views = _compact_episode(specs[base["env_id"]], original, 3)
            assert views == _compact_episode(specs[skinned["env_id"]], copy, 3)
            assert views != _compact_episode(specs[base["env_id"]], original, 4)


def test_compact_view_hides_names_and_ids(pool, specs):
    task = next(t for t in pool.tasks if t["skeleton"].startswith("lookup>get"))
    spec = specs[task["env_id"]]
    env = tw.ToolworldEnv(spec, task)
    env.reset()
    history = [(call, env.step(call).observation) for call in json.loads(task["reference"])[:-1]]
    view = render_compact(spec, task, history, 0)
    tokens = json.dumps({k: v for k, v in view.items() if k != "calls"})
    rt = compile_spec(spec)
    surface = set(rt.vocabulary()) | {row["f0"] for rows in rt.initial.values() for row in rows.values()}
    surface |= {rt.render_id(t, i) for t, rows in rt.initial.items() for i in rows}
    assert not [word for word in surface if f'"{word}"' in tokens]
    slot_maps = [render_compact(spec, task, [], seed)["goal"] for seed in range(6)]
    assert len({json.dumps(goal) for goal in slot_maps}) > 3
