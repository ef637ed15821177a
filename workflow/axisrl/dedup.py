"""Deduplication: signature-level environment identity, task keep-flags and pool diversity.

The study reports the effective number of distinct tasks and environments at a distance threshold
theta, so the greedy threshold rule must give the exact sequential answer (each task kept only if it
is farther than theta from every task kept before it), not an approximation; the NumPy core below
does that exactly, and the frame-level functions after it apply it to a pool.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import polars as pl

from axisrl import domains

_UNIT_ROUNDOFF_F32 = 2.0**-24
_SAMPLE_ROWS = 2048
# Below this many rows, screening every pair at full dimension costs less than choosing a prefix.
_PREFIX_SEARCH_MIN_ROWS = 4 * _SAMPLE_ROWS
_SCORE_TILE_ELEMENTS = 2**21
# All-in cost of one candidate pair (extraction, float64 confirmation, per-theta bookkeeping: about 2 us)
# in units of one screened dimension of the float32 matmul (about 19 ps), both measured on 2 cores.
# It only steers the speed of the prefix choice, never the result; too short a prefix is the costly error.
_CONFIRM_COST_IN_DIMS = 100_000
_CONFIRM_CHUNK_PAIRS = 8192


def greedy_threshold_keep(
    vectors: np.ndarray,
    thetas: Sequence[float],
    block_size: int = 1024,
    *,
    prefix_dims: int | None = None,
) -> dict[float, np.ndarray]:
    """Keep-masks of exact sequential greedy dedup by cosine distance, one per theta.

    Walking the rows in the given order, a row is kept iff its cosine distance (1 - cosine) to every
    previously kept row is > theta; the caller fixes the order because the answer depends on it.
    The cosine of two rows is the float64 dot product of the rows after float64 L2 normalisation, so the
    masks equal a naive O(n^2) loop computed that way (up to the last float64 bit for pairs lying exactly
    on a threshold). All-zero rows have no direction: they are always kept and never remove another row.

    Speed: rows are rotated once onto their principal axes, and a float32 matmul over the
    first ``prefix_dims`` rotated coordinates plus the residual norms gives an upper bound on every
    cosine (``cos <= x_p . y_p + |x_r| |y_r|``) with a margin covering float32 rounding. Only pairs whose
    bound reaches the loosest threshold are confirmed in float64, so the bound never changes the answer.
    One pass serves all thetas. ``prefix_dims=None`` picks the prefix from a sample (the full dimension
    below 8,192 rows); the full dimension makes the screen a plain float32 cosine.
    """
    thetas_sorted = _validated_thetas(thetas)
    if vectors.ndim != 2:
        raise ValueError(f"vectors must be 2-D, got shape {vectors.shape}")
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    units = vectors.astype(np.float64)
    if not np.isfinite(units).all():
        raise ValueError("vectors contain NaN or infinity")
    norms = np.linalg.norm(units, axis=1)
    nonzero = norms > 0
    units[nonzero] /= norms[nonzero, None]

    keep = np.zeros((len(thetas_sorted), len(units)), dtype=bool)
    keep[:, ~nonzero] = True
    if nonzero.any() and len(thetas_sorted):
        _greedy_nonzero_rows(units, np.flatnonzero(nonzero), thetas_sorted, block_size, prefix_dims, keep)
    by_theta = dict(zip(thetas_sorted.tolist(), keep))
    return {float(theta): by_theta[float(theta)].copy() for theta in thetas}


def _validated_thetas(thetas: Sequence[float]) -> np.ndarray:
    """Distinct thetas, ascending; theta <= 0 is refused because rounding would decide exact duplicates."""
    values = np.unique(np.asarray(thetas, dtype=np.float64))
    if values.size and not (values[0] > 0 and values[-1] <= 2):
        raise ValueError(f"thetas must lie in (0, 2] (use first_occurrence_keep for exact duplicates), got {thetas}")
    return values


def _greedy_nonzero_rows(
    units: np.ndarray,
    row_ids: np.ndarray,
    thetas: np.ndarray,
    block_size: int,
    prefix_dims: int | None,
    keep: np.ndarray,
) -> None:
    """Fill ``keep`` for the non-zero rows ``row_ids`` (ascending) block by block."""
    dims = units.shape[1]
    if prefix_dims is not None and not 1 <= prefix_dims <= dims:
        raise ValueError(f"prefix_dims must lie in [1, {dims}], got {prefix_dims}")
    if prefix_dims is None and len(row_ids) < _PREFIX_SEARCH_MIN_ROWS:
        prefix_dims = dims
    if prefix_dims == dims:
        prefixes = units[row_ids]
    else:
        rotation = _principal_axes(units)
        if prefix_dims is None:
            prefix_dims = _cheapest_prefix_dims(units[_sample_ids(row_ids)] @ rotation, thetas[-1])
        prefixes = units[row_ids] @ rotation[:, :prefix_dims]
    margin = _bound_margin(prefix_dims)
    loosest_threshold = 1.0 - thetas[-1] - margin

    # Screen rows: [prefix, residual norm, 1]. Kept rows are stored as [prefix, residual norm, -threshold],
    # so a score >= 0 means "the bound reaches the loosest threshold under which that kept row counts".
    screen = _screen_rows(prefixes)
    kept_screen = np.empty_like(screen)
    kept_ids = np.empty(len(row_ids), dtype=np.int64)
    n_kept = 0
    tile_columns = max(256, _SCORE_TILE_ELEMENTS // block_size)

    for start in range(0, len(row_ids), block_size):
        block_ids = row_ids[start : start + block_size]
        block_screen = screen[start : start + block_size]
        alive = np.ones((len(thetas), len(block_ids)), dtype=bool)

        rows, cols = _screen_hits(block_screen, kept_screen[:n_kept], tile_columns)
        kept_partners = kept_ids[cols]
        cosines = _confirm_cosines(units, block_ids[rows], kept_partners)
        for t, theta in enumerate(thetas):
            duplicate = keep[t, kept_partners] & ~(1.0 - cosines > theta)
            alive[t, rows[duplicate]] = False

        survivors = np.flatnonzero(alive.any(axis=0))
        survivor_screen = block_screen[survivors]
        as_kept = survivor_screen.copy()
        as_kept[:, -1] = -loosest_threshold
        earlier, later = np.nonzero(np.triu(survivor_screen @ as_kept.T >= 0, k=1))
        earlier, later = survivors[earlier], survivors[later]
        cosines = _confirm_cosines(units, block_ids[earlier], block_ids[later])
        for t, theta in enumerate(thetas):
            duplicate = ~(1.0 - cosines > theta)
            _resolve_in_order(alive[t], earlier[duplicate], later[duplicate])
        keep[:, block_ids] = alive

        new_kept = np.flatnonzero(alive.any(axis=0))
        loosest_kept_theta = thetas[len(thetas) - 1 - np.argmax(alive[::-1, new_kept], axis=0)]
        added = slice(n_kept, n_kept + len(new_kept))
        kept_screen[added] = block_screen[new_kept]
        kept_screen[added, -1] = -(1.0 - loosest_kept_theta - margin)
        kept_ids[added] = block_ids[new_kept]
        n_kept += len(new_kept)


def _sample_ids(row_ids: np.ndarray) -> np.ndarray:
    """A fixed random sample of rows; it only steers speed, so a fixed seed keeps runs reproducible."""
    if len(row_ids) <= _SAMPLE_ROWS:
        return row_ids
    return np.sort(np.random.default_rng(0).choice(row_ids, size=_SAMPLE_ROWS, replace=False))


def _principal_axes(units: np.ndarray) -> np.ndarray:
    """Orthonormal axes by decreasing energy (uncentred), so a short prefix holds most of each row.

    Fitted on all rows: axes fitted on a small sample overstate the prefix energy of that same sample.
    """
    _, axes = np.linalg.eigh(units.T @ units)
    return axes[:, ::-1].copy()


def _bound_margin(prefix_dims: int) -> float:
    """Slack that covers float32 rounding of the inputs and of a (prefix_dims + 2)-term dot product.

    By Cauchy-Schwarz the absolute terms sum to at most 1 + |threshold| <= 2 + margin (theta <= 2), so
    the rounding error is below about 2 * (prefix_dims + 4) * u; four times that is used. It also dwarfs
    the float64 errors of the rotation and of the residual norm (< 1e-7).
    """
    return 8.0 * (prefix_dims + 4) * _UNIT_ROUNDOFF_F32


def _screen_rows(prefixes: np.ndarray) -> np.ndarray:
    """float32 rows [prefix, residual norm, 1]; the residual norm follows from the rows being unit length."""
    residual = np.sqrt(np.clip(1.0 - np.einsum("ij,ij->i", prefixes, prefixes), 0.0, None))
    return np.hstack([prefixes, residual[:, None], np.ones((len(prefixes), 1))]).astype(np.float32)


def _cheapest_prefix_dims(rotated_sample: np.ndarray, largest_theta: float) -> int:
    """Prefix length minimising screen cost plus candidate-pair cost, estimated on sample pairs."""
    rows, dims = rotated_sample.shape
    candidates = np.unique(np.r_[np.geomspace(8, dims, num=32).astype(int), dims].clip(1, dims))
    pairs = max(1, rows * (rows - 1))
    costs = []
    for prefix_dims in candidates:
        screen = _screen_rows(rotated_sample[:, :prefix_dims])[:, :-1]
        bounds = screen @ screen.T
        threshold = 1.0 - largest_theta - _bound_margin(prefix_dims)
        hits = np.count_nonzero(bounds >= threshold) - np.count_nonzero(np.diag(bounds) >= threshold)
        costs.append(prefix_dims + _CONFIRM_COST_IN_DIMS * hits / pairs)
    return int(candidates[np.argmin(costs)])


def _screen_hits(block_screen: np.ndarray, kept_screen: np.ndarray, tile_columns: int) -> tuple[np.ndarray, np.ndarray]:
    """(block row, kept row) pairs whose cosine bound reaches the kept row's threshold."""
    rows, cols = [np.empty(0, dtype=np.int64)], [np.empty(0, dtype=np.int64)]
    for first in range(0, len(kept_screen), tile_columns):
        scores = block_screen @ kept_screen[first : first + tile_columns].T
        row, col = np.divmod(np.flatnonzero(scores >= 0), scores.shape[1])
        rows.append(row)
        cols.append(col + first)
    return np.concatenate(rows), np.concatenate(cols)


