"""The webworld training, held-out and placebo pools, with toolworld's tiers and row shape: a site is
a world, and ``axisrl.domains.levels`` draws the tiers from the site's levels.

Config: the ``synthesize`` section toolworld reads. ``tables`` is the range of enum attributes per
site (at least two), ``rows_per_table`` scales the catalogue (``CATALOGUE_FACTOR`` items per row),
and the step limit is ``STEP_LIMIT_FACTOR x max_steps``: a page action is finer than a toolworld
call (a search, a filter, a field), so references run 3-20 calls, 11 on average with ``finish``, where
toolworld's run 2-4 (3 on average).
Row ids are hashed with a ``webworld`` prefix, so they never collide with toolworld's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from axisrl.domains.levels import EnvShape, Origin, assemble_pool, pretrain_pool
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


def world_id(world_seed: int) -> str:
    return short_hash(["webworld-world", world_seed])


def env_id(spec: Spec) -> str:
    """16 hex chars of sha256 over the spec's canonical JSON, salted with the domain's name."""
    return short_hash(["webworld-env", canonical_json(spec)])


class _Synthesizer:
    """A site's levels for ``assemble_pool``."""

    domain = "webworld"
    world_word = "site"

    def __init__(self, cfg: Mapping[str, Any]) -> None:
        self.cfg = cfg
        self.enums = (cfg["tables"]["min"], cfg["tables"]["max"])
        self.rows = (cfg["rows_per_table"]["min"], cfg["rows_per_table"]["max"])
        self.max_steps = STEP_LIMIT_FACTOR * cfg["max_steps"]
        self._sites: dict[int, Structure] = {}

    def world(self, world_seed: int) -> Structure:
        if world_seed not in self._sites:
            self._sites[world_seed] = sample_site(world_seed, self.enums)
        return self._sites[world_seed]

    variant = staticmethod(sample_variant)
    reskin = staticmethod(reskin)
    signatures = staticmethod(signatures)
    env_id = staticmethod(env_id)
    world_id = staticmethod(world_id)
    tasks = staticmethod(generate_tasks)

    def spec(self, structure: Structure, origin: Origin, pool: str) -> Spec:
        content = sample_content(structure, origin.content_seed, pool, self.rows)
        return build_spec(structure, content, pool, derive_seed(origin.world_seed, "skin"), self.max_steps)

    def shape(self, spec: Spec) -> EnvShape:
        site = compile_site(spec)
        return EnvShape(len(site.attributes), len(site.tools), len(site.items), site.vocabulary())


def generate_pool(cfg: Mapping[str, Any]) -> Pool:
    """The training, placebo and held-out pools for a validated ``synthesize`` config section."""
    return assemble_pool(cfg, _Synthesizer(cfg))


def generate_pretrain_pool(
    cfg: Mapping[str, Any], pretrain: Mapping[str, Any], taken: Mapping[str, set[str]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The pretraining pool a tiny base is cloned on (``levels.pretrain_pool``): environment rows, task rows."""
    return pretrain_pool(cfg, pretrain, taken, _Synthesizer(cfg))
