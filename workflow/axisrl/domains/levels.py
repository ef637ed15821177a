"""A procedural domain's pools assembled from its levels: toolworld's, webworld's and repoworld's tiers.

A domain supplies a ``LevelSynthesizer``: how a world (L2) is drawn from its seed, a variant (L1)
with its declared edits, a spec from a structure and a content (L0), a re-skin, the name-free
signatures, an environment's ids, size and vocabulary, and its tasks. ``assemble_pool`` draws the rest,
the same way for every domain. Training: ``n_worlds`` worlds x ``variants_per_world`` variants (the
first unedited) x ``contents_per_variant`` contents, plus ``reskins_per_world`` re-skinned copies of
each world's first environment: contents and re-skins are raw duplicates that signature dedup
collapses. Placebo: ``placebo_contents`` contents of the first world's unedited variant. Held-out,
from the ``heldout.seed`` stream: T0 = a training (world, variant) with new content; T1 = a training
world under a new variant whose (sig_api, sig_schema, sig_sem) no training environment has; T2 = new
worlds, rejection-sampled until none of their sig_api, sig_schema, sig_sem or skin occurs in
training, and sharing no vocabulary word with it; V = worlds drawn like T2's from a seed stream of
their own, sharing no signature with training or T2. Pretraining (tier P, ``pretrain_pool``): worlds
drawn like T2's from the ``pretrain.seed`` stream, sharing no signature with any of those pools. Every
seed stream's name starts with the domain's prefix (``Streams``: ``<domain>-<world word>``,
``<domain>-variant`` ...; toolworld's streams are older than the other domains' and have none), so
each domain's pools are its own.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, NamedTuple, Protocol

from axisrl.domains.canon import canonical_json, derive_seed
from axisrl.domains.pool import PRETRAIN_TIER, Pool

T1_ATTEMPTS = 64
T2_WORLD_ATTEMPTS = 64
T2_VARIANT_ATTEMPTS = 16
SIGNATURE_AXES = ("sig_api", "sig_schema", "sig_sem")

Spec = dict[str, Any]


@dataclass(frozen=True)
class Origin:
    """Where an environment comes from: the seeds behind it and its place in the pool."""

    world_seed: int
    variant_index: int
    variant_seed: int | None
    content_seed: int
    skin_index: int = 0
    split: str = "train"
    tier: str | None = None


@dataclass(frozen=True)
class Streams:
    """How a domain's seed streams are named and its pretraining tier drawn: ``prefix`` starts every
    stream's name; the pretraining worlds are named from the ``pretrain_lexicon`` word pool and their
    rows carry the split ``pretrain_split``."""

    prefix: str
    pretrain_lexicon: str = "heldout"
    pretrain_split: str = "train"


class LevelSynthesizer(Protocol):
    """What a domain tells ``assemble_pool``: its name and the word its seed streams call a world
    (``site`` for webworld), how its seed streams are named (``streams``: ``<domain>-`` for every domain
    but toolworld, whose streams are older and have no prefix), and how each level is drawn."""

    domain: str
    world_word: str
    streams: Streams

    def world(self, world_seed: int) -> Any: ...

    def variant(self, base: Any, variant_seed: int | None) -> tuple[Any, list[str]]: ...

    def spec(self, structure: Any, origin: Origin, pool: str) -> Spec: ...

    def reskin(self, spec: Spec, seed: int) -> Spec: ...

    def signatures(self, spec: Spec) -> dict[str, str]: ...

    def env_id(self, spec: Spec) -> str: ...

    def world_id(self, world_seed: int) -> str: ...

    def shape(self, spec: Spec) -> EnvShape: ...

    def tasks(self, spec: Spec, env_id: str, n_tasks: int, seed: int) -> Iterable[dict[str, Any]]: ...


class EnvShape(NamedTuple):
    """What an environment row says of its size (each domain says what it counts: toolworld's
    tables, tools and rows) and the words it names things with (T2 shares none with training)."""

    n_tables: int
    n_tools: int
    n_rows: int
    vocabulary: list[str]


def emit(
    synth: LevelSynthesizer,
    spec: Spec,
    origin: Origin,
    edits: list[str],
    n_tasks: int,
    seed: int,
    envs: list[dict[str, Any]],
    tasks: list[dict[str, Any]],
) -> None:
    """One environment's row (toolworld's columns) and its tasks' rows."""
    ident = synth.env_id(spec)
    envs.append(
        {
            "env_id": ident,
            "world_id": synth.world_id(origin.world_seed),
            "world_seed": origin.world_seed,
            "variant_index": origin.variant_index,
            "variant_seed": origin.variant_seed,
            "content_seed": origin.content_seed,
            "skin_index": origin.skin_index,
            "split": origin.split,
            "tier": origin.tier,
            **synth.shape(spec)._asdict(),
            "edits": list(edits),
            "spec": canonical_json(spec),
        }
    )
    for task in synth.tasks(spec, ident, n_tasks, seed):
        tasks.append({**task, "split": origin.split, "tier": origin.tier})


