"""The training, placebo and held-out pools (tiers T0, T1, T2, V) as flat rows, in toolworld's shape.

The tiers mean what toolworld's ``pool.py`` says they mean, read from the same ``synthesize`` keys:

Training: ``n_worlds`` worlds x ``variants_per_world`` variants (variant 0 unedited) x
``contents_per_variant`` contents, plus ``reskins_per_world`` re-skinned copies of each world's
first environment: contents and reskins are real signature-level duplicates that dedup collapses.
Placebo: ``placebo_contents`` contents (``placebo_tasks_per_env`` tasks each) of the first world's
unedited variant. Held-out, from the ``heldout.seed`` stream: T0 = a training (world, variant) with
new content; T1 = a training world under a new variant whose (sig_api, sig_schema, sig_sem) no
training environment has; T2 = new worlds named from the held-out lexicon pool, rejection-sampled
until none of their sig_api, sig_schema, sig_sem or skin occurs in training; V = worlds drawn like
T2's from a seed stream of their own, sharing no signature with training or T2.

Sizes: ``tables`` bounds the number of function modules (clipped to 2-4) and ``rows_per_table``
the records in a test's list (clipped to 2-8). The step limit of every spec is
``max(max_steps, HORIZON_LIMIT)``: the config's default of 10 is toolworld's and shorter than a
repoworld reference. Ids are hashes tagged ``repoworld`` (``world_id``, ``env_id``, ``task_id``),
so they never collide with another domain's. Row columns: ``n_tables`` counts modules, ``n_tools``
the tools (``finish`` included), ``n_rows`` the functions.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from axisrl.domains.repoworld.env import tool_names
from axisrl.domains.repoworld.signatures import signatures
from axisrl.domains.repoworld.tasks import generate_tasks
from axisrl.domains.repoworld.world import (
    MODULES,
    ROWS,
    Spec,
    Structure,
    build_spec,
    env_id,
    names_of,
    reskin,
    sample_content,
    sample_variant,
    sample_world,
)
from axisrl.domains.toolworld.canon import canonical_json, derive_seed, short_hash
from axisrl.domains.toolworld.pool import Pool

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
    return short_hash(["repoworld-world", world_seed])


def _range(cfg: Mapping[str, Any], key: str, default: tuple[int, int], low: int, high: int) -> tuple[int, int]:
    bounds = cfg.get(key) or {}
    lo = min(max(bounds.get("min", default[0]), low), high)
    hi = min(max(bounds.get("max", default[1]), lo), high)
    return lo, hi


class _Synthesizer:
    def __init__(self, cfg: Mapping[str, Any]) -> None:
        self.cfg = cfg
        self.modules = _range(cfg, "tables", MODULES, 2, 4)
        self.rows = _range(cfg, "rows_per_table", ROWS, 2, 8)
        self.max_steps = cfg.get("max_steps", 0)
        self._worlds: dict[int, Structure] = {}

    def world(self, world_seed: int) -> Structure:
        if world_seed not in self._worlds:
            self._worlds[world_seed] = sample_world(world_seed, self.modules)
        return self._worlds[world_seed]

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
        env = env_id(spec)
        structure = spec["structure"]
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
                "n_tables": len(structure["modules"]),
                "n_tools": len(tool_names(structure["api"])),
                "n_rows": len(structure["functions"]),
                "edits": list(edits),
                "vocabulary": names_of(spec).vocabulary(),
                "spec": canonical_json(spec),
            }
        )
        for task in generate_tasks(spec, env, n_tasks, task_seed):
            tasks.append({**task, "split": origin.split, "tier": origin.tier})


def _task_seed(root: int, origin: _Origin) -> int:
    """Independent of the skin, so a reskin gets the same bugs in its own names."""
    return derive_seed(root, "repoworld-tasks", origin.world_seed, origin.variant_seed, origin.content_seed)


def generate_pool(cfg: Mapping[str, Any]) -> Pool:
    """The training, placebo and held-out pools for a ``synthesize`` config section."""
    synth = _Synthesizer(cfg)
    pool = Pool()
    root, n_tasks = cfg["seed"], cfg["tasks_per_env"]
    n_worlds, n_variants = cfg["n_worlds"], cfg["variants_per_world"]
    variants: dict[tuple[int, int], tuple[Structure, list[str], int | None]] = {}
    train_sigs: list[dict[str, str]] = []

    for w in range(n_worlds):
        world_seed = derive_seed(root, "repoworld-world", w)
        base = synth.world(world_seed)
        for v in range(n_variants):
            variant_seed = None if v == 0 else derive_seed(root, "repoworld-variant", w, v)
            structure, edits = sample_variant(base, variant_seed)
            variants[(w, v)] = (structure, edits, variant_seed)
            for c in range(cfg["contents_per_variant"]):
                origin = _Origin(world_seed, v, variant_seed, derive_seed(root, "repoworld-content", w, v, c))
                spec = synth.spec(structure, origin, "train")
                if v == 0 and c == 0:
                    first, first_origin = spec, origin
                train_sigs.append(signatures(spec))
                synth.emit(spec, origin, edits, n_tasks, _task_seed(root, origin), pool.envs, pool.tasks)
        for r in range(cfg.get("reskins_per_world", 0)):
            skinned = reskin(first, derive_seed(root, "repoworld-reskin", w, r))
            copy = _Origin(world_seed, 0, None, first_origin.content_seed, skin_index=r + 1)
            train_sigs.append(signatures(skinned))
            synth.emit(skinned, copy, [], n_tasks, _task_seed(root, first_origin), pool.envs, pool.tasks)

    structure, _, _ = variants[(0, 0)]
    world0 = derive_seed(root, "repoworld-world", 0)
    for c in range(cfg.get("placebo_contents", 0)):
        origin = _Origin(world0, 0, None, derive_seed(root, "repoworld-placebo-content", c), split="placebo")
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
    rng = random.Random(derive_seed(hs, "repoworld-tiers"))
    world_seeds = [derive_seed(cfg["seed"], "repoworld-world", w) for w in range(n_worlds)]
    out_envs, out_tasks = pool.heldout_envs, pool.heldout_tasks

    pairs = rng.sample(sorted(variants), len(variants))
    for i in range(held["t0_envs"]):
        w, v = pairs[i % len(pairs)]
        structure, edits, variant_seed = variants[(w, v)]
        origin = _Origin(
            world_seeds[w], v, variant_seed, derive_seed(hs, "repoworld-t0-content", i), split="heldout", tier="T0"
        )
        spec = synth.spec(structure, origin, "train")
        synth.emit(spec, origin, edits, n_tasks, _task_seed(hs, origin), out_envs, out_tasks)

    seen = {tuple(s[k] for k in SIGNATURE_AXES) for s in train_sigs}
    worlds = rng.sample(range(n_worlds), n_worlds)
    for i in range(held["t1_envs"]):
        w = worlds[i % n_worlds]
        for attempt in range(T1_ATTEMPTS):
            variant_seed = derive_seed(hs, "repoworld-t1-variant", i, attempt)
            structure, edits = sample_variant(synth.world(world_seeds[w]), variant_seed)
            origin = _Origin(
                world_seeds[w],
                n_variants + i,
                variant_seed,
                derive_seed(hs, "repoworld-t1-content", i),
                split="heldout",
                tier="T1",
            )
            spec = synth.spec(structure, origin, "train")
            if tuple(signatures(spec)[k] for k in SIGNATURE_AXES) not in seen:
                break
        else:
            raise ValueError(f"T1: no unseen variant of training world {w} in {T1_ATTEMPTS} attempts")
        synth.emit(spec, origin, edits, n_tasks, _task_seed(hs, origin), out_envs, out_tasks)

    taken = {axis: {s[axis] for s in train_sigs} for axis in (*SIGNATURE_AXES, "skin")}
    train_words = {word for env in pool.envs for word in env["vocabulary"]}
    for tier, n_unseen in (("T2", held["t2_worlds"]), ("V", held.get("validation_worlds", 0))):
        emitted: list[dict[str, str]] = []
        stream = "repoworld-t2" if tier == "T2" else "repoworld-validation"
        for i in range(n_unseen):
            accepted = _unseen_world(synth, i, taken, hs, stream, tier, held["t2_variants_per_world"])
            if accepted is None:
                raise ValueError(
                    f"{tier}: no unseen world {i} whose variants avoid every sig_api, sig_schema and sig_sem of "
                    f"training{' and T2' if tier == 'V' else ''} in {T2_WORLD_ATTEMPTS} attempts"
                )
            for spec, origin, edits in accepted:
                emitted.append(signatures(spec))
                synth.emit(spec, origin, edits, n_tasks, _task_seed(hs, origin), out_envs, out_tasks)
                shared = train_words.intersection(out_envs[-1]["vocabulary"])
                if shared:
                    raise ValueError(f"{tier} world {i} shares vocabulary with training: {sorted(shared)[:5]}")
        for axis, values in taken.items():
            values.update(sig[axis] for sig in emitted)


def _unseen_world(
    synth: _Synthesizer, i: int, taken: dict[str, set[str]], root: int, stream: str, tier: str, n_variants: int
) -> list[tuple[Spec, _Origin, list[str]]] | None:
    """World ``i`` of an unseen tier (T2 or V, each from its own seed stream): its environments, or
    None if every attempt collides with a signature in ``taken``."""

    def fresh(spec: Spec) -> bool:
        sig = signatures(spec)
        return all(sig[axis] not in taken[axis] for axis in (*SIGNATURE_AXES, "skin"))

    for attempt in range(T2_WORLD_ATTEMPTS):
        world_seed = derive_seed(root, f"{stream}-world", i, attempt)
        base = synth.world(world_seed)
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
