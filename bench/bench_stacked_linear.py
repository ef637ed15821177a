"""One linear layer of S seeds on their seed-contiguous rows, three ways: a loop of ``F.linear`` over the seeds' slices
(what ``PolicyStack`` does), one ``torch.baddbmm`` on the rows padded to [S, max rows, d], and ``torch.func.vmap`` of
``F.linear`` over stacked weights on the same padded rows (vmap needs equal shapes).

Run: python bench/bench_stacked_linear.py [--width 64] [--rows 40 400 1500] [--seeds 1 3 6]
Prints microseconds per layer application (median of 7 runs of 200) for each way, the padding and unpadding included
for bmm and vmap. Numbers to record in bench/README.md.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import statistics
import time

import torch
from torch.nn import functional as F


def timed(fn, repeats: int = 200) -> float:
    fn()
    runs = []
    for _ in range(7):
        started = time.perf_counter()
        for _ in range(repeats):
            fn()
        runs.append((time.perf_counter() - started) / repeats * 1e6)
    return statistics.median(runs)


def case(n_seeds: int, rows: int, d: int) -> str:
    """One line: the three ways at ``n_seeds`` seeds of about ``rows`` rows each (their counts differ a little)."""
    counts = [rows + 7 * s for s in range(n_seeds)]
    x = torch.randn(sum(counts), d)
    weight, bias = torch.randn(n_seeds, d, d), torch.randn(n_seeds, d)
    longest = max(counts)
    seed_of = torch.repeat_interleave(torch.arange(n_seeds), torch.tensor(counts))
    slot = torch.cat([torch.arange(c) for c in counts]) + seed_of * longest
    vmapped = torch.func.vmap(F.linear)

    def loop():
        return torch.cat([F.linear(part, weight[s], bias[s]) for s, part in enumerate(x.split(counts))])

    def padded(apply):
        grid = torch.zeros(n_seeds * longest, d).index_copy(0, slot, x).view(n_seeds, longest, d)
        return apply(grid).reshape(-1, d).index_select(0, slot)

    def bmm():
        return padded(lambda grid: torch.baddbmm(bias[:, None, :], grid, weight.transpose(1, 2)))

    def vmap():
        return padded(lambda grid: vmapped(grid, weight, bias))

    reference = loop()
    assert torch.allclose(bmm(), reference, atol=1e-4) and torch.allclose(vmap(), reference, atol=1e-4)
    return (
        f"seeds={n_seeds} rows/seed~{rows} width={d}: loop {timed(loop):.1f} us, "
        f"bmm (padded) {timed(bmm):.1f} us, vmap (padded) {timed(vmap):.1f} us"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--rows", type=int, nargs="+", default=[40, 400, 1500], help="rows per seed")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 3, 6])
    args = parser.parse_args()
    torch.set_num_threads(1)
    for n_seeds in args.seeds:
        for rows in args.rows:
            print(case(n_seeds, rows, args.width))


if __name__ == "__main__":
    main()
