"""Synthetic data sources that imitate the paper's synthesis method families (Table 3).

Real data is the exact generator (``generate_pool``). A synthetic source makes artifacts of the
same shape (environment, task and trajectory rows) plus ``source`` (the method) and ``defect``
(null when faithful, else the failure injected), so reports can measure defect rates; training
never reads ``defect``. How often a method fails is its *fidelity model*, a plain dict of
probabilities (``METHODS[name].fidelity``, overridable per config); every draw comes from
``random.Random(derive_seed(seed, "synthetic", method, ...))``, so a source is a pure function of
its inputs.

* Environment synthesis (``awm``, ``genenv``; axis ``d_env``): new worlds from their own seed
  stream, each with ``generate_tasks`` tasks. ``description_mismatch``: the environment's tool
  documentation disagrees with what its tools do (see ``defects.mismatch``); ``unverifiable_goal``:
  a task's goal is made unreachable (see ``defects.unreachable_goal``).
* Task synthesis (``autoplay``, ``sca``, ``rlve``; axis ``d_task``): new tasks for real
  environments, corrupted per the method's mix (``unsolvable``, ``mislabelled``,
  ``near_duplicate``) and then passed through the method's own filter.
* Trajectory synthesis (``swirl``; axis ``d_traj``): the reference of a real task with step
  errors, kept unless the step-wise judge catches one.
* Environment + trajectory synthesis (``dreamgym``; axis ``d_traj``): ``SimulatedEnv`` (in
  ``simulated.py``) steps rollouts at training time; nothing is generated here.

``common_core=True`` replaces every method's own filter by one shared core (the reference must
execute and pass its verifier, recall 1.0; SWiRL's judge at recall 1.0) and leaves the failure
mixes as they are (Table 16).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

from axisrl.domains.toolworld.canon import canonical_json, derive_seed, short_hash
from axisrl.domains.toolworld.defects import mismatch, reword, step_variants, unreachable_goal, with_step_errors
from axisrl.domains.toolworld.env import ToolworldEnv
from axisrl.domains.toolworld.model import FINISH, Goal
from axisrl.domains.toolworld.pool import world_id
from axisrl.domains.toolworld.runtime import compile_spec
from axisrl.domains.toolworld.tasks import generate_tasks, verifier_shape
from axisrl.domains.toolworld.world import Spec, build_spec, sample_state, sample_variant, sample_world
from axisrl.synthesis import METHODS as FAMILIES
from axisrl.synthesis import MethodFamily

TASK_KEYS = (
    "task_id",
    "env_id",
    "skeleton",
    "skill_sig",
    "verifier_sig",
    "instruction",
    "reference",
    "goal",
    "answer",
    "n_steps",
    "n_distractors",
    "id_depth",
    "split",
    "tier",
)
"""The columns pool.py writes for real task rows (a copied real row may carry more, e.g. its
``source``); synthetic rows add ``source`` and ``defect``."""
SPLIT = "synthetic"
TASK_DEFECTS = ("unsolvable", "mislabelled", "near_duplicate")
FILTERS = ("executes", "solution", "solution_and_failures")
"""``executes``: the reference runs without an error; ``solution``: it also passes the verifier
(the common core); ``solution_and_failures``: SCA's check, plus a no-op run and the truncated
reference fail."""
DONORS = 8
"""Other tasks tried as the wrong verifier of a mislabelled draft."""
DRAFT_ROUNDS = 8
"""``generate_tasks`` rounds (fresh seeds) per environment before it counts as exhausted."""


@dataclass(frozen=True)
class Method:
    """A synthesis method family (axis, unit and unit cost: ``axisrl.synthesis``), what it makes
    here (``kind``: env, task, trajectory or simulator) and its default fidelity model."""

    family: MethodFamily
    kind: str
    fidelity: Mapping[str, Any]

    name = property(lambda self: self.family.name)
    axis = property(lambda self: self.family.axis)
    unit = property(lambda self: self.family.unit)
    unit_cost = property(lambda self: self.family.unit_cost)


def _method(name: str, kind: str, **fidelity: Any) -> Method:
    return Method(FAMILIES[name], kind, MappingProxyType(fidelity))


METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        _method("awm", "env", description_mismatch=0.15, unverifiable_goal=0.10),
        _method("genenv", "env", description_mismatch=0.25, unverifiable_goal=0.15),
        _method("dreamgym", "simulator", transition_error=0.15, reward_error=0.10),
        _method(
            "autoplay",
            "task",
            unsolvable=0.10,
            mislabelled=0.10,
            near_duplicate=0.30,
            filter="executes",
            filter_recall=1.0,
        ),
        _method(
            "sca",
            "task",
            unsolvable=0.20,
            mislabelled=0.20,
            near_duplicate=0.10,
            filter="solution_and_failures",
            filter_recall=0.8,
        ),
        _method(
            "rlve", "task", unsolvable=0.20, mislabelled=0.05, near_duplicate=0.15, filter="executes", filter_recall=1.0
        ),
        _method("swirl", "trajectory", step_error=0.15, judge_recall=0.6),
    )
}
"""The method families and their default fidelity models (the config's ``sources.methods``
mirrors these defaults)."""


def method_fidelity(name: str, overrides: Mapping[str, Any] | None = None, common_core: bool = False) -> dict[str, Any]:
    """The method's fidelity dict: defaults, then ``overrides`` (a ``unit_cost`` among them is
    pricing's and is ignored), then the common core's filter if asked. Unknown names and
    out-of-range values raise, so a config typo cannot silently fall back to a default."""
    if name not in METHODS:
        raise ValueError(f"unknown synthesis method {name!r}; known: {sorted(METHODS)}")
    method = METHODS[name]
    given = {k: v for k, v in (overrides or {}).items() if k != "unit_cost"}
    unknown = set(given) - set(method.fidelity)
    if unknown:
        raise ValueError(f"unknown fidelity parameters for {name}: {sorted(unknown)}; known: {sorted(method.fidelity)}")
    fid = {**method.fidelity, **given}
    for key, value in fid.items():
        if key == "filter":
            if value not in FILTERS:
                raise ValueError(f"{name}.filter must be one of {FILTERS}, got {value!r}")
        elif not 0.0 <= value <= 1.0:
            raise ValueError(f"{name}.{key} must be a probability, got {value!r}")
    if method.kind == "task" and sum(fid[d] for d in TASK_DEFECTS) > 1.0:
        raise ValueError(f"{name}: {' + '.join(TASK_DEFECTS)} must not exceed 1")
    if common_core and method.kind == "task":
        fid.update(filter="solution", filter_recall=1.0)
    if common_core and method.kind == "trajectory":
        fid["judge_recall"] = 1.0
    return fid


@dataclass
class SyntheticPool:
    """Rows of every requested method (``source`` says which) and per-method generation
    statistics: ``drafts`` made and ``kept`` (in the method's unit), ``injected_<defect>`` among
    the drafts and ``defect_<defect>`` among the kept rows."""

    envs: list[dict[str, Any]] = field(default_factory=list)
    tasks: list[dict[str, Any]] = field(default_factory=list)
    trajectories: list[dict[str, Any]] = field(default_factory=list)
    stats: dict[str, dict[str, Any]] = field(default_factory=dict)


def generate_synthetic(
    envs: list[dict[str, Any]], tasks: list[dict[str, Any]], cfg: Mapping[str, Any]
) -> SyntheticPool:
    """Synthetic rows of every method in ``cfg["methods"]`` (``{name: fidelity overrides}``) from
    the real training pool rows ``envs`` and ``tasks``.

    ``cfg``: ``seed``; ``envs`` (environments per environment method); ``tasks_per_env`` (tasks per
    real environment for task methods, and per synthetic environment unless ``env_tasks`` is
    given); ``task_envs`` (task and trajectory methods work on the first this-many real
    environments in pool order, the rule the mixtures read); ``trajectories_per_task`` (SWiRL,
    per real task of those environments); ``common_core`` (default false). ``dreamgym`` makes no
    rows: its artifact is ``SimulatedEnv``, run at training time.
    """
    seed, core = cfg["seed"], bool(cfg.get("common_core", False))
    fidelity = {name: method_fidelity(name, overrides, core) for name, overrides in cfg["methods"].items()}
    out = SyntheticPool()
    real_specs = {env["env_id"]: _spec(env) for env in envs}
    targets = envs[: cfg["task_envs"]]
    real_tasks: dict[str, list[dict[str, Any]]] = {}
    for task in tasks:
        real_tasks.setdefault(task["env_id"], []).append(task)
    for name, fid in fidelity.items():
        kind = METHODS[name].kind
        if kind == "env":
            n_tasks = cfg.get("env_tasks", cfg["tasks_per_env"])
            out.stats[name] = _env_method(
                name, fid, core, seed, cfg["envs"], n_tasks, _world_shape(real_specs.values()), out
            )
        elif kind == "task":
            out.stats[name] = _task_method(name, fid, seed, cfg["tasks_per_env"], targets, real_specs, real_tasks, out)
        elif kind == "trajectory":
            out.stats[name] = _trajectory_method(
                name, fid, seed, cfg["trajectories_per_task"], targets, real_specs, real_tasks, out
            )
    return out


def _spec(env: Mapping[str, Any]) -> Spec:
    return json.loads(env["spec"]) if isinstance(env["spec"], str) else env["spec"]


def _stats(
    method: str, drafts: int, kept: int, injected: Mapping[str, int], defects: Mapping[str, int]
) -> dict[str, Any]:
    return {
        "unit": METHODS[method].unit,
        "drafts": drafts,
        "kept": kept,
        **{f"injected_{d}": n for d, n in injected.items()},
        **{f"defect_{d}": n for d, n in defects.items()},
    }


# ------------------------------------------------------------------------------------- verifying


def replay(spec: Spec, task: Mapping[str, Any], calls: Sequence[Mapping[str, Any]]) -> tuple[ToolworldEnv, bool]:
    """The environment after playing ``calls`` (stopping when the episode ends) and whether every
    call ran without an error observation."""
    env = ToolworldEnv(spec, task)
    env.reset()
    clean = True
    for call in calls:
        if env.done:
            break
        clean &= "error" not in env.step(call).observation
    return env, clean


def _meets(env: ToolworldEnv, goal: str, answer: str | None) -> bool:
    """Whether the state and answer ``env`` ended with satisfy another goal than its task's."""
    rt = env.runtime
    final = rt.initial if env.state is None else env.state
    met, total = rt.check(Goal.parse(goal), answer, rt.initial, final, env.answer)
    return met == total


def _filter_passes(spec: Spec, task: Mapping[str, Any], name: str) -> bool:
    """Whether ``task`` survives the filter ``name`` (see ``FILTERS``)."""
    calls = json.loads(task["reference"])
    env, clean = replay(spec, task, calls)
    if name == "executes":
        return clean
    if not (clean and env.verify().success):
        return False
    if name == "solution":
        return True
    tool_calls = [c for c in calls if c["name"] != FINISH]
    failures = ([], tool_calls[:-1])  # a no-op run and the truncated reference, neither answering
    return not any(replay(spec, task, failure)[0].verify().success for failure in failures)


# ------------------------------------------------------------------------------------- drafting


def _fresh_tasks(
    spec: Spec, env_id: str, batch: int, seed: int, exclude: set[tuple[str, str]]
) -> Iterator[dict[str, Any]]:
    """New tasks for one environment: ``generate_tasks`` rounds on fresh seeds, skipping any task
    (reference and goal) seen before or in ``exclude``; exhausted after a round brings nothing new."""
    seen = set(exclude)
    for round_index in range(DRAFT_ROUNDS):
        fresh = [
            t
            for t in generate_tasks(spec, env_id, batch, derive_seed(seed, round_index))
            if (t["reference"], t["goal"]) not in seen
        ]
        if not fresh:
            return
        seen.update((t["reference"], t["goal"]) for t in fresh)
        yield from fresh


def _row(task: Mapping[str, Any], method: str, defect: str | None) -> dict[str, Any]:
    """A synthetic task row: the real columns, a synthetic id, source and defect. The id hashes a
    tagged list, never the plain string real ids hash, so the two cannot collide."""
    row = {key: task.get(key) for key in TASK_KEYS} | {"split": SPLIT, "tier": None}
    row["task_id"] = short_hash(
        ["toolworld-synthetic-task", method, row["env_id"], row["instruction"], row["reference"], row["goal"]]
    )
    return {**row, "source": method, "defect": defect}


def _with_goal(task: Mapping[str, Any], goal: Mapping[str, Any] | str, answer: str | None) -> dict[str, Any]:
    goal = json.loads(goal) if isinstance(goal, str) else goal
    return {**task, "goal": canonical_json(goal), "answer": answer, "verifier_sig": short_hash(verifier_shape(goal))}


# ------------------------------------------------------------------------------------- env methods


class WorldShape(NamedTuple):
    """Ranges of the real pool that synthetic worlds are drawn within."""

    tables: tuple[int, int]
    """Fewest and most tables per world."""
    rows: tuple[int, int]
    """Fewest and most rows per table."""
    max_steps: int


def _world_shape(specs: Iterable[Spec]) -> WorldShape:
    """Table count range, rows-per-table range and step limit of the real pool, which synthetic
    worlds are drawn within (the pool's own config is not passed here)."""
    tables, rows, steps = [], [], []
    for spec in specs:
        tables.append(len(spec["tables"]))
        rows += [len(r) for r in spec["state"].values()]
        steps.append(spec["max_steps"])
    return WorldShape((min(tables), max(tables)), (min(rows), max(rows)), max(steps))


def _env_method(
    method: str,
    fid: Mapping[str, Any],
    core: bool,
    seed: int,
    n_envs: int,
    n_tasks: int,
    shape: WorldShape,
    out: SyntheticPool,
) -> dict[str, Any]:
    """New worlds (one unedited variant and one content each) with their tasks. World seeds
    ``derive_seed(seed, "synthetic", method, i)`` never coincide with real or held-out ones."""
    tables, rows, max_steps = shape
    injected = {"description_mismatch": 0, "unverifiable_goal": 0}
    kept_defects = dict(injected)
    task_drafts = tasks_kept = 0
    for i in range(n_envs):
        world_seed = derive_seed(seed, "synthetic", method, i)
        rng = random.Random(derive_seed(world_seed, "fidelity"))
        structure, _ = sample_variant(sample_world(world_seed, tables), None)
        content_seed = derive_seed(world_seed, "content")
        spec = build_spec(
            structure,
            sample_state(structure, content_seed, "train", rows),
            "train",
            derive_seed(world_seed, "skin"),
            max_steps,
        )
        documented, actual, defect = spec, spec, None
        if rng.random() < fid["description_mismatch"]:
            confused = mismatch(spec, rng)
            if confused is not None:
                (documented, actual), defect = confused, "description_mismatch"
        spec_json = canonical_json(documented)
        rt = compile_spec(documented)
        env = short_hash(spec_json)
        out.envs.append(
            {
                "env_id": env,
                "world_id": world_id(world_seed),
                "world_seed": world_seed,
                "variant_index": 0,
                "variant_seed": None,
                "content_seed": content_seed,
                "skin_index": 0,
                "split": SPLIT,
                "tier": None,
                "n_tables": len(rt.tables),
                "n_tools": len(rt.tools),
                "n_rows": sum(len(r) for r in rt.initial.values()),
                "edits": [],
                "vocabulary": rt.vocabulary(),
                "spec": spec_json,
                "source": method,
                "defect": defect,
            }
        )
        if defect:
            injected[defect] += 1
            kept_defects[defect] += 1
        kept = 0
        candidates = _fresh_tasks(actual, env, n_tasks, derive_seed(world_seed, "tasks"), set())
        for _, task in zip(range(4 * n_tasks + 16), candidates):
            if kept == n_tasks:
                break
            task_drafts += 1
            task_defect = None
            if rng.random() < fid["unverifiable_goal"]:
                task_defect = "unverifiable_goal"
                injected[task_defect] += 1
                task = _with_goal(
                    task, unreachable_goal(compile_spec(actual), json.loads(task["goal"]), rng), task["answer"]
                )
            if core and not _filter_passes(documented, task, "solution"):
                continue
            out.tasks.append(_row(task, method, task_defect))
            kept += 1
            kept_defects["unverifiable_goal"] += task_defect is not None
        tasks_kept += kept
    stats = _stats(method, n_envs, n_envs, injected, kept_defects)
    return {**stats, "task_drafts": task_drafts, "tasks_kept": tasks_kept}


# ------------------------------------------------------------------------------------- task methods


def _task_method(
    method: str,
    fid: Mapping[str, Any],
    seed: int,
    n_tasks: int,
    targets: Sequence[Mapping[str, Any]],
    specs: Mapping[str, Spec],
    real_tasks: Mapping[str, list[dict[str, Any]]],
    out: SyntheticPool,
) -> dict[str, Any]:
    """Up to ``n_tasks`` synthetic tasks per target environment: drafts (new ``generate_tasks``
    tasks, or re-worded copies of the environment's real tasks), corrupted per the mix, then the
    method's filter, which rejects a draft it flags with probability ``filter_recall``. Rejected
    drafts are replaced by new ones, at most ``4 * n_tasks + 16`` drafts per environment."""
    injected = dict.fromkeys(TASK_DEFECTS, 0)
    kept_defects = dict(injected)
    drafts = kept_total = 0
    for env in targets:
        env_id, spec = env["env_id"], specs[env["env_id"]]
        rng = random.Random(derive_seed(seed, "synthetic", method, env_id))
        own = real_tasks.get(env_id, [])
        fresh = _fresh_tasks(
            spec,
            env_id,
            n_tasks,
            derive_seed(seed, "synthetic", method, env_id, "drafts"),
            {(t["reference"], t["goal"]) for t in own},
        )
        kept: list[dict[str, Any]] = []
        seen: set[str] = set()
        for _ in range(4 * n_tasks + 16):
            if len(kept) == n_tasks:
                break
            draft = _draft(rng, fid, spec, own, kept, fresh)
            if draft is None:
                break
            task, defect = draft
            drafts += 1
            if defect:
                injected[defect] += 1
            caught = task is not None and not _filter_passes(spec, task, fid["filter"])
            if task is None or (caught and rng.random() < fid["filter_recall"]):
                continue
            row = _row(task, method, defect)
            if row["task_id"] in seen:
                continue
            seen.add(row["task_id"])
            kept.append(row)
            if defect:
                kept_defects[defect] += 1
        out.tasks += kept
        kept_total += len(kept)
    return _stats(method, drafts, kept_total, injected, kept_defects)


def _draft(
    rng: random.Random,
    fid: Mapping[str, Any],
    spec: Spec,
    own: Sequence[Mapping[str, Any]],
    kept: Sequence[Mapping[str, Any]],
    fresh: Iterator[dict[str, Any]],
) -> tuple[dict[str, Any] | None, str | None] | None:
    """One draft and its defect; the task is None when no wrong verifier fits a mislabelled
    draft (a wasted draft). None when the environment has no new task left to draft."""
    u = rng.random()
    if u < fid["unsolvable"]:
        defect: str | None = "unsolvable"
    elif u < fid["unsolvable"] + fid["mislabelled"]:
        defect = "mislabelled"
    elif u < fid["unsolvable"] + fid["mislabelled"] + fid["near_duplicate"] and own:
        original = rng.choice(own)
        return {**original, "instruction": reword(original["instruction"], rng)}, "near_duplicate"
    else:
        defect = None
    task = next(fresh, None)
    if task is None:
        return None
    if defect == "unsolvable":
        goal = unreachable_goal(compile_spec(spec), json.loads(task["goal"]), rng)
        return _with_goal(task, goal, task["answer"]), defect
    if defect == "mislabelled":
        return _mislabel(rng, spec, task, [*own, *kept]), defect
    return task, None


def _mislabel(
    rng: random.Random, spec: Spec, task: Mapping[str, Any], others: Sequence[Mapping[str, Any]]
) -> dict[str, Any] | None:
    """``task`` with the goal and expected answer of another task of its environment that its
    own reference does not satisfy (so the reward asks for something the instruction did not)."""
    env, _ = replay(spec, task, json.loads(task["reference"]))
    donors = [o for o in others if o["goal"] != task["goal"]]
    for donor in rng.sample(donors, min(DONORS, len(donors))):
        if not _meets(env, donor["goal"], donor["answer"]):
            return _with_goal(task, donor["goal"], donor["answer"])
    return None


# ------------------------------------------------------------------------------------- trajectories


def _trajectory_method(
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
    stats = _stats(method, drafts, kept_total, {"step_error": injected_steps}, {"step_error": kept_defective})
    return {**stats, "error_prone_steps": prone_steps}