def draw_variant(
    structure: Any,
    variant_seed: int | None,
    copy: Callable[[Any], Any],
    options: Callable[[Any], Mapping[str, list[str]]],
    apply: Callable[[Any, str, random.Random], None],
) -> tuple[Any, list[str]]:
    """A variant (L1) as toolworld draws one: 1-3 declared edits from ``variant_seed``, each from a
    level (``options``: level -> the edits it offers now) chosen uniformly among those that offer
    one, applied in order; ``None`` is the unedited structure."""
    edited = copy(structure)
    if variant_seed is None:
        return edited, []
    rng = random.Random(derive_seed(variant_seed, "edits"))
    edits: list[str] = []
    for _ in range(rng.choice((1, 1, 2, 2, 3))):
        offered = {level: opts for level, opts in options(edited).items() if opts}
        edit = rng.choice(offered[rng.choice(sorted(offered))])
        apply(edited, edit, rng)
        edits.append(edit)
    return edited, edits


def task_seed(synth: LevelSynthesizer, root: int, origin: Origin) -> int:
    """Independent of the skin, so a re-skin gets the same tasks in its own names."""
    return derive_seed(
        root, f"{synth.streams.prefix}tasks", origin.world_seed, origin.variant_seed, origin.content_seed
    )


def assemble_pool(cfg: Mapping[str, Any], synth: LevelSynthesizer) -> Pool:
    """The training, placebo and held-out pools for a ``synthesize`` config section."""
    pool = Pool()
    prefix = synth.streams.prefix
    root, n_tasks = cfg["seed"], cfg["tasks_per_env"]
    n_worlds, n_variants = cfg["n_worlds"], cfg["variants_per_world"]
    variants: dict[tuple[int, int], tuple[Any, list[str], int | None]] = {}
    train_sigs: list[dict[str, str]] = []

    for w in range(n_worlds):
        world_seed = derive_seed(root, f"{prefix}{synth.world_word}", w)
        base = synth.world(world_seed)
        for v in range(n_variants):
            variant_seed = None if v == 0 else derive_seed(root, f"{prefix}variant", w, v)
            structure, edits = synth.variant(base, variant_seed)
            variants[(w, v)] = (structure, edits, variant_seed)
            for c in range(cfg["contents_per_variant"]):
                origin = Origin(world_seed, v, variant_seed, derive_seed(root, f"{prefix}content", w, v, c))
                spec = synth.spec(structure, origin, "train")
                if v == 0 and c == 0:
                    first, first_origin = spec, origin
                train_sigs.append(synth.signatures(spec))
                emit(synth, spec, origin, edits, n_tasks, task_seed(synth, root, origin), pool.envs, pool.tasks)
        for r in range(cfg.get("reskins_per_world", 0)):
            skinned = synth.reskin(first, derive_seed(root, f"{prefix}reskin", w, r))
            copy = Origin(world_seed, 0, None, first_origin.content_seed, skin_index=r + 1)
            train_sigs.append(synth.signatures(skinned))
            emit(synth, skinned, copy, [], n_tasks, task_seed(synth, root, first_origin), pool.envs, pool.tasks)

    structure, _, _ = variants[(0, 0)]
    first_world = derive_seed(root, f"{prefix}{synth.world_word}", 0)
    for c in range(cfg.get("placebo_contents", 0)):
        origin = Origin(first_world, 0, None, derive_seed(root, f"{prefix}placebo-content", c), split="placebo")
        emit(
            synth,
            synth.spec(structure, origin, "train"),
            origin,
            [],
            cfg.get("placebo_tasks_per_env", n_tasks),
            task_seed(synth, root, origin),
            pool.placebo_envs,
            pool.placebo_tasks,
        )

    _heldout(cfg, synth, variants, train_sigs, pool)
    return pool


