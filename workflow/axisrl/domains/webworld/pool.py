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

from axisrl.domains.canon import canonical_json, short_hash
from axisrl.domains.levels import EnvShape, assemble_pool, pretrain_pool
from axisrl.domains.pool import Pool
from axisrl.domains.spec_levels import SpecLevels
from axisrl.domains.webworld.engine import compile_site
from axisrl.domains.webworld.signatures import signatures
from axisrl.domains.webworld.site import Spec, build_spec, reskin, sample_content, sample_site, sample_variant
from axisrl.domains.webworld.tasks import generate_tasks

STEP_LIMIT_FACTOR = 2


def env_id(spec: Spec) -> str:
    """16 hex chars of sha256 over the spec's canonical JSON, salted with the domain's name."""
    return short_hash(["webworld-env", canonical_json(spec)])


def _shape(spec: Spec) -> EnvShape:
    site = compile_site(spec)
    return EnvShape(len(site.attributes), len(site.tools), len(site.items), site.vocabulary())


def _levels(cfg: Mapping[str, Any]) -> SpecLevels:
    """A site's levels for ``assemble_pool``."""
    return SpecLevels(
        "webworld",
        "site",
        (cfg["tables"]["min"], cfg["tables"]["max"]),
        (cfg["rows_per_table"]["min"], cfg["rows_per_table"]["max"]),
        STEP_LIMIT_FACTOR * cfg["max_steps"],
        sample_site,
        sample_variant,
        sample_content,
        build_spec,
        reskin,
        signatures,
        env_id,
        generate_tasks,
        _shape,
    )


def generate_pool(cfg: Mapping[str, Any]) -> Pool:
    """The training, placebo and held-out pools for a validated ``synthesize`` config section."""
    return assemble_pool(cfg, _levels(cfg))


def generate_pretrain_pool(
    cfg: Mapping[str, Any], pretrain: Mapping[str, Any], taken: Mapping[str, set[str]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The pretraining pool a tiny base is cloned on (``levels.pretrain_pool``): environment rows, task rows."""
    return pretrain_pool(cfg, pretrain, taken, _levels(cfg))
