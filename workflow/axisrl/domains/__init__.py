"""Environment domains: ``toolworld`` (procedural tool-use worlds), ``mathcode`` (reasoning-gym
generators under tool harnesses), ``miniwob`` (MiniWoB++ pages in a headless Chromium),
``webworld`` (procedural web sites with WebShop-like tasks) and ``repoworld`` (procedural Python
repositories with injected bugs and issue reports). toolworld, webworld and repoworld have a tiny
base (``generate_pretrain_pool``) and serve both backends; mathcode and miniwob serve the LLM backends.
Every stage and backend reaches a domain through ``load``, so adding one is a module with the same
API (its environment class exported as ``Env``) and a name here.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

DOMAINS = ("toolworld", "mathcode", "miniwob", "webworld", "repoworld")
DEFAULT_DOMAIN = DOMAINS[0]
"""The domain of a study (and of a backend call) that names none."""


@dataclass(frozen=True)
class Domain:
    """What the workflow needs of a domain: its pools, its environment (``Env(spec, task)`` with
    ``reset``/``step``/``verify``), its signatures and token sets (dedup, Table 6) and its LLM-facing
    renderings (tool schemas and the opening chat)."""

    name: str
    generate_pool: Callable[[Mapping[str, Any]], Any]
    Env: type
    signatures: Callable[[Mapping[str, Any]], dict[str, str]]
    tool_tokens: Callable[[Mapping[str, Any]], frozenset[str]]
    schema_tokens: Callable[[Mapping[str, Any]], frozenset[str]]
    transition_tokens: Callable[[Mapping[str, Any]], frozenset[str]]
    tool_schemas: Callable[[Mapping[str, Any]], list[dict[str, Any]]]
    render_chat: Callable[[Mapping[str, Any], Mapping[str, Any]], dict[str, Any]]
    generate_pretrain_pool: Callable[..., Any] | None = None
    """The pool a tiny base is behaviour-cloned on (None: the domain has no tiny base)."""
    SimulatedEnv: type | None = None
    """A learned-simulator stand-in (DreamGym-like synthetic rollouts; None: the domain has none)."""
    compact_view: Callable[..., Any] | None = None
    """The name-free view the tiny policy acts through (``axisrl.domains.compact.ViewFactory``;
    None: the domain serves the LLM backends only)."""

    def require(self, capability: str) -> Any:
        """An optional part of the domain, or a clear error naming what the study asked of it."""
        value = getattr(self, capability)
        if value is None:
            raise ValueError(f"the {self.name} domain has no {capability}: the study asks for one")
        return value


@functools.cache
def load(name: str) -> Domain:
    """The domain called ``name``, imported on first use (mathcode imports reasoning-gym)."""
    if name not in DOMAINS:
        raise ValueError(f"unknown domain {name!r}; expected one of {DOMAINS}")
    module = importlib.import_module(f"axisrl.domains.{name}")
    return Domain(
        name,
        module.generate_pool,
        module.Env,
        module.signatures,
        module.tool_tokens,
        module.schema_tokens,
        module.transition_tokens,
        module.tool_schemas,
        module.render_chat,
        getattr(module, "generate_pretrain_pool", None),
        getattr(module, "SimulatedEnv", None),
        getattr(module, "compact_view", None),
    )
