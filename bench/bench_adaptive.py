"""The adaptive design against the fixed one on simulated studies at a finished study's noise and cost.

Run: python bench/bench_adaptive.py [CONFIG ...] [--results DIR] [--sims 400] [--shares 0.7 0.8 0.9 1.0]
(CONFIG: overlays on config/config.yaml; DIR: a finished study's results; record in bench/README.md)

With ``--results`` the planner reads the study's truth and noise off its ``noise`` frame (the V tier)
and its CPU-seconds per run off its train jobs, as ``axisrl power --noise --results`` does; without,
the stated noise and GPU-hours of a cluster config (``config/studies/qwen3-8b.yaml``). The fixed design is the
config's (its seeds at every point); each adaptive design takes ``first_seeds`` seeds a point (2)
and then a second-wave budget of ``share`` times the fixed design's cost less the first wave's,
through ``planner.two_stage_study`` (the allocate checkpoint's code). Per design: runs and cost on
average, and each headline quantity's expected half-width with its Monte Carlo SE and its ratio to
the fixed design's; the smallest share whose every trend and slope half-width is at most the fixed
design's is printed last.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path

import polars as pl

from axisrl.artifacts import read_artifact
from axisrl.config import load_config
from axisrl.planner import QUANTITIES, plan, predict, predict_adaptive

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="*", type=Path, help="overlays on config/config.yaml")
    parser.add_argument("--results", type=Path, help="a finished study's results folder (its noise and run costs)")
    parser.add_argument("--sims", type=int, default=400)
    parser.add_argument("--first-seeds", type=int, default=2)
    parser.add_argument("--max-seeds", type=int, default=8)
    parser.add_argument("--shares", type=float, nargs="+", default=[0.6, 0.7, 0.8, 0.9, 1.0])
    args = parser.parse_args()
    config = load_config(ROOT / "config" / "config.yaml", *args.config, schema_path=ROOT / "config" / "schema.yaml")
    noise = None
    if args.results:
        (noise_path,) = (args.results / "laws").glob("*/noise.parquet")
        noise = read_artifact(noise_path, "laws")
    answer = plan(config, noise, args.results, n_sims=args.sims)
    design, truth, noise, cost = answer.design, answer.truth, answer.noise, answer.cost
    print(f"fixed: {design.label()}, {design.runs} runs, {cost.of(design):.0f} {cost.unit}; noise {noise.describe()}")
    started = time.time()
    fixed = predict(design, truth, noise, args.sims).select("quantity", "name", fixed="half_width")
    first = cost.of(replace(design, seeds=args.first_seeds))
    rows, reached = [], None
    for share in args.shares:
        settings = {
            "first_seeds": args.first_seeds,
            "budget": share * cost.of(design) - first,
            "max_seeds": args.max_seeds,
            "quantities": list(QUANTITIES),
        }
        two_stage = predict_adaptive(design, truth, noise, settings, cost, args.sims)
        compared = two_stage.predicted.join(fixed, on=["quantity", "name"]).with_columns(
            ratio=pl.col("half_width") / pl.col("fixed")
        )
        headline = compared.filter(pl.col("quantity").is_in(["trend", "alpha"]))
        if reached is None and (headline["half_width"] <= headline["fixed"]).all():
            reached = (share, two_stage.runs, two_stage.runs_se)
        rows.append(
            {
                "share": share,
                "runs": two_stage.runs,
                "runs_share": two_stage.runs / design.runs,
                "cost": two_stage.cost,
                **{
                    f"{q} {n}": f"{w:.4f}±{se:.4f} ({r:.2f})"
                    for q, n, w, se, r in compared.select(
                        "quantity", "name", "half_width", "half_width_se", "ratio"
                    ).iter_rows()
                },
            }
        )
    with pl.Config(tbl_rows=-1, tbl_cols=-1, tbl_width_chars=400, fmt_str_lengths=40):
        print(fixed)
        print(pl.DataFrame(rows).transpose(include_header=True))
    if reached:
        print(
            f"every trend and slope half-width reached at share {reached[0]}: {reached[1]:.1f} runs "
            f"(MC SE {reached[2]:.2f}) of the fixed design's {design.runs} ({reached[1] / design.runs:.0%})"
        )
    else:
        print("no share tried reaches every trend and slope half-width of the fixed design")
    print(f"{time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
