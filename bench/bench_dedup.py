"""Speed of exact greedy embedding dedup on 100,000 x 384 float32 vectors (prints numbers; not a test).

Run: python bench/bench_dedup.py [--rows 100000] [--dims 384] [--repeats 1] [--no-baseline] [--case gaussian]

Two cases, each deduplicated at all thetas in one call of `greedy_threshold_keep`:
- realistic: 3,000 cluster centres and rows = centre + noise of norm U(0.1, 0.8) (row order random, about 33 rows
  per centre). Centres and noise draw coordinate i with standard deviation (i + 1) ** -0.5, so energy spreads over
  the axes more evenly than MiniLM embeddings of task instructions do (see bench_embed.py), i.e. the prefix bound
  gets less help than on real embeddings.
- gaussian: i.i.d. standard normal rows, the worst case: nothing is dropped, so every pair must be checked.
The baseline is the plain blocked greedy algorithm (float32 `B @ K.T`, then `B @ B.T`), run once per
theta. A subsample is also deduplicated with that algorithm in float64, which must give identical masks.
"""

import argparse
import os
import time

import numpy as np

from axisrl.dedup import greedy_threshold_keep

THETAS = (0.05, 0.10, 0.15, 0.20, 0.30)
STUDY_THETA = 0.15


def realistic_vectors(rows: int, dims: int, rng: np.random.Generator, centres: int = 3000) -> np.ndarray:
    """Near-duplicate clusters with a decaying spectrum (see module docstring)."""
    scale = (np.arange(dims) + 1.0) ** -0.5
    directions = rng.standard_normal((centres, dims)) * scale
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    noise = rng.standard_normal((rows, dims)) * scale
    noise *= rng.uniform(0.1, 0.8, size=(rows, 1)) / np.linalg.norm(noise, axis=1, keepdims=True)
    return (directions[rng.integers(0, centres, rows)] + noise).astype(np.float32)


def plain_blocked_keep(vectors: np.ndarray, theta: float, dtype: type, block_size: int = 1024) -> np.ndarray:
    """The plain blocked greedy dedup for one theta: drop rows near the kept set (one matmul), then walk the block."""
    units = vectors.astype(np.float64)
    norms = np.linalg.norm(units, axis=1)
    nonzero = norms > 0
    units[nonzero] /= norms[nonzero, None]
    units = units.astype(dtype)
    keep = ~nonzero
    row_ids = np.flatnonzero(nonzero)
    kept = np.empty((len(row_ids), units.shape[1]), dtype=dtype)
    n_kept = 0
    for start in range(0, len(row_ids), block_size):
        block_ids = row_ids[start : start + block_size]
        block = units[block_ids]
        alive = np.ones(len(block), dtype=bool)
        for first in range(0, n_kept, 4096):
            alive &= 1.0 - (block @ kept[first : min(first + 4096, n_kept)].T).max(axis=1) > theta
        similarities = block @ block.T
        for row in range(len(block)):
            if alive[row]:
                alive[row + 1 :] &= 1.0 - similarities[row, row + 1 :] > theta
        kept[n_kept : n_kept + alive.sum()] = block[alive]
        n_kept += alive.sum()
        keep[block_ids[alive]] = True
    return keep


def timed_keep(vectors: np.ndarray, thetas: tuple[float, ...], repeats: int) -> tuple[dict, list[float]]:
    """Masks and the wall-clock seconds of each of ``repeats`` identical runs."""
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        masks = greedy_threshold_keep(vectors, thetas)
        seconds.append(time.perf_counter() - start)
    return masks, seconds


def runs(seconds: list[float]) -> str:
    """Fastest run first: timings on a shared 2-vCPU VM vary by tens of percent."""
    return f"{min(seconds):.1f} s (runs: {', '.join(f'{s:.1f}' for s in seconds)})"


def matmul_gflops() -> float:
    """Best-of-20 float32 matmul speed (one 1024 x 2048 x 384 tile): the machine state behind the timings."""
    rng = np.random.default_rng(0)
    left, right = rng.standard_normal((1024, 384), dtype=np.float32), rng.standard_normal((2048, 384), dtype=np.float32)
    best = float("inf")
    for _ in range(20):
        start = time.perf_counter()
        left @ right.T
        best = min(best, time.perf_counter() - start)
    return 2 * 1024 * 2048 * 384 / best / 1e9


def bench_case(name: str, vectors: np.ndarray, repeats: int, baseline: bool, verify_rows: int) -> None:
    print(f"[{name}] float32 matmul now: {matmul_gflops():.0f} GFLOP/s", flush=True)
    masks, seconds = timed_keep(vectors, THETAS, repeats)
    kept = ", ".join(f"{theta}: {int(masks[theta].sum())}" for theta in THETAS)
    print(
        f"[{name}] fast, all {len(THETAS)} thetas in one call: {runs(seconds)}; rows kept per theta: {kept}", flush=True
    )
    single, single_seconds = timed_keep(vectors, (STUDY_THETA,), repeats)
    assert np.array_equal(single[STUDY_THETA], masks[STUDY_THETA])
    print(f"[{name}] fast, theta {STUDY_THETA} alone: {runs(single_seconds)}", flush=True)

    subsample = vectors[:verify_rows]
    fast = greedy_threshold_keep(subsample, THETAS)
    same = all(np.array_equal(fast[theta], plain_blocked_keep(subsample, theta, np.float64)) for theta in THETAS)
    print(f"[{name}] first {len(subsample)} rows: fast == plain blocked (float64) for every theta: {same}", flush=True)
    if not same:
        raise SystemExit("fast path disagrees with the plain blocked algorithm")

    print(f"[{name}] float32 matmul now: {matmul_gflops():.0f} GFLOP/s", flush=True)
    if baseline:
        plain, plain_seconds = {}, {}
        for theta in THETAS:
            start = time.perf_counter()
            plain[theta] = plain_blocked_keep(vectors, theta, np.float32)
            plain_seconds[theta] = time.perf_counter() - start
        total = sum(plain_seconds.values())
        differing = sum(int((plain[theta] != masks[theta]).sum()) for theta in THETAS)
        print(
            f"[{name}] plain blocked float32, one pass per theta: {total:.1f} s in all "
            f"({total / min(seconds):.1f}x the fast path; per theta: "
            f"{', '.join(f'{theta}: {s:.1f}' for theta, s in plain_seconds.items())}; theta {STUDY_THETA} alone "
            f"{plain_seconds[STUDY_THETA] / min(single_seconds):.1f}x); rows decided differently "
            f"(float32 vs float64 cosines at a threshold): {differing}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--dims", type=int, default=384)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--verify-rows", type=int, default=5000)
    parser.add_argument("--no-baseline", dest="baseline", action="store_false")
    parser.add_argument(
        "--case",
        choices=("realistic", "gaussian"),
        action="append",
        help="run only this case (repeatable); default: both",
    )
    args = parser.parse_args()

    print(
        f"{args.rows} x {args.dims} float32, thetas {THETAS}, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    rng = np.random.default_rng(args.seed)
    cases = {
        "realistic": realistic_vectors(args.rows, args.dims, rng),
        "gaussian": rng.standard_normal((args.rows, args.dims), dtype=np.float32),
    }
    for name in args.case or cases:
        bench_case(name, cases[name], args.repeats, args.baseline, args.verify_rows)


if __name__ == "__main__":
    main()
