"""Procedural vocabularies (pseudo-words from syllables) and per-world ID formats.

A world's names (tables, fields, enum values, tool verbs, parameters) and its entity names are
pseudo-words built from a syllable inventory. The training and held-out pools are disjoint by
construction: every held-out syllable contains one of the letters c, h, j, w, y, z and no training
syllable contains any of them, so no word, and no name composed of words, can occur in both pools.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Mapping

from axisrl.domains.canon import derive_seed

VOWELS = ("a", "e", "i", "o", "u")
ONSETS = {
    "train": ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v"),
    "heldout": ("ch", "sh", "th", "zh", "j", "w", "y", "h"),
}
HELDOUT_MARKERS = frozenset("chjwyz")
"""Letters that occur in every held-out syllable and in no training syllable."""

SYLLABLES = {pool: tuple(onset + vowel for onset in onsets for vowel in VOWELS) for pool, onsets in ONSETS.items()}
POOLS = tuple(SYLLABLES)


def make_word(rng: random.Random, pool: str, min_syllables: int = 2, max_syllables: int = 3) -> str:
    syllables = SYLLABLES[pool]
    return "".join(rng.choice(syllables) for _ in range(rng.randint(min_syllables, max_syllables)))


def word_pool(word: str) -> str:
    """Which pool a word (or a name made of words) comes from; inverse of the construction."""
    return "heldout" if HELDOUT_MARKERS & set(word.lower()) else "train"


def _natural_key(symbol: str) -> list[object]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", symbol)]


def assign_words(symbols: Iterable[str], pool: str, seed: int) -> dict[str, str]:
    """One distinct lowercase word per symbol.

    A symbol's word depends only on ``(seed, symbol)`` unless it collides with a word taken by a
    symbol earlier in natural order; so a variant that adds a field keeps every other name.
    """
    words: dict[str, str] = {}
    taken: set[str] = set()
    for symbol in sorted(set(symbols), key=_natural_key):
        rng = random.Random(derive_seed(seed, "word", symbol))
        word = make_word(rng, pool)
        while word in taken:
            word = make_word(rng, pool)
        taken.add(word)
        words[symbol] = word
    return words


def entity_name(rng: random.Random, pool: str, taken: set[str]) -> str:
    """A fresh capitalised natural key (capitalised, so it can never equal a schema name)."""
    name = make_word(rng, pool).capitalize()
    while name in taken:
        name = make_word(rng, pool, 2, 4).capitalize()
    taken.add(name)
    return name


def make_id_format(seed: int, table_words: Mapping[str, str]) -> dict[str, object]:
    """A world's ID format: per-table prefix, separator, radix, zero-padded width, letter case."""
    rng = random.Random(derive_seed(seed, "id-format"))
    separator = rng.choice(("-", "_", ":", ".", ""))
    radix = rng.choice((10, 16))
    width = rng.randint(3, 6)
    upper = rng.random() < 0.6
    prefix_length = rng.randint(2, 4)
    prefixes: dict[str, str] = {}
    taken: set[str] = set()
    for table, word in table_words.items():
        candidates = [word[:n] for n in range(prefix_length, len(word) + 1)]
        candidates += [f"{word}{n}" for n in range(len(table_words) + 1)]
        prefix = next(c for c in candidates if c not in taken)
        taken.add(prefix)
        prefixes[table] = prefix.upper() if upper else prefix
    return {"prefix": prefixes, "separator": separator, "radix": radix, "width": width, "upper": upper}
