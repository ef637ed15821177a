"""The training pool and the held-out pool (tiers T0, T1, T2) as flat rows for polars.

Training: ``n_worlds`` worlds x ``variants_per_world`` variants (variant 0 unedited) x
``contents_per_variant`` contents, plus ``reskins_per_world`` re-skinned copies of each world's
first environment (raw duplicates that signature dedup must collapse).

Placebo: ``placebo_contents`` fresh contents (``placebo_tasks_per_env`` tasks each) of the first training world's
unedited variant, so many environments (distinct ``env_id``) under one signature: scaling them scales procedural
seeds, not environments (the placebo row of Table 7).

Held-out, all from the ``heldout.seed`` stream: T0 = a training (world, variant) with new
content; T1 = a training world with a new variant whose (sig_api, sig_schema, sig_sem) identity no
training env has (a verifier-only change does not count as unseen);
T2 = new worlds named from the held-out lexicon pool, rejection-sampled until none of their
sig_api, sig_schema or sig_sem occurs in training.

Validation (tier V, ``heldout.validation_worlds``): worlds made like T2's from a seed range of their
own, none of whose signatures occurs in training or in T2. They are what a learner's settings are
chosen on, so that T2 stays the test set; no law and no "all" pool reads them.

Pretraining (tier P, ``generate_pretrain_pool``): the tiny study's base is pretrained on worlds made
like T2's from the ``pretrain.seed`` range, named from the training lexicon, none of whose
sig_api, sig_schema, sig_sem or skin occurs in the training, placebo or held-out pools (or earlier
in itself): the base has seen none of the worlds the study trains or tests on.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from axisrl.domains.toolworld.canon import canonical_json, derive_seed, short_hash
from axisrl.domains.toolworld.runtime import compile_spec
from axisrl.domains.toolworld.signatures import signatures
from axisrl.domains.toolworld.tasks import generate_tasks
from axisrl.domains.toolworld.world import (
    Spec,
    Structure,
    build_spec,
    reskin,
    sample_state,
    sample_variant,
    sample_world,
)

PRETRAIN_TIER = "P"
T1_ATTEMPTS = 64
T2_WORLD_ATTEMPTS = 64
T2_VARIANT_ATTEMPTS = 16
SIGNATURE_AXES = ("sig_api", "sig_schema", "sig_sem")


@dataclass
class Pool:
    """Lists of flat dicts, one row per environment or task: the training pool, the held-out pool
    and the placebo pool (one training environment's structure under many procedural contents)."""

    envs: list[dict[str, Any]] = field(default_factory=list)
    tasks: list[dict[str, Any]] = field(default_factory=list)
    heldout_envs: list[dict[str, Any]] = field(default_factory=list)
    heldout_tasks: list[dict[str, Any]] = field(default_factory=list)
    placebo_envs: list[dict[str, Any]] = field(default_factory=list)
    placebo_tasks: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class _Origin:
    """Where an environment comes from: the seeds behind it and its place in the pool."""

    world_seed: int
    variant_index: int
    variant_seed: int | None
    content_seed: int
    skin_index: int = 0
    split: str = "train"
    tier: str | None = None


def world_id(world_seed: int) -> str:
    return short_hash(["toolworld-world", world_seed])


class _Synthesizer:
    def __init__(self, cfg: Mapping[str, Any]) -> None:
        self.cfg = cfg
        self.tables = (cfg["tables"]["min"], cfg["tables"]["max"])
        self.rows = (cfg["rows_per_table"]["min"], cfg["rows_per_table"]["max"])
        self._worlds: dict[int, Structure] = {}

    def world(self, world_seed: int) -> Structure:
        if world_seed not in self._worlds:
            self._worlds[world_seed] = sample_world(world_seed, self.tables)
        return self._worlds[world_seed]

    def spec(self, structure: Structure, origin: _Origin, pool: str) -> Spec:
        state = sample_state(structure, origin.content_seed, pool, self.rows)
        return build_spec(structure, state, pool, derive_seed(origin.world_seed, "skin"), self.cfg["max_steps"])

    def emit(
        self,
        spec: Spec,
        origin: _Origin,
        edits: list[str],
        n_tasks: int,
        task_seed: int,
        envs: list[dict[str, Any]],
        tasks: list[dict[str, Any]],
    ) -> None:
        spec_json = canonical_json(spec)
        env = short_hash(spec_json)
        rt = compile_spec(spec)
        envs.append(
            {
                "env_id": env,
                "world_id": world_id(origin.world_seed),
                "world_seed": origin.world_seed,
                "variant_index": origin.variant_index,
                "variant_seed": origin.variant_seed,
                "content_seed": origin.content_seed,
                "skin_index": origin.skin_index,
                "split": origin.split,
                "tier": origin.tier,
                "n_tables": len(rt.tables),
                "n_tools": len(rt.tools),
                "n_rows": sum(len(rows) for rows in rt.initial.values()),
                "edits": list(edits),
                "vocabulary": rt.vocabulary(),
                "spec": spec_json,
            }
        )
        for task in generate_tasks(spec, env, n_tasks, task_seed):
            tasks.append({**task, "split": origin.split, "tier": origin.tier})


def _task_seed(root: int, origin: _Origin) -> int:
    """Independent of the skin, so a re-skin gets the same tasks in its own names."""
    return derive_seed(root, "tasks", origin.world_seed, origin.variant_seed, origin.content_seed)


def generate_pool(cfg: Mapping[str, Any]) -> Pool:
    """The training and held-out pools for a validated ``synthesize`` config section."""
    synth = _Synthesizer(cfg)
    pool = Pool()
    root, n_tasks = cfg["seed"], cfg["tasks_per_env"]
    n_worlds, n_variants = cfg["n_worlds"], cfg["variants_per_world"]
    variants: dict[tuple[int, int], tuple[Structure, list[str], int | None]] = {}
    train_sigs: list[dict[str, str]] = []

    for w in range(n_worlds):
        world_seed = derive_seed(root, "world", w)
        base = synth.world(world_seed)
        for v in range(n_variants):
            variant_seed = None if v == 0 else derive_seed(root, "variant", w, v)
            structure, edits = sample_variant(base, variant_seed)
            variants[(w, v)] = (structure, edits, variant_seed)
            for c in range(cfg["contents_per_variant"]):
                origin = _Origin(world_seed, v, variant_seed, derive_seed(root, "content", w, v, c))
                spec = synth.spec(structure, origin, "train")
                if v == 0 and c == 0:
                    first, first_origin = spec, origin
                train_sigs.append(signatures(spec))
                synth.emit(spec, origin, edits, n_tasks, _task_seed(root, origin), pool.envs, pool.tasks)
        for r in range(cfg["reskins_per_world"]):
            skinned = reskin(first, derive_seed(root, "reskin", w, r))
            copy = _Origin(world_seed, 0, None, first_origin.content_seed, skin_index=r + 1)
            train_sigs.append(signatures(skinned))
            synth.emit(skinned, copy, [], n_tasks, _task_seed(root, first_origin), pool.envs, pool.tasks)

    structure, _, _ = variants[(0, 0)]
    for c in range(cfg["placebo_contents"]):
        origin = _Origin(
            derive_seed(root, "world", 0), 0, None, derive_seed(root, "placebo-content", c), split="placebo"
        )
        synth.emit(
            synth.spec(structure, origin, "train"),
            origin,
            [],
            cfg["placebo_tasks_per_env"],
            _task_seed(root, origin),
            pool.placebo_envs,
            pool.placebo_tasks,
        )

    _heldout(cfg, synth, variants, train_sigs, pool)
    return pool


def _heldout(
    cfg: Mapping[str, Any],
    synth: _Synthesizer,
    variants: dict[tuple[int, int], tuple[Structure, list[str], int | None]],
    train_sigs: list[dict[str, str]],
    pool: Pool,
) -> None:
    held = cfg["heldout"]
    hs, n_tasks = held["seed"], held["tasks_per_env"]
    n_worlds, n_variants = cfg["n_worlds"], cfg["variants_per_world"]
    rng = random.Random(derive_seed(hs, "tiers"))
    world_seeds = [derive_seed(cfg["seed"], "world", w) for w in range(n_worlds)]
    out_envs, out_tasks = pool.heldout_envs, pool.heldout_tasks

    pairs = rng.sample(sorted(variants), len(variants))
    for i in range(held["t0_envs"]):
        w, v = pairs[i % len(pairs)]
        structure, edits, variant_seed = variants[(w, v)]
        origin = _Origin(world_seeds[w], v, variant_seed, derive_seed(hs, "t0-content", i), split="heldout", tier="T0")
        spec = synth.spec(structure, origin, "train")
        synth.emit(spec, origin, edits, n_tasks, _task_seed(hs, origin), out_envs, out_tasks)

    seen = {tuple(s[k] for k in SIGNATURE_AXES) for s in train_sigs}
    worlds = rng.sample(range(n_worlds), n_worlds)
    for i in range(held["t1_envs"]):
        w = worlds[i % n_worlds]
        for attempt in range(T1_ATTEMPTS):
            variant_seed = derive_seed(hs, "t1-variant", i, attempt)
            structure, edits = sample_variant(synth.world(world_seeds[w]), variant_seed)
            origin = _Origin(
                world_seeds[w],
                n_variants + i,
                variant_seed,
                derive_seed(hs, "t1-content", i),
                split="heldout",
                tier="T1",
            )
            spec = synth.spec(structure, origin, "train")
            sig = signatures(spec)
            if tuple(sig[k] for k in SIGNATURE_AXES) not in seen:
                break
        else:
            raise ValueError(f"T1: no unseen variant of training world {w} in {T1_ATTEMPTS} attempts")
        synth.emit(spec, origin, edits, n_tasks, _task_seed(hs, origin), out_envs, out_tasks)

    taken = {axis: {s[axis] for s in train_sigs} for axis in (*SIGNATURE_AXES, "skin")}
    train_words = {word for env in pool.envs for word in env["vocabulary"]}
    for tier, n_unseen in (("T2", held["t2_worlds"]), ("V", held["validation_worlds"])):
        emitted: list[dict[str, str]] = []
        stream = _Stream(hs, "t2" if tier == "T2" else "validation", tier, "heldout", held["t2_variants_per_world"])
        for i in range(n_unseen):
            accepted = _unseen_world(synth, i, taken, stream)
            if accepted is None:
                raise ValueError(
                    f"{tier}: no unseen world {i} whose variants avoid every sig_api, sig_schema and sig_sem of "
                    f"training{' and T2' if tier == 'V' else ''} in {T2_WORLD_ATTEMPTS} attempts; the pools may "
                    "cover this config's structure space (raise tables.max or lower n_worlds / variants_per_world)"
                )
            for spec, origin, edits in accepted:
                emitted.append(signatures(spec))
                synth.emit(spec, origin, edits, n_tasks, _task_seed(hs, origin), out_envs, out_tasks)
                shared = train_words.intersection(out_envs[-1]["vocabulary"])
                if shared:
                    raise ValueError(f"{tier} world {i} shares vocabulary with training: {sorted(shared)[:5]}")
        for axis, values in taken.items():
            values.update(sig[axis] for sig in emitted)


@dataclass(frozen=True)
class _Stream:
    """Where a tier of unseen worlds comes from: its seed root and stream name, its tier and split,
    the lexicon pool it is named from and its variants per world."""

    root: int
    name: str
    tier: str
    split: str
    variants: int
    lexicon: str = "heldout"


def _unseen_world(
    synth: _Synthesizer, i: int, taken: dict[str, set[str]], stream: _Stream
) -> list[tuple[Spec, _Origin, list[str]]] | None:
    """World ``i`` of an unseen tier (T2, V or P, each from its own seed range): its environments,
    or None if every attempt collides with a signature in ``taken``."""
    root, name = stream.root, stream.name

    def fresh(spec: Spec) -> bool:
        sig = signatures(spec)
        return all(sig[axis] not in taken[axis] for axis in (*SIGNATURE_AXES, "skin"))

    for attempt in range(T2_WORLD_ATTEMPTS):
        world_seed = derive_seed(root, f"{name}-world", i, attempt)
        base = synth.world(world_seed)
        accepted = []
        for v in range(stream.variants):
            for variant_attempt in range(T2_VARIANT_ATTEMPTS if v else 1):
                variant_seed = None if v == 0 else derive_seed(root, f"{name}-variant", i, attempt, v, variant_attempt)
                structure, edits = sample_variant(base, variant_seed)
                origin = _Origin(
                    world_seed,
                    v,
                    variant_seed,
                    derive_seed(root, f"{name}-content", i, v),
                    split=stream.split,
                    tier=stream.tier,
                )
                spec = synth.spec(structure, origin, stream.lexicon)
                if fresh(spec):
                    accepted.append((spec, origin, edits))
                    break
            else:
                break
        if len(accepted) == stream.variants:
            return accepted
    return None


def generate_pretrain_pool(
    cfg: Mapping[str, Any], pretrain: Mapping[str, Any], taken: Mapping[str, set[str]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The pretraining pool (tier P, see the module docstring): ``pretrain.worlds`` worlds of
    ``pretrain.variants_per_world`` variants, ``pretrain.tasks_per_env`` tasks each, built with the
    ``synthesize`` section ``cfg``'s sizes; ``taken``: the signatures (``sig_api``, ``sig_schema``,
    ``sig_sem``, ``skin``) of every pool the study trains or tests on, none of which it may share.
    Returns its environment rows and task rows."""
    synth = _Synthesizer(cfg)
    taken = {axis: set(taken[axis]) for axis in (*SIGNATURE_AXES, "skin")}
    stream = _Stream(pretrain["seed"], "pretrain", PRETRAIN_TIER, "pretrain", pretrain["variants_per_world"], "train")
    envs: list[dict[str, Any]] = []
    tasks: list[dict[str, Any]] = []
    for i in range(pretrain["worlds"]):
        accepted = _unseen_world(synth, i, taken, stream)
        if accepted is None:
            raise ValueError(
                f"pretrain: no world {i} whose variants avoid every signature of the study's pools in "
                f"{T2_WORLD_ATTEMPTS} attempts; lower pretrain.worlds or pretrain.variants_per_world"
            )
        for spec, origin, edits in accepted:
            sig = signatures(spec)
            for axis in taken:
                taken[axis].add(sig[axis])
            synth.emit(spec, origin, edits, pretrain["tasks_per_env"], _task_seed(stream.root, origin), envs, tasks)
    return envs, tasks
