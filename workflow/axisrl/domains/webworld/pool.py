"""The webworld training, held-out and placebo pools, with toolworld's tiers and row shape.

The tiers follow ``toolworld.pool`` exactly, with sites for worlds:

Training: ``n_worlds`` sites x ``variants_per_world`` variants (variant 0 unedited) x
``contents_per_variant`` contents (catalogues and initial carts), plus ``reskins_per_world``
re-skinned copies of each site's first environment: contents and re-skins are raw duplicates that
signature dedup collapses.

Placebo: ``placebo_contents`` fresh contents (``placebo_tasks_per_env`` tasks each) of the first
site's unedited variant: many environments (distinct ``env_id``) under one signature.

Held-out, all from the ``heldout.seed`` stream: T0 = a training (site, variant) with new content;
T1 = a training site under a new variant whose (sig_api, sig_schema, sig_sem) identity no training
environment has; T2 = new sites named from the held-out lexicon pool, rejection-sampled until none of
their sig_api, sig_schema, sig_sem or skin occurs in training. Validation (tier V): sites made like
T2's from a seed range of their own, sharing no signature with training or T2.

Config: the ``synthesize`` section toolworld reads. ``tables`` is the range of enum attributes per
site (at least two), ``rows_per_table`` scales the catalogue (``CATALOGUE_FACTOR`` items per row),
and the step limit is ``STEP_LIMIT_FACTOR x max_steps``: a page action is finer than a toolworld
call (a search, a filter, a field), so references run 3-20 calls, 11 on average with ``finish``, where
toolworld's run 2-4 (3 on average).
Row ids are hashed with a ``webworld`` prefix, so they never collide with toolworld's.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from axisrl.domains.toolworld.canon import canonical_json, derive_seed, short_hash
from axisrl.domains.toolworld.pool import Pool
from axisrl.domains.webworld.engine import compile_site
from axisrl.domains.webworld.signatures import signatures
from axisrl.domains.webworld.site import (
    Spec,
    Structure,
    build_spec,
    reskin,
    sample_content,
    sample_site,
    sample_variant,
)
from axisrl.domains.webworld.tasks import generate_tasks

STEP_LIMIT_FACTOR = 2
T1_ATTEMPTS = 64
T2_WORLD_ATTEMPTS = 64
T2_VARIANT_ATTEMPTS = 16
SIGNATURE_AXES = ("sig_api", "sig_schema", "sig_sem")


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
    return short_hash(["webworld-world", world_seed])


def env_id(spec: Spec) -> str:
    """16 hex chars of sha256 over the spec's canonical JSON, salted with the domain's name."""
    return short_hash(["webworld-env", canonical_json(spec)])


class _Synthesizer:
    def __init__(self, cfg: Mapping[str, Any]) -> None:
        self.cfg = cfg
        self.enums = (cfg["tables"]["min"], cfg["tables"]["max"])
        self.rows = (cfg["rows_per_table"]["min"], cfg["rows_per_table"]["max"])
        self.max_steps = STEP_LIMIT_FACTOR * cfg["max_steps"]
        self._sites: dict[int, Structure] = {}

    def site(self, world_seed: int) -> Structure:
        if world_seed not in self._sites:
            self._sites[world_seed] = sample_site(world_seed, self.enums)
        return self._sites[world_seed]

    def spec(self, structure: Structure, origin: _Origin, pool: str) -> Spec:
        content = sample_content(structure, origin.content_seed, pool, self.rows)
        return build_spec(structure, content, pool, derive_seed(origin.world_seed, "skin"), self.max_steps)

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
        ident = env_id(spec)
        site = compile_site(spec)
        envs.append(
            {
                "env_id": ident,
                "world_id": world_id(origin.world_seed),
                "world_seed": origin.world_seed,
                "variant_index": origin.variant_index,
                "variant_seed": origin.variant_seed,
                "content_seed": origin.content_seed,
                "skin_index": origin.skin_index,
                "split": origin.split,
                "tier": origin.tier,
                "n_tables": len(site.attributes),
                "n_tools": len(site.tools),
                "n_rows": len(site.items),
                "edits": list(edits),
                "vocabulary": site.vocabulary(),
                "spec": canonical_json(spec),
            }
        )
        for task in generate_tasks(spec, ident, n_tasks, task_seed):
            tasks.append({**task, "split": origin.split, "tier": origin.tier})


def _task_seed(root: int, origin: _Origin) -> int:
    """Independent of the skin, so a re-skin gets the same tasks in its own names."""
    return derive_seed(root, "webworld-tasks", origin.world_seed, origin.variant_seed, origin.content_seed)


def generate_pool(cfg: Mapping[str, Any]) -> Pool:
    """The training, placebo and held-out pools for a validated ``synthesize`` config section."""
    synth = _Synthesizer(cfg)
    pool = Pool()
    root, n_tasks = cfg["seed"], cfg["tasks_per_env"]
    n_worlds, n_variants = cfg["n_worlds"], cfg["variants_per_world"]
    variants: dict[tuple[int, int], tuple[Structure, list[str], int | None]] = {}
    train_sigs: list[dict[str, str]] = []

    for w in range(n_worlds):
        world_seed = derive_seed(root, "webworld-site", w)
        base = synth.site(world_seed)
        for v in range(n_variants):
            variant_seed = None if v == 0 else derive_seed(root, "webworld-variant", w, v)
            structure, edits = sample_variant(base, variant_seed)
            variants[(w, v)] = (structure, edits, variant_seed)
            for c in range(cfg["contents_per_variant"]):
                origin = _Origin(world_seed, v, variant_seed, derive_seed(root, "webworld-content", w, v, c))
                spec = synth.spec(structure, origin, "train")
                if v == 0 and c == 0:
                    first, first_origin = spec, origin
                train_sigs.append(signatures(spec))
                synth.emit(spec, origin, edits, n_tasks, _task_seed(root, origin), pool.envs, pool.tasks)
        for r in range(cfg["reskins_per_world"]):
            skinned = reskin(first, derive_seed(root, "webworld-reskin", w, r))
            copy = _Origin(world_seed, 0, None, first_origin.content_seed, skin_index=r + 1)
            train_sigs.append(signatures(skinned))
            synth.emit(skinned, copy, [], n_tasks, _task_seed(root, first_origin), pool.envs, pool.tasks)

    structure, _, _ = variants[(0, 0)]
    placebo_world = derive_seed(root, "webworld-site", 0)
    for c in range(cfg.get("placebo_contents", 0)):
        origin = _Origin(placebo_world, 0, None, derive_seed(root, "webworld-placebo-content", c), split="placebo")
        synth.emit(
            synth.spec(structure, origin, "train"),
            origin,
            [],
            cfg.get("placebo_tasks_per_env", n_tasks),
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
    rng = random.Random(derive_seed(hs, "webworld-tiers"))
    world_seeds = [derive_seed(cfg["seed"], "webworld-site", w) for w in range(n_worlds)]
    out_envs, out_tasks = pool.heldout_envs, pool.heldout_tasks

    pairs = rng.sample(sorted(variants), len(variants))
    for i in range(held["t0_envs"]):
        w, v = pairs[i % len(pairs)]
        structure, edits, variant_seed = variants[(w, v)]
        origin = _Origin(
            world_seeds[w], v, variant_seed, derive_seed(hs, "webworld-t0-content", i), split="heldout", tier="T0"
        )
        spec = synth.spec(structure, origin, "train")
        synth.emit(spec, origin, edits, n_tasks, _task_seed(hs, origin), out_envs, out_tasks)

    seen = {tuple(s[k] for k in SIGNATURE_AXES) for s in train_sigs}
    worlds = rng.sample(range(n_worlds), n_worlds)
    for i in range(held["t1_envs"]):
        w = worlds[i % n_worlds]
        for attempt in range(T1_ATTEMPTS):
            variant_seed = derive_seed(hs, "webworld-t1-variant", i, attempt)
            structure, edits = sample_variant(synth.site(world_seeds[w]), variant_seed)
            origin = _Origin(
                world_seeds[w],
                n_variants + i,
                variant_seed,
                derive_seed(hs, "webworld-t1-content", i),
                split="heldout",
                tier="T1",
            )
            spec = synth.spec(structure, origin, "train")
            if tuple(signatures(spec)[k] for k in SIGNATURE_AXES) not in seen:
                break
        else:
            raise ValueError(f"T1: no unseen variant of training site {w} in {T1_ATTEMPTS} attempts")
        synth.emit(spec, origin, edits, n_tasks, _task_seed(hs, origin), out_envs, out_tasks)

    taken = {axis: {s[axis] for s in train_sigs} for axis in (*SIGNATURE_AXES, "skin")}
    train_words = {word for env in pool.envs for word in env["vocabulary"]}
    for tier, n_unseen in (("T2", held["t2_worlds"]), ("V", held["validation_worlds"])):
        emitted: list[dict[str, str]] = []
        stream = "webworld-t2" if tier == "T2" else "webworld-validation"
        for i in range(n_unseen):
            accepted = _unseen_site(synth, hs, stream, tier, i, held["t2_variants_per_world"], taken)
            if accepted is None:
                raise ValueError(
                    f"{tier}: no unseen site {i} whose variants avoid every sig_api, sig_schema and sig_sem of "
                    f"training{' and T2' if tier == 'V' else ''} in {T2_WORLD_ATTEMPTS} attempts"
                )
            for spec, origin, edits in accepted:
                emitted.append(signatures(spec))
                synth.emit(spec, origin, edits, n_tasks, _task_seed(hs, origin), out_envs, out_tasks)
                shared = train_words.intersection(out_envs[-1]["vocabulary"])
                if shared:
                    raise ValueError(f"{tier} site {i} shares vocabulary with training: {sorted(shared)[:5]}")
        for axis, values in taken.items():
            values.update(sig[axis] for sig in emitted)


def _unseen_site(
    synth: _Synthesizer, root: int, stream: str, tier: str, i: int, n_variants: int, taken: dict[str, set[str]]
) -> list[tuple[Spec, _Origin, list[str]]] | None:
    """Site ``i`` of an unseen tier (T2 or V, each from its own seed stream): its environments, or
    None if every attempt collides with a signature in ``taken``."""

    def fresh(spec: Spec) -> bool:
        sig = signatures(spec)
        return all(sig[axis] not in taken[axis] for axis in (*SIGNATURE_AXES, "skin"))

    for attempt in range(T2_WORLD_ATTEMPTS):
        world_seed = derive_seed(root, f"{stream}-site", i, attempt)
        base = synth.site(world_seed)
        accepted = []
        for v in range(n_variants):
            for variant_attempt in range(T2_VARIANT_ATTEMPTS if v else 1):
                variant_seed = (
                    None if v == 0 else derive_seed(root, f"{stream}-variant", i, attempt, v, variant_attempt)
                )
                structure, edits = sample_variant(base, variant_seed)
                origin = _Origin(
                    world_seed,
                    v,
                    variant_seed,
                    derive_seed(root, f"{stream}-content", i, v),
                    split="heldout",
                    tier=tier,
                )
                spec = synth.spec(structure, origin, "heldout")
                if fresh(spec):
                    accepted.append((spec, origin, edits))
                    break
            else:
                break
        if len(accepted) == n_variants:
            return accepted
    return None
