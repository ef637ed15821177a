"""The calibration of the learning-curve fits (issue 51) on simulated curve studies (prints numbers; not a test).

Run: python bench/bench_curves.py [--studies 400] [--percentile 100] [--seed 0]

Each study is three one-axis sweeps of three points (seven designs), 2-4 seeds a point drawn per study,
11 evaluations a run on 256 V episodes, seed noise of the default study (``axisrl.laws.curves_sim``).
Prints the coverage of the nominal 95 % intervals of A, B, C_mid, of the asymptote laws' exponents and of
the extrapolation intervals, the coverage of A by seed count, the same studies' plain percentile intervals
(``--percentile`` studies; 0 skips them) and the fit time, on one core.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core, before numpy is imported
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import platform
import warnings

import polars as pl

from axisrl.laws.curves_sim import CurveLaw, calibrate


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            return next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or "unknown"


def _by_seeds(points: pl.DataFrame) -> pl.DataFrame:
    covered = (pl.col("A_lo") <= pl.col("A_true")) & (pl.col("A_true") <= pl.col("A_hi"))
    return (
        points.filter(pl.col("A_lo").is_not_null())
        .group_by("n_seeds")
        .agg(n=pl.len(), coverage_A=covered.mean(), mean_width_A=(pl.col("A_hi") - pl.col("A_lo")).mean())
        .sort("n_seeds")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=400)
    parser.add_argument("--percentile", type=int, default=100, help="studies for the percentile comparison")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    pl.Config.set_tbl_rows(40)
    pl.Config.set_tbl_width_chars(160)
    print(f"CPU: {_cpu()}, one core")
    runs = [("from a base (R0 fixed at its measured V success)", CurveLaw(), args.studies, True)]
    runs.append(("random init (R0 fitted)", CurveLaw(r0=None), max(args.studies // 4, 1), False))
    for title, law, studies, extrapolation in runs:
        result = calibrate(studies, law=law, seed=args.seed, extrapolation=extrapolation)
        print(f"\n{title}: {studies} studies, {result.points.height} points, {result.seconds:.1f} s")
        print(result.summary)
        print(_by_seeds(result.points))
    if args.percentile:
        result = calibrate(args.percentile, seed=args.seed, extrapolation=False, interval="percentile")
        print(f"\nplain percentile intervals of the same bootstrap: {args.percentile} studies, {result.seconds:.1f} s")
        print(result.summary.filter(pl.col("quantity").is_in(["A", "B", "C_mid"])))
        print(_by_seeds(result.points))


if __name__ == "__main__":
    main()
