"""Episode-local anonymisation for the compact view: every world symbol becomes a slot token.

Tables, fields, entities and values get slot tokens (``T3``, ``F17``, ``E40``, ``V9``) through
permutations drawn from the episode seed. Symbols are ordered by structure and content only, never
by name, so a re-skinned world gets the same tokens and memorising a name cannot pay off. The
permutations equal ``random``'s own ``sample`` and ``shuffle`` bit for bit, but are drawn in bulk
and only as far as they are read.
"""

from __future__ import annotations

import random
import sys
from array import array
from collections.abc import Sequence
from typing import Any

from axisrl.domains.canon import derive_seed
from axisrl.domains.toolworld.layout import layout_of
from axisrl.domains.toolworld.runtime import Runtime

SLOT_SPACE = {"T": 8, "F": 32, "E": 64, "V": 128}
"""Minimum slot range per symbol kind; slots are drawn from it without replacement."""


class Slots:
    """Episode-local symbol -> slot token maps. Symbols are ordered by structure and content only."""

    def __init__(self, rt: Runtime, episode_seed: int) -> None:
        layout = layout_of(rt)
        tables, fields, entities, values = layout.tables, layout.fields, layout.entities, layout.values
        perms = {
            kind: Permutation(derive_seed(episode_seed, "compact", kind), max(SLOT_SPACE[kind], len(symbols) + 16))
            for kind, symbols in (("T", tables), ("F", fields), ("E", entities), ("V", values))
        }
        self.table = self._assign("T", tables, perms["T"])
        self.field = self._assign("F", fields, perms["F"])
        self.entity = self._assign("E", entities, perms["E"])
        self.value = self._assign("V", values, perms["V"])
        self.extra_entity = Spare("E", perms["E"], len(entities))
        self.extra_value = Spare("V", perms["V"], len(values))
        self.tool_order = shuffled(derive_seed(episode_seed, "compact", "tools"), len(rt.tools) + 1)
        self.maps = {"T": self.table, "F": self.field, "V": self.value}

    @staticmethod
    def _assign(kind: str, symbols: list[Any], perm: Permutation) -> dict[Any, str]:
        return {s: f"{kind}{slot}" for s, slot in zip(symbols, perm.prefix(len(symbols)))}

    def fill(self, template: Sequence[str | tuple[str, str, Any]]) -> list[str]:
        """A token template with ``(prefix, "T"|"F"|"V", symbol)`` for each slot token."""
        maps = self.maps
        return [part if isinstance(part, str) else part[0] + maps[part[1]][part[2]] for part in template]


class _Words:
    """The 32-bit outputs of ``random.Random(seed)`` in order; ``getrandbits(32 * n)`` packs the
    next n outputs least significant first, so they are drawn in bulk."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.words: list[int] = []
        self.position = 0

    def below(self, bounds: Sequence[int]) -> list[int]:
        """``[Random._randbelow(n) for n in bounds]``: the top ``n.bit_length()`` bits of the next
        output, redrawn until below ``n`` (at most half the draws are rejected on average)."""
        words, position, out = self.words, self.position, []
        for n in bounds:
            shift = 32 - n.bit_length()
            while True:
                if position == len(words):
                    count = 3 * (len(bounds) - len(out)) // 2 + 8
                    block = array("I", self.rng.getrandbits(32 * count).to_bytes(4 * count, "little"))
                    if sys.byteorder == "big":
                        block.byteswap()
                    words.extend(block)
                r = words[position] >> shift
                position += 1
                if r < n:
                    break
            out.append(r)
        self.position = position
        return out


class Permutation:
    """``random.Random(seed).sample(range(size), size)``, bit for bit, drawn only as far as it is read."""

    def __init__(self, seed: int, size: int) -> None:
        self.words = _Words(seed)
        self.pool = list(range(size))
        self.drawn: list[int] = []

    def __len__(self) -> int:
        return len(self.pool)

    def prefix(self, n: int) -> list[int]:
        pool, drawn, size = self.pool, self.drawn, len(self.pool)
        if n > len(drawn):
            bounds = range(size - len(drawn), size - n, -1)
            for remaining, j in zip(bounds, self.words.below(bounds)):
                drawn.append(pool[j])
                pool[j] = pool[remaining - 1]
        return drawn[:n]


class Spare:
    """Slots left for symbols first seen in the goal or history (e.g. created rows), as tokens."""

    def __init__(self, kind: str, perm: Permutation, used: int) -> None:
        self.kind, self.perm, self.used = kind, perm, used

    def __len__(self) -> int:
        return len(self.perm) - self.used

    def __getitem__(self, k: int) -> str:
        return f"{self.kind}{self.perm.prefix(self.used + k + 1)[-1]}"


def shuffled(seed: int, n: int) -> list[int]:
    """``x = list(range(n)); random.Random(seed).shuffle(x)``, bit for bit."""
    order = list(range(n))
    for i, j in zip(range(n - 1, 0, -1), _Words(seed).below(range(n, 1, -1))):
        order[i], order[j] = order[j], order[i]
    return order


_SLOT_CACHE: dict[tuple[int, int], tuple[Runtime, Slots]] = {}


def slots_of(rt: Runtime, episode_seed: int) -> Slots:
    """The slots of one (runtime, episode seed), cached: every rollout and fork of an episode reuses them."""
    hit = _SLOT_CACHE.get((id(rt), episode_seed))
    if hit is not None and hit[0] is rt:
        return hit[1]
    if len(_SLOT_CACHE) >= 1024:
        del _SLOT_CACHE[next(iter(_SLOT_CACHE))]
    slots = Slots(rt, episode_seed)
    _SLOT_CACHE[(id(rt), episode_seed)] = (rt, slots)
    return slots
