"""Dedup maths against naive loops, and the packaged embedding model's basic contract."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from axisrl import dedup
from axisrl.dedup import first_occurrence_keep, greedy_threshold_keep, mean_pairwise_jaccard_distance

THETAS = (0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.6)


def naive_greedy_keep(vectors: np.ndarray, theta: float) -> np.ndarray:
    """The definition: walk rows in order, keep a row iff 1 - cosine > theta for every kept row."""
    units = vectors.astype(np.float64)
    norms = np.linalg.norm(units, axis=1)
    nonzero = norms > 0
    units[nonzero] /= norms[nonzero, None]
    keep = np.zeros(len(units), dtype=bool)
    kept: list[int] = []
    for row in range(len(units)):
        if not nonzero[row]:
            keep[row] = True
        elif all(1.0 - units[other] @ units[row] > theta for other in kept):
            kept.append(row)
            keep[row] = True
    return keep


def clustered_vectors(rng: np.random.Generator, n: int = 500, dims: int = 24) -> np.ndarray:
    """Anisotropic clusters with mixed spreads, exact duplicates and zero rows: distances span all thetas."""
    scale = (np.arange(dims) + 1.0) ** -0.7
    centres = rng.standard_normal((25, dims)) * scale
    spread = rng.choice([0.02, 0.1, 0.3, 0.6, 1.5], size=n)[:, None]
    vectors = centres[rng.integers(0, 25, n)] + spread * rng.standard_normal((n, dims)) * scale
    vectors[rng.integers(0, n, 40)] = vectors[rng.integers(0, n, 40)]
    vectors[rng.integers(0, n, 5)] = 0.0
    return vectors.astype(np.float32)


def assert_matches_naive(vectors: np.ndarray, **kwargs) -> None:
    got = greedy_threshold_keep(vectors, THETAS, **kwargs)
    assert set(got) == set(THETAS)
    for theta in THETAS:
        expected = naive_greedy_keep(vectors, theta)
        np.testing.assert_array_equal(got[theta], expected, err_msg=f"theta={theta} {kwargs}")


@pytest.mark.parametrize("block_size", [1, 7, 64, 1024])
@pytest.mark.parametrize("prefix_dims", [None, 1, 4, 24])
def test_greedy_matches_naive_on_clustered_data(block_size: int, prefix_dims: int | None) -> None:
    assert_matches_naive(clustered_vectors(np.random.default_rng(0)), block_size=block_size, prefix_dims=prefix_dims)


@pytest.mark.parametrize("block_size", [5, 128])
@pytest.mark.parametrize("prefix_dims", [None, 2, 6])
def test_greedy_matches_naive_on_gaussian_data(block_size: int, prefix_dims: int | None) -> None:
    # Few dimensions so that random directions are often within every theta of each other.
    vectors = np.random.default_rng(1).standard_normal((400, 6)).astype(np.float32)
    assert_matches_naive(vectors, block_size=block_size, prefix_dims=prefix_dims)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_greedy_matches_naive_just_around_the_threshold(dtype: type) -> None:
    """Pairs at cosine (1 - 0.15) +- 1e-9 .. 1e-4 must be decided on the exact cosine, not the float32 bound."""
    rng = np.random.default_rng(2)
    dims, offsets = 64, np.array([-1e-4, -1e-6, -1e-7, -1e-9, 1e-9, 1e-7, 1e-6, 1e-4])
    basis = np.linalg.qr(rng.standard_normal((dims, dims)))[0]
    angles = np.arccos(1 - 0.15 + offsets)
    anchors, partners = basis[: len(offsets)], basis[len(offsets) : 2 * len(offsets)]
    pairs = np.stack([anchors, np.cos(angles)[:, None] * anchors + np.sin(angles)[:, None] * partners], axis=1)
    vectors = pairs.reshape(-1, dims).astype(dtype)
    for prefix_dims in (None, 1, 8, dims):
        got = greedy_threshold_keep(vectors, [0.15], prefix_dims=prefix_dims)[0.15]
        np.testing.assert_array_equal(got, naive_greedy_keep(vectors, 0.15))
    if dtype is np.float64:  # float32 input moves each cosine by ~1e-7, so only float64 pins the expectation
        assert got.reshape(-1, 2)[:, 1].tolist() == (offsets < 0).tolist()


def test_greedy_result_does_not_depend_on_block_size() -> None:
    vectors = clustered_vectors(np.random.default_rng(3), n=1500, dims=48)
    reference = greedy_threshold_keep(vectors, THETAS, block_size=1500)
    for block_size in (3, 100, 511):
        got = greedy_threshold_keep(vectors, THETAS, block_size=block_size)
        for theta in THETAS:
            np.testing.assert_array_equal(got[theta], reference[theta])


def test_greedy_chosen_prefix_matches_full_dimension_screen() -> None:
    """From the row count where a prefix is chosen from a sample, the choice must not change the answer."""
    rng = np.random.default_rng(5)
    rows, dims = dedup._PREFIX_SEARCH_MIN_ROWS + 500, 256
    scale = 1.0 / (np.arange(dims) + 1.0)  # decaying spectrum, so a prefix shorter than dims is chosen
    centres = rng.standard_normal((300, dims)) * scale
    spread = rng.choice([0.1, 0.3, 1.0], size=(rows, 1))
    vectors = centres[rng.integers(0, 300, rows)] + spread * rng.standard_normal((rows, dims)) * scale
    thetas = THETAS[:-1]
    chosen = greedy_threshold_keep(vectors, thetas)
    full = greedy_threshold_keep(vectors, thetas, prefix_dims=dims)
    for theta in thetas:
        np.testing.assert_array_equal(chosen[theta], full[theta])


def test_greedy_exact_duplicates_and_zero_rows() -> None:
    vectors = np.array([[1.0, 0.0], [0.0, 0.0], [2.0, 0.0], [0.0, 0.0], [0.0, 3.0], [0.0, 1.0]], dtype=np.float32)
    got = greedy_threshold_keep(vectors, [0.1])[0.1]
    assert got.tolist() == [True, True, False, True, True, False]


def test_greedy_edge_cases() -> None:
    empty = greedy_threshold_keep(np.zeros((0, 4), dtype=np.float32), [0.1, 0.2])
    assert {theta: mask.shape for theta, mask in empty.items()} == {0.1: (0,), 0.2: (0,)}
    assert greedy_threshold_keep(np.zeros((3, 4)), [0.1])[0.1].all()
    assert greedy_threshold_keep(np.ones((3, 4)), []) == {}
    assert greedy_threshold_keep(np.ones((3, 4)), [2.0])[2.0].tolist() == [True, False, False]
    for bad_theta in (0.0, -0.1, 2.5):
        with pytest.raises(ValueError, match="thetas"):
            greedy_threshold_keep(np.ones((3, 4)), [bad_theta])
    with pytest.raises(ValueError, match="NaN"):
        greedy_threshold_keep(np.array([[np.nan, 1.0]]), [0.1])
    with pytest.raises(ValueError, match="prefix_dims"):
        greedy_threshold_keep(np.ones((3, 4)), [0.1], prefix_dims=5)


def test_first_occurrence_keep() -> None:
    keys = ["a", "b", "a", ("t", 1), "c", ("t", 1), "b"]
    assert first_occurrence_keep(keys).tolist() == [True, True, False, True, True, False, False]
    assert first_occurrence_keep([]).shape == (0,)


def naive_mean_jaccard_distance(sets: list[frozenset[str]]) -> float:
    distances = [0.0 if not (a | b) else 1.0 - len(a & b) / len(a | b) for a, b in itertools.combinations(sets, 2)]
    return float(np.mean(distances))


@pytest.mark.parametrize("tile_elements", [dedup._SCORE_TILE_ELEMENTS, 50])
def test_mean_pairwise_jaccard_matches_naive(monkeypatch: pytest.MonkeyPatch, tile_elements: int) -> None:
    monkeypatch.setattr(dedup, "_SCORE_TILE_ELEMENTS", tile_elements)  # 50 forces many row chunks
    rng = np.random.default_rng(4)
    tokens = [f"tool:t{i}" for i in range(30)]
    sets = [frozenset(rng.choice(tokens, size=rng.integers(0, 8), replace=False)) for _ in range(60)]
    sets += [frozenset(), frozenset(), sets[3]]
    assert mean_pairwise_jaccard_distance(sets) == pytest.approx(naive_mean_jaccard_distance(sets), abs=1e-12)


def test_mean_pairwise_jaccard_edge_cases() -> None:
    assert np.isnan(mean_pairwise_jaccard_distance([]))
    assert np.isnan(mean_pairwise_jaccard_distance([frozenset({"a"})]))
    assert mean_pairwise_jaccard_distance([frozenset(), frozenset()]) == 0.0
    assert mean_pairwise_jaccard_distance([frozenset({"a"}), frozenset()]) == 1.0
    assert mean_pairwise_jaccard_distance([frozenset({"a", "b"}), frozenset({"b", "c"})]) == pytest.approx(2 / 3)


@pytest.fixture(scope="module")
def packaged_embeddings() -> tuple[list[str], np.ndarray]:
    from axisrl.embedding import PACKAGED_MODEL, embed_texts

    texts = [
        "Set the quantity of order ABX-0042 for customer Zarvel to 7.",
        "Cancel order QRT-9917 placed by Imrana.",
        "Set the quantity of order ABX-0042 for customer Zarvel to 7.",
        "",
    ]
    return texts, embed_texts(texts, PACKAGED_MODEL, batch_size=2)


@pytest.mark.slow  # loading the model takes 6-12 s
def test_packaged_embeddings_shape_and_normalisation(packaged_embeddings: tuple[list[str], np.ndarray]) -> None:
    texts, embeddings = packaged_embeddings
    assert embeddings.shape == (len(texts), 384) and embeddings.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(embeddings, axis=1), 1.0, atol=1e-5)
    assert float(embeddings[0] @ embeddings[2]) == pytest.approx(1.0, abs=1e-6)
    assert float(embeddings[0] @ embeddings[1]) < 0.9


@pytest.mark.slow
def test_packaged_embeddings_are_deterministic(packaged_embeddings: tuple[list[str], np.ndarray]) -> None:
    from axisrl.embedding import PACKAGED_MODEL, embed_texts

    texts, embeddings = packaged_embeddings
    np.testing.assert_array_equal(embed_texts(texts, PACKAGED_MODEL, batch_size=2), embeddings)
    assert embed_texts([], PACKAGED_MODEL).shape == (0, 384)


@pytest.mark.parametrize("domain", ["toolworld", "webworld", "repoworld"])
def test_an_empty_pool_gets_its_signature_columns_empty(domain: str) -> None:
    """``synthesize.placebo_contents: 0`` makes an empty placebo pool, which dedup signs like any other."""
    import polars as pl

    from axisrl.stages.pools import ENV_COLUMNS

    frame = dedup.env_signatures(pl.DataFrame(schema=ENV_COLUMNS), domain)
    assert frame.is_empty() and {*dedup.ENV_SIGNATURES, "env_s1", "distinct_s1", "level"} <= set(frame.columns)
