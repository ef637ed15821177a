"""The rows a domain's ``generate_pool`` returns, below every domain and ``levels.py`` that fill them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

PRETRAIN_TIER = "P"
"""The tier of a tiny base's pretraining pool (``generate_pretrain_pool``)."""


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