def _confirm_cosines(units: np.ndarray, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """float64 cosines of row pairs, in chunks so the gathered rows stay small."""
    cosines = np.empty(len(left))
    for first in range(0, len(left), _CONFIRM_CHUNK_PAIRS):
        chunk = slice(first, first + _CONFIRM_CHUNK_PAIRS)
        cosines[chunk] = np.einsum("ij,ij->i", units[left[chunk]], units[right[chunk]])
    return cosines


def _resolve_in_order(alive: np.ndarray, earlier: np.ndarray, later: np.ndarray) -> None:
    """Sequential greedy inside a block: each still-alive row removes its later duplicates.

    ``earlier`` must be ascending (np.nonzero order); rows without an earlier duplicate need no visit.
    """
    if earlier.size == 0:
        return
    starts = np.flatnonzero(np.r_[True, earlier[1:] != earlier[:-1]])
    for first, stop in zip(starts, np.r_[starts[1:], len(earlier)]):
        if alive[earlier[first]]:
            alive[later[first:stop]] = False


def first_occurrence_keep(keys: Sequence[Hashable]) -> np.ndarray:
    """Bool mask keeping the first row of each key in the given order (exact-duplicate dedup)."""
    seen: set[Hashable] = set()
    keep = np.zeros(len(keys), dtype=bool)
    for row, key in enumerate(keys):
        if key not in seen:
            seen.add(key)
            keep[row] = True
    return keep


def mean_pairwise_jaccard_distance(sets: Sequence[frozenset[str]]) -> float:
    """Mean Jaccard distance over all unordered pairs; two empty sets are at distance 0; NaN below 2 sets.

    Intersections come from a float32 matmul of the binary incidence matrix (exact integer counts below
    2**24), in row chunks so memory stays O(chunk * len(sets)); cost is O(len(sets)^2 * vocabulary).
    """
    n = len(sets)
    if n < 2:
        return float("nan")
    vocabulary = {token: column for column, token in enumerate(set().union(*sets))}
    incidence = np.zeros((n, len(vocabulary)), dtype=np.float32)
    for row, tokens in enumerate(sets):
        incidence[row, [vocabulary[token] for token in tokens]] = 1.0
    sizes = incidence.sum(axis=1, dtype=np.float64)
    chunk_rows = max(1, _SCORE_TILE_ELEMENTS // n)
    similarity_sum = 0.0
    for first in range(0, n, chunk_rows):
        chunk = slice(first, min(first + chunk_rows, n))
        intersections = (incidence[chunk] @ incidence.T).astype(np.float64)
        unions = sizes[chunk, None] + sizes[None, :] - intersections
        similarity = np.divide(intersections, unions, out=np.ones_like(unions), where=unions > 0)
        later_pairs = np.arange(n)[None, :] > np.arange(chunk.start, chunk.stop)[:, None]
        similarity_sum += similarity[later_pairs].sum()
    return 1.0 - similarity_sum / (n * (n - 1) / 2)


ENV_SIGNATURES = ("sig_api", "sig_schema", "sig_sem", "sig_ver", "skin")
"""What every domain's ``signatures`` gives an environment (an empty pool gets these columns, empty)."""

ENV_LEVELS = ("s3", "s2", "s1")
"""Environment identity levels, coarse to fine: API set / + state schema / + transition semantics."""


def _short_hash(*parts: str) -> str:
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def env_signatures(envs: pl.DataFrame, domain: str = "toolworld") -> pl.DataFrame:
    """Add the signature columns, the S3/S2/S1 identities and first-occurrence flags per level.

    ``env_s3`` = API set, ``env_s2`` = (API set, schema), ``env_s1`` = (API set, schema,
    semantics). ``distinct_<level>`` keeps the first row of each identity in generation order,
    and ``level`` says at which level a distinct (S1) environment first differs from the ones
    before it: a new API set (S3), a new schema under a seen API set (S2), or new semantics only (S1).
    """
    signatures = domains.load(domain).signatures
    rows = [signatures(json.loads(s)) for s in envs["spec"]]
    sigs = pl.DataFrame(rows) if rows else pl.DataFrame(schema=dict.fromkeys(ENV_SIGNATURES, pl.String))
    frame = pl.concat([envs, sigs], how="horizontal").with_columns(
        env_s3=pl.col("sig_api"),
        env_s2=pl.struct("sig_api", "sig_schema").map_elements(
            lambda s: _short_hash(s["sig_api"], s["sig_schema"]), return_dtype=pl.String
        ),
        env_s1=pl.struct("sig_api", "sig_schema", "sig_sem").map_elements(
            lambda s: _short_hash(s["sig_api"], s["sig_schema"], s["sig_sem"]), return_dtype=pl.String
        ),
    )
    frame = frame.with_columns(
        pl.Series(f"distinct_{level}", first_occurrence_keep(frame[f"env_{level}"].to_list())) for level in ENV_LEVELS
    )
    level = (
        pl.when(~pl.col("distinct_s1"))
        .then(None)
        .when(pl.col("distinct_s3"))
        .then(pl.lit("S3"))
        .when(pl.col("distinct_s2"))
        .then(pl.lit("S2"))
        .otherwise(pl.lit("S1"))
    )
    return frame.with_columns(level=level)


def pool_stats(envs: pl.DataFrame, split: str, domain: str = "toolworld") -> dict[str, Any]:
    """One row of Table 6: diversity of the signature-distinct environments of a pool."""
    tokens = domains.load(domain)
    distinct = envs.filter(pl.col("distinct_s1"))
    specs = [json.loads(s) for s in distinct["spec"]]
    counts = {level: int((distinct["level"] == level.upper()).sum()) for level in ENV_LEVELS}
    n = max(distinct.height, 1)
    return {
        "split": split,
        "n_raw": envs.height,
        "n_distinct": distinct.height,
        "n_worlds": distinct["world_id"].n_unique(),
        "n_skins": envs["skin"].n_unique(),
        **{f"n_{level}": counts[level] for level in ENV_LEVELS},
        **{f"share_{level}": counts[level] / n for level in ENV_LEVELS},
        "jaccard_tools": mean_pairwise_jaccard_distance([tokens.tool_tokens(s) for s in specs]),
        "jaccard_schema": mean_pairwise_jaccard_distance([tokens.schema_tokens(s) for s in specs]),
        "transition_diversity": mean_pairwise_jaccard_distance([tokens.transition_tokens(s) for s in specs]),
    }


def check_heldout_disjoint(train: pl.DataFrame, heldout: pl.DataFrame) -> None:
    """The unseen-world tiers (T2 and the validation tier V) must share no environment identity or
    skin with training."""
    unseen = heldout.filter(pl.col("tier").is_in(["T2", "V"]))
    for column in ("env_s1", "skin"):
        shared = set(unseen[column]) & set(train[column])
        if shared:
            raise ValueError(
                f"held-out T2/V pool overlaps training: {len(shared)} shared {column} value(s), "
                f"e.g. {sorted(shared)[0]}; the held-out split would leak"
            )


def theta_column(theta: float) -> str:
    return f"keep_emb_{theta:g}"


TASK_RULES = {"raw": "keep_raw", "skill_sig": "keep_skill", "verifier_sig": "keep_verifier"}
"""The non-embedding dedup rules and their keep-flag columns."""


def task_keep_flags(
    tasks: pl.DataFrame,
    embeddings: pl.DataFrame,
    thetas: Sequence[float],
    theta: float,
    block_size: int,
    task_rule: str = "embedding",
) -> pl.DataFrame:
    """One keep flag per dedup rule (Table 15) and per embedding threshold (Table 14).

    Rules walk tasks in ``task_id`` order (a content hash, so the order is fixed and unrelated to
    generation order). ``keep`` is ``task_rule``'s flag: by default embedding distance > ``theta``.
    """
    ordered = tasks.join(embeddings.select("task_id", "embedding"), on="task_id", how="left").sort("task_id")
    missing = ordered["embedding"].null_count()
    if missing:
        raise ValueError(f"{missing} task(s) have no embedding; the embed artifact does not match the tasks")
    vectors = ordered["embedding"].to_numpy().astype(np.float32, copy=False)
    keeps = greedy_threshold_keep(vectors, thetas, block_size=block_size)
    flags = (
        ordered.select("task_id")
        .with_columns(
            keep_raw=pl.lit(True),
            keep_skill=pl.Series(first_occurrence_keep(list(zip(ordered["env_s1"], ordered["skill_sig"])))),
            keep_verifier=pl.Series(first_occurrence_keep(list(zip(ordered["env_s1"], ordered["verifier_sig"])))),
            **{theta_column(t): pl.Series(keeps[t]) for t in thetas},
        )
        .with_columns(keep=pl.col(TASK_RULES.get(task_rule, theta_column(theta))))
    )
    return tasks.join(flags, on="task_id", how="left", maintain_order="left")


def task_dedup_summary(tasks: pl.DataFrame, split: str, thetas: Sequence[float]) -> list[dict[str, Any]]:
    """Effective D_T under each rule: the rows behind Tables 14 and 15."""
    rules = [(rule, None, column) for rule, column in TASK_RULES.items()]
    rules += [("embedding", t, theta_column(t)) for t in thetas]
    return [
        {
            "split": split,
            "rule": rule,
            "theta": theta,
            "column": column,
            "n_raw": tasks.height,
            "n_kept": int(tasks[column].sum()),
        }
        for rule, theta, column in rules
    ]
