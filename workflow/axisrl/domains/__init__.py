"""Environment domains: ``toolworld`` (procedural tool-use worlds) and ``mathcode`` (reasoning-gym
generators under tool harnesses). Every stage and backend reaches a domain through ``load``, so
adding one is a module with the same API and a name here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

DOMAINS = ("toolworld", "mathcode")


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


def load(name: str) -> Domain:
    """The domain called ``name``, imported on first use (mathcode imports reasoning-gym)."""
    if name not in DOMAINS:
        raise ValueError(f"unknown domain {name!r}; expected one of {DOMAINS}")
    module = importlib.import_module(f"axisrl.domains.{name}")
    env = module.ToolworldEnv if name == "toolworld" else module.MathcodeEnv
    return Domain(
        name,
        module.generate_pool,
        env,
        module.signatures,
        module.tool_tokens,
        module.schema_tokens,
        module.transition_tokens,
        module.tool_schemas,
        module.render_chat,
    )
