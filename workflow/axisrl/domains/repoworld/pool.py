"""The training, placebo and held-out pools (tiers T0, T1, T2, V) as flat rows, in toolworld's shape.

The tiers are toolworld's, drawn from a repository family's levels by ``axisrl.domains.levels``.

Sizes: ``tables`` bounds the number of function modules (clipped to 2-4) and ``rows_per_table``
the records in a test's list (clipped to 2-8). The step limit of every spec is
``max(max_steps, HORIZON_LIMIT)``: the config's default of 10 is toolworld's and shorter than a
repoworld reference. Ids are hashes tagged ``repoworld`` (``world_id``, ``env_id``, ``task_id``),
so they never collide with another domain's. Row columns: ``n_tables`` counts modules, ``n_tools``
the tools (``finish`` included), ``n_rows`` the functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from axisrl.domains.levels import EnvShape, assemble_pool, pretrain_pool
from axisrl.domains.pool import Pool
from axisrl.domains.repoworld.env import tool_names
from axisrl.domains.repoworld.signatures import signatures
from axisrl.domains.repoworld.spec import Spec, build_spec, env_id, names_of, reskin
from axisrl.domains.repoworld.tasks import generate_tasks
from axisrl.domains.repoworld.world import MODULES, ROWS, sample_content, sample_variant, sample_world
from axisrl.domains.spec_levels import SpecLevels


def _range(cfg: Mapping[str, Any], key: str, default: tuple[int, int], low: int, high: int) -> tuple[int, int]:
    bounds = cfg.get(key) or {}
    lo = min(max(bounds.get("min", default[0]), low), high)
    hi = min(max(bounds.get("max", default[1]), lo), high)
    return lo, hi


def _shape(spec: Spec) -> EnvShape:
    structure = spec["structure"]
    return EnvShape(
        len(structure["modules"]),
        len(tool_names(structure["api"])),
        len(structure["functions"]),
        names_of(spec).vocabulary(),
    )


def _levels(cfg: Mapping[str, Any]) -> SpecLevels:
    """A repository family's levels for ``assemble_pool``."""
    return SpecLevels(
        "repoworld",
        "world",
        _range(cfg, "tables", MODULES, 2, 4),
        _range(cfg, "rows_per_table", ROWS, 2, 8),
        cfg.get("max_steps", 0),
        sample_world,
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
    """The training, placebo and held-out pools for a ``synthesize`` config section."""
    return assemble_pool(cfg, _levels(cfg))


def generate_pretrain_pool(
    cfg: Mapping[str, Any], pretrain: Mapping[str, Any], taken: Mapping[str, set[str]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The pretraining pool a tiny base is cloned on (``levels.pretrain_pool``): environment rows, task rows."""
    return pretrain_pool(cfg, pretrain, taken, _levels(cfg))
