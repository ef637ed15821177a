"""The tiny policy's token vocabulary and the sizes its embeddings are built with.

Tokens of the compact view are split into a closed *structural* vocabulary (``eq``, ``ret:row``,
``req`` ...) and episode-local *symbols* (slot tokens ``T3``/``F17``/``E40``/``V9`` and numbers
``#18``); ``classify`` tells which a token is. The encoding, the collation and the policy all read
these, so they live apart from each.
"""

from __future__ import annotations

import re

from axisrl.domains.compact import HISTORY_K, STRUCTURAL

PAD = STRUCTURAL[0]
STRUCT_ID = {token: k for k, token in enumerate(STRUCTURAL)}
N_STRUCT = len(STRUCTURAL)
UNK = STRUCT_ID["<unk>"]
GOAL_HEADS = ("exists", "absent", "eq", "ref", "ask", "ask_find", "ask_count", "ask_aggregate")
GOAL_POSITIONS = 8
N_GOAL_ROLES = (len(GOAL_HEADS) + 1) * GOAL_POSITIONS
SYMBOL_KINDS = ("T", "F", "E", "V", "#")
N_SLOTS = 256
"""Slot embeddings per symbol kind; slot numbers beyond it wrap around."""
SECTIONS = ("arg", "key", "value")
N_HISTORY_FEATURES = HISTORY_K * len(SECTIONS)
PRIMITIVES = (
    "lookup",
    "get",
    "list",
    "filter",
    "aggregate",
    "create",
    "update",
    "delete",
    "link",
    "transition",
    "finish",
)
MAX_STEP_FEATURE = 16
"""Step counts with their own embedding; later steps share the last."""

_SYMBOL = re.compile(r"([TFEV])\+?(\d+)|#(-?\d+)|A(\d+|\?)")
_TOKENS: dict[str, tuple[int, int]] = {}
"""token -> (symbol kind, slot) or (-1, structural id) or (-2, tool position / -1); memoised."""


def classify(token: str) -> tuple[int, int]:
    """(symbol kind, slot) of a symbol, (-1, structural id) of any other token but a tool reference
    ``A<k>``, which is (-2, tool position, or -1 for ``A?``)."""
    hit = _TOKENS.get(token)
    if hit is not None:
        return hit
    match = _SYMBOL.fullmatch(token)
    if match is None:
        hit = (-1, STRUCT_ID.get(token, UNK))
    elif match.group(1):
        hit = (SYMBOL_KINDS.index(match.group(1)), int(match.group(2)) % N_SLOTS)
    elif match.group(3) is not None:
        hit = (SYMBOL_KINDS.index("#"), 0)  # numbers keep their identity within the episode, nothing more
    else:
        hit = (-2, -1 if match.group(4) == "?" else int(match.group(4)))
    if len(_TOKENS) < 1 << 16:
        _TOKENS[token] = hit
    return hit
