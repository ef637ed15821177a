"""Canonical JSON, short hashes and seed derivation shared by every domain.

Everything random in a procedural domain is drawn from ``random.Random(derive_seed(...))`` so that a
pool is a pure function of its config: no global RNG and no Python ``hash()`` (salted per process).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

SEED_BITS = 62
"""Derived seeds stay below 2**62 so they fit signed 64-bit Parquet columns."""


def canonical_json(obj: Any) -> str:
    """The one serialisation that hashes are taken over: sorted keys, no spaces."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def short_hash(obj: Any, length: int = 16) -> str:
    """First ``length`` hex chars of sha256 over the canonical JSON of ``obj``."""
    text = obj if isinstance(obj, str) else canonical_json(obj)
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def derive_seed(*parts: object) -> int:
    """A sub-seed for a named purpose, e.g. ``derive_seed(world_seed, "lexicon")``."""
    digest = hashlib.sha256(":".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") >> (64 - SEED_BITS)