def pretrain_pool(
    cfg: Mapping[str, Any], pretrain: Mapping[str, Any], taken: Mapping[str, set[str]], synth: LevelSynthesizer
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A domain's pretraining pool (tier P, what its tiny base is behaviour-cloned on), drawn like
    T2's: ``pretrain.worlds`` unseen worlds of ``pretrain.variants_per_world`` variants,
    ``pretrain.tasks_per_env`` tasks each, from a seed stream of their own; none shares a signature
    (or a skin) with ``taken``, the pools the study trains or tests on, nor with another P world."""
    taken = {axis: set(taken[axis]) for axis in (*SIGNATURE_AXES, "skin")}
    draws = synth.streams
    root, stream = pretrain["seed"], f"{draws.prefix}pretrain"
    envs: list[dict[str, Any]] = []
    tasks: list[dict[str, Any]] = []
    for i in range(pretrain["worlds"]):
        accepted = _unseen_world(
            synth, root, stream, PRETRAIN_TIER, i, pretrain["variants_per_world"], taken, draws.pretrain_lexicon
        )
        if accepted is None:
            raise ValueError(
                f"pretrain: no {synth.world_word} {i} whose variants avoid every signature of the study's pools in "
                f"{T2_WORLD_ATTEMPTS} attempts; lower pretrain.worlds or pretrain.variants_per_world"
            )
        for spec, origin, edits in accepted:
            sig = synth.signatures(spec)
            for axis in taken:
                taken[axis].add(sig[axis])
            origin = replace(origin, split=draws.pretrain_split)
            emit(synth, spec, origin, edits, pretrain["tasks_per_env"], task_seed(synth, root, origin), envs, tasks)
    return envs, tasks


def _heldout(
    cfg: Mapping[str, Any],
    synth: LevelSynthesizer,
    variants: dict[tuple[int, int], tuple[Any, list[str], int | None]],
    train_sigs: list[dict[str, str]],
    pool: Pool,
) -> None:
    held, prefix, word = cfg["heldout"], synth.streams.prefix, synth.world_word
    hs, n_tasks = held["seed"], held["tasks_per_env"]
    n_worlds, n_variants = cfg["n_worlds"], cfg["variants_per_world"]
    rng = random.Random(derive_seed(hs, f"{prefix}tiers"))
    world_seeds = [derive_seed(cfg["seed"], f"{prefix}{word}", w) for w in range(n_worlds)]
    out_envs, out_tasks = pool.heldout_envs, pool.heldout_tasks

    pairs = rng.sample(sorted(variants), len(variants))
    for i in range(held["t0_envs"]):
        w, v = pairs[i % len(pairs)]
        structure, edits, variant_seed = variants[(w, v)]
        origin = Origin(
            world_seeds[w], v, variant_seed, derive_seed(hs, f"{prefix}t0-content", i), split="heldout", tier="T0"
        )
        spec = synth.spec(structure, origin, "train")
        emit(synth, spec, origin, edits, n_tasks, task_seed(synth, hs, origin), out_envs, out_tasks)

    seen = {tuple(s[k] for k in SIGNATURE_AXES) for s in train_sigs}
    worlds = rng.sample(range(n_worlds), n_worlds)
    for i in range(held["t1_envs"]):
        w = worlds[i % n_worlds]
        for attempt in range(T1_ATTEMPTS):
            variant_seed = derive_seed(hs, f"{prefix}t1-variant", i, attempt)
            structure, edits = synth.variant(synth.world(world_seeds[w]), variant_seed)
            origin = Origin(
                world_seeds[w],
                n_variants + i,
                variant_seed,
                derive_seed(hs, f"{prefix}t1-content", i),
                split="heldout",
                tier="T1",
            )
            spec = synth.spec(structure, origin, "train")
            if tuple(synth.signatures(spec)[k] for k in SIGNATURE_AXES) not in seen:
                break
        else:
            raise ValueError(f"T1: no unseen variant of training {word} {w} in {T1_ATTEMPTS} attempts")
        emit(synth, spec, origin, edits, n_tasks, task_seed(synth, hs, origin), out_envs, out_tasks)

    taken = {axis: {s[axis] for s in train_sigs} for axis in (*SIGNATURE_AXES, "skin")}
    train_words = {w for env in pool.envs for w in env["vocabulary"]}
    for tier, n_unseen in (("T2", held["t2_worlds"]), ("V", held.get("validation_worlds", 0))):
        emitted: list[dict[str, str]] = []
        stream = f"{prefix}t2" if tier == "T2" else f"{prefix}validation"
        for i in range(n_unseen):
            accepted = _unseen_world(synth, hs, stream, tier, i, held["t2_variants_per_world"], taken)
            if accepted is None:
                raise ValueError(
                    f"{tier}: no unseen {word} {i} whose variants avoid every sig_api, sig_schema and sig_sem of "
                    f"training{' and T2' if tier == 'V' else ''} in {T2_WORLD_ATTEMPTS} attempts; the pools may "
                    "cover this config's structure space (raise tables.max or lower n_worlds / variants_per_world)"
                )
            for spec, origin, edits in accepted:
                emitted.append(synth.signatures(spec))
                emit(synth, spec, origin, edits, n_tasks, task_seed(synth, hs, origin), out_envs, out_tasks)
                shared = train_words.intersection(out_envs[-1]["vocabulary"])
                if shared:
                    raise ValueError(f"{tier} {word} {i} shares vocabulary with training: {sorted(shared)[:5]}")
        for axis, values in taken.items():
            values.update(sig[axis] for sig in emitted)


def _unseen_world(
    synth: LevelSynthesizer,
    root: int,
    stream: str,
    tier: str,
    i: int,
    n_variants: int,
    taken: dict[str, set[str]],
    lexicon: str = "heldout",
) -> list[tuple[Spec, Origin, list[str]]] | None:
    """World ``i`` of an unseen tier (T2, V or P, each from its own seed stream, named from the
    ``lexicon`` word pool): its environments, or None if every attempt collides with a signature in
    ``taken``."""

    def fresh(spec: Spec) -> bool:
        sig = synth.signatures(spec)
        return all(sig[axis] not in taken[axis] for axis in (*SIGNATURE_AXES, "skin"))

    for attempt in range(T2_WORLD_ATTEMPTS):
        world_seed = derive_seed(root, f"{stream}-{synth.world_word}", i, attempt)
        base = synth.world(world_seed)
        accepted = []
        for v in range(n_variants):
            for variant_attempt in range(T2_VARIANT_ATTEMPTS if v else 1):
                variant_seed = (
                    None if v == 0 else derive_seed(root, f"{stream}-variant", i, attempt, v, variant_attempt)
                )
                structure, edits = synth.variant(base, variant_seed)
                origin = Origin(
                    world_seed,
                    v,
                    variant_seed,
                    derive_seed(root, f"{stream}-content", i, v),
                    split="heldout",
                    tier=tier,
                )
                spec = synth.spec(structure, origin, lexicon)
                if fresh(spec):
                    accepted.append((spec, origin, edits))
                    break
            else:
                break
        if len(accepted) == n_variants:
            return accepted
    return None
