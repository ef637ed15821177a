"""The training, placebo and held-out pools (tiers T0, T1, T2, V) and the pretraining pool (tier P) as
flat rows for polars, drawn by ``axisrl.domains.levels`` from a world's levels as for every procedural
domain (its docstring says how each tier is drawn).

toolworld's own choices: its seed streams have no prefix (``world``, ``variant``, ``t2-world`` ...:
they are older than the other domains', and the default study's keys hang on its pools); the
placebo pool scales procedural seeds under one signature, not environments (the placebo row of
Table 7); T2 and V are named from the held-out lexicon, and tier P (the tiny study's base is
pretrained on it, ``generate_pretrain_pool``) from the training lexicon with split ``pretrain``, so
that the base has seen none of the worlds the study trains or tests on nor a word of the unseen tiers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from axisrl.domains.canon import derive_seed, short_hash
from axisrl.domains.levels import EnvShape, Origin, Streams, assemble_pool, pretrain_pool
from axisrl.domains.pool import Pool
from axisrl.domains.toolworld.runtime import compile_spec
from axisrl.domains.toolworld.signatures import signatures
from axisrl.domains.toolworld.tasks import generate_tasks
from axisrl.domains.toolworld.world import (
    Spec,
    Structure,
    build_spec,
    env_id,
    reskin,
    sample_state,
    sample_variant,
    sample_world,
)

__all__ = ["generate_pool", "generate_pretrain_pool", "world_id"]


def world_id(world_seed: int) -> str:
    return short_hash(["toolworld-world", world_seed])


class _Synthesizer:
    """A world's levels for ``assemble_pool``."""

    domain = "toolworld"
    world_word = "world"
    streams = Streams("", pretrain_lexicon="train", pretrain_split="pretrain")

    def __init__(self, cfg: Mapping[str, Any]) -> None:
        self.cfg = cfg
        self.tables = (cfg["tables"]["min"], cfg["tables"]["max"])
        self.rows = (cfg["rows_per_table"]["min"], cfg["rows_per_table"]["max"])
        self._worlds: dict[int, Structure] = {}

    def world(self, world_seed: int) -> Structure:
        if world_seed not in self._worlds:
            self._worlds[world_seed] = sample_world(world_seed, self.tables)
        return self._worlds[world_seed]

    variant = staticmethod(sample_variant)
    reskin = staticmethod(reskin)
    signatures = staticmethod(signatures)
    env_id = staticmethod(env_id)
    world_id = staticmethod(world_id)
    tasks = staticmethod(generate_tasks)

    def spec(self, structure: Structure, origin: Origin, pool: str) -> Spec:
        state = sample_state(structure, origin.content_seed, pool, self.rows)
        return build_spec(structure, state, pool, derive_seed(origin.world_seed, "skin"), self.cfg["max_steps"])

    def shape(self, spec: Spec) -> EnvShape:
        rt = compile_spec(spec)
        return EnvShape(len(rt.tables), len(rt.tools), sum(len(rows) for rows in rt.initial.values()), rt.vocabulary())


def generate_pool(cfg: Mapping[str, Any]) -> Pool:
    """The training, placebo and held-out pools for a validated ``synthesize`` config section."""
    return assemble_pool(cfg, _Synthesizer(cfg))


def generate_pretrain_pool(
    cfg: Mapping[str, Any], pretrain: Mapping[str, Any], taken: Mapping[str, set[str]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The pretraining pool (tier P): ``pretrain.worlds`` worlds of ``pretrain.variants_per_world``
    variants, ``pretrain.tasks_per_env`` tasks each, built with the ``synthesize`` section ``cfg``'s
    sizes; ``taken``: the signatures (``sig_api``, ``sig_schema``, ``sig_sem``, ``skin``) of every
    pool the study trains or tests on, none of which it may share. Returns its environment rows and
    task rows."""
    return pretrain_pool(cfg, pretrain, taken, _Synthesizer(cfg))
