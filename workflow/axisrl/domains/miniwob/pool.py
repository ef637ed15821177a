"""The MiniWoB++ training, held-out and placebo pools, with toolworld's row shape.

A MiniWoB task is an environment (its family is its world, ``world_id``); its instances, the pages it
draws from seeds, are its tasks. An environment's spec is ``{"domain", "task", "content_seed",
"max_steps"}``: its content seed roots the seeds of its instances, so two environments of one task are
one environment at every signature level, like toolworld's L0 contents. Every instance is opened in the
browser when the pool is made, to record its utterance (the task's ``instruction``) and its page (in
``goal``, with the seed): the pool needs Chromium, and the renderings and the dedup stage do not.
Instances are drawn in seed order and kept only if their utterance and page differ from every instance
kept before in the environment (an agent could not tell two such apart), at most ``4 n + 8`` draws for
``n`` tasks, so a task with few distinct instances gets fewer tasks. MiniWoB has no reference solutions:
``reference`` is ``"[]"`` and ``answer`` null.

How the ``synthesize`` keys map (``tasks.py`` has the families):

* training: the first task of the first ``n_worlds`` training families (all twelve at most), one
  environment each, ``tasks_per_env`` instances; ``variants_per_world``, ``contents_per_variant`` and
  ``reskins_per_world`` have no MiniWoB counterpart and are not read;
* placebo: ``placebo_contents`` environments of the first training task, ``placebo_tasks_per_env``
  instances each;
* T0: ``heldout.t0_envs`` environments of training tasks (in a seeded order, cycling), new content from
  ``heldout.seed``, without any instance that training or an earlier T0 environment of the task has;
* T1: ``heldout.t1_envs`` of the sibling tasks of the training families (a seen family, an unseen variant),
  in a seeded order, at most as many as there are;
* T2: the first ``heldout.t2_worlds`` held-out families, ``heldout.t2_variants_per_world`` of each one's
  tasks (at most all), each one environment; V: the same with ``heldout.validation_worlds`` validation
  families. A tier asks for at most what MiniWoB has: a larger number gives every family there is.

All held-out tiers take ``heldout.tasks_per_env`` instances per environment. Every seed is
``derive_seed`` of the config's seeds, so a pool is a pure function of its config (and of the installed
miniwob, whose pages it records). World and environment ids are hashes under a ``miniwob`` prefix.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable, Mapping
from typing import Any

from axisrl.domains.canon import canonical_json, derive_seed, short_hash
from axisrl.domains.miniwob.browser import PageState, borrowed
from axisrl.domains.miniwob.env import PARAMETERS
from axisrl.domains.miniwob.tasks import HELDOUT_FAMILIES, TASKS, TRAIN_FAMILIES, VALIDATION_FAMILIES, family_tasks
from axisrl.domains.pool import Pool


def world_id(family: str) -> str:
    return short_hash(["miniwob-world", family])


def env_id(spec: Mapping[str, Any]) -> str:
    return short_hash(["miniwob-env", canonical_json(spec)])


def make_spec(task: str, content_seed: int, max_steps: int) -> dict[str, Any]:
    if task not in TASKS:
        raise ValueError(f"unknown MiniWoB task {task!r}; this domain's tasks are {sorted(TASKS)}")
    return {"domain": "miniwob", "task": task, "content_seed": content_seed, "max_steps": max_steps}


def open_instance(task: str, seed: int) -> PageState:
    """Instance ``seed`` of ``task`` as a fresh page shows it (a tab borrowed for the while)."""
    token = object()
    with borrowed(token) as (browser, _):
        try:
            return browser.load(task, seed)
        finally:
            browser.release(token)


def instance_key(state: PageState) -> str:
    """What an agent sees of an instance: its utterance and its page."""
    return short_hash([state.utterance, list(state.elements)])


def generate_tasks(
    spec: Mapping[str, Any], env: str, n_tasks: int, exclude: Iterable[str] = ()
) -> tuple[list[dict[str, Any]], set[str]]:
    """Up to ``n_tasks`` distinct instances of the environment (none whose ``instance_key`` is in
    ``exclude``) as task rows, and the keys of the instances kept."""
    seen = set(exclude)
    kept: set[str] = set()
    tasks: list[dict[str, Any]] = []
    info = TASKS[spec["task"]]
    for index in range(4 * n_tasks + 8):
        if len(tasks) == n_tasks:
            break
        seed = derive_seed(spec["content_seed"], "instance", index)
        state = open_instance(spec["task"], seed)
        key = instance_key(state)
        if state.done or key in seen:
            continue
        seen.add(key)
        kept.add(key)
        goal = canonical_json({"seed": seed, "page": list(state.elements)})
        tasks.append(
            {
                "task_id": short_hash(["miniwob-task", env, goal]),
                "env_id": env,
                "skeleton": info.name,
                "skill_sig": short_hash(["miniwob-skills", list(info.skills)]),
                "verifier_sig": short_hash(["miniwob-verifier", info.name]),
                "instruction": state.utterance,
                "reference": "[]",
                "goal": goal,
                "answer": None,
                "n_steps": None,
                "n_distractors": None,
                "id_depth": None,
            }
        )
    return tasks, kept


class _Emitter:
    """Appends environment rows and their task rows to a pool's lists; remembers the instances of each
    task in training and T0, which a T0 environment must not repeat."""

    def __init__(self, cfg: Mapping[str, Any]) -> None:
        self.max_steps = cfg["max_steps"]
        self.seen: dict[str, set[str]] = {}

    def emit(
        self,
        task: str,
        content_seed: int,
        variant_index: int,
        split: str,
        tier: str | None,
        n_tasks: int,
        envs: list[dict[str, Any]],
        tasks: list[dict[str, Any]],
    ) -> None:
        spec = make_spec(task, content_seed, self.max_steps)
        env = env_id(spec)
        exclude = self.seen.get(task, set()) if tier == "T0" else set()
        rows, kept = generate_tasks(spec, env, n_tasks, exclude)
        if split == "train" or tier == "T0":
            self.seen.setdefault(task, set()).update(kept)
        info = TASKS[task]
        envs.append(
            {
                "env_id": env,
                "world_id": world_id(info.family),
                "world_seed": None,
                "variant_index": variant_index,
                "variant_seed": None,
                "content_seed": content_seed,
                "skin_index": 0,
                "split": split,
                "tier": tier,
                "n_tables": None,
                "n_tools": len(PARAMETERS),
                "n_rows": None,
                "edits": [f"task:{task}"],
                "vocabulary": [],
                "spec": canonical_json(spec),
            }
        )
        tasks += [{**row, "split": split, "tier": tier} for row in rows]


def _cycle(items: list[str], count: int) -> list[str]:
    return list(itertools.islice(itertools.cycle(items), count)) if items else []


def generate_pool(cfg: Mapping[str, Any]) -> Pool:
    """The pools for a validated ``synthesize`` section (``seed``, ``n_worlds``, ``tasks_per_env``,
    ``max_steps``, ``placebo_*`` and ``heldout``; see the module docstring)."""
    held = cfg["heldout"]
    root, hs = cfg["seed"], held["seed"]
    emitter = _Emitter(cfg)
    pool = Pool()
    families = TRAIN_FAMILIES[: cfg["n_worlds"]]
    trained = [family_tasks(family)[0] for family in families]
    for task in trained:
        emitter.emit(
            task,
            derive_seed(root, "content", task),
            0,
            "train",
            None,
            cfg["tasks_per_env"],
            pool.envs,
            pool.tasks,
        )
    for c in range(cfg["placebo_contents"]):
        emitter.emit(
            trained[0],
            derive_seed(root, "placebo-content", c),
            0,
            "placebo",
            None,
            cfg["placebo_tasks_per_env"],
            pool.placebo_envs,
            pool.placebo_tasks,
        )

    rng = random.Random(derive_seed(hs, "tiers"))
    n_tasks, out = held["tasks_per_env"], (pool.heldout_envs, pool.heldout_tasks)
    for i, task in enumerate(_cycle(rng.sample(trained, len(trained)), held["t0_envs"])):
        emitter.emit(task, derive_seed(hs, "t0-content", i), 0, "heldout", "T0", n_tasks, *out)
    siblings = [(task, v) for family in families for v, task in enumerate(family_tasks(family)) if v]
    for i, (task, v) in enumerate(rng.sample(siblings, len(siblings))[: held["t1_envs"]]):
        emitter.emit(task, derive_seed(hs, "t1-content", i), v, "heldout", "T1", n_tasks, *out)
    for tier, unseen, count in (
        ("T2", HELDOUT_FAMILIES, held["t2_worlds"]),
        ("V", VALIDATION_FAMILIES, held["validation_worlds"]),
    ):
        for family in unseen[:count]:
            for v, task in enumerate(family_tasks(family)[: held["t2_variants_per_world"]]):
                content_seed = derive_seed(hs, f"{tier}-content", task)
                emitter.emit(task, content_seed, v, "heldout", tier, n_tasks, *out)
    return pool
