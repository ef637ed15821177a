"""The search over designs: every coarser grid, other seed count and T2 pool of a design
(``candidates``), each predicted and priced (``search``), cheapest first. Apart as the one user of
both the predictions and the cost."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import replace

import polars as pl

from axisrl.laws.simulate import NoiseModel, SweepNoise
from axisrl.plan import spread
from axisrl.planner.cost import POOL_FACTORS, RunCost
from axisrl.planner.model import QUANTITIES, SweepDesign, Truth
from axisrl.planner.simulate import predict


def candidates(design: SweepDesign, seeds: Sequence[int], pools: Sequence[float] = (1.0,)) -> list[SweepDesign]:
    """The design with every other seed count and every coarser grid over the same range
    (``plan.spread``, the centre kept), down to the 3 points a slope's interval needs, at each T2
    pool in ``pools`` (multiples of the design's episodes per run)."""
    longest = max(len(values) for values in design.grids.values())
    designs: dict[tuple, SweepDesign] = {}
    for n_seeds, n_points, pool in itertools.product(seeds, range(3, longest + 1), pools):
        grids = {
            axis: tuple(sorted({*spread(values, n_points), design.centre[axis]}))
            for axis, values in design.grids.items()
        }
        episodes = max(1, round(design.episodes * pool))
        designs.setdefault(
            (n_seeds, episodes, *grids.values()), replace(design, grids=grids, seeds=n_seeds, episodes=episodes)
        )
    return list(designs.values())


def search(
    design: SweepDesign,
    truth: Truth,
    noise: NoiseModel | SweepNoise,
    cost: RunCost,
    seeds: Sequence[int] = (2, 3, 4, 6, 8),
    n_sims: int = 30,
) -> pl.DataFrame:
    """Every candidate design (``candidates``, and each at the T2 pools of ``POOL_FACTORS`` where
    ``cost`` prices a held-out episode): its cost and the largest expected half-width of each kind
    of quantity, cheapest first."""
    rows = []
    for candidate in candidates(design, seeds, POOL_FACTORS if cost.per_episode > 0 else (1.0,)):
        widths = predict(candidate, truth, noise, n_sims).group_by("quantity").agg(pl.col("half_width").max())
        widest = dict(widths.iter_rows())
        rows.append(
            {
                "design": candidate.label(),
                "seeds": candidate.seeds,
                "episodes": candidate.episodes,
                "runs": candidate.runs,
                "cost": cost.of(candidate),
                **{f"max_half_width_{q}": widest.get(q) for q in QUANTITIES},
            }
        )
    return pl.DataFrame(rows).sort("cost")
