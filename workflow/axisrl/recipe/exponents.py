"""Recipe exponents ``a_i = d ln x_i* / d ln C``: fitted slopes of the optimal path, re-solved per
bootstrap draw of the law for intervals, and the paper's normalisation for comparison.

The paper's ``alpha_i / sum alpha_j`` is available only as ``paper_convention``: it solves no
Lagrangian of an additive power law (``docs/methods.md``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import polars as pl

from axisrl.laws.joint import Law
from axisrl.recipe.cost import RECIPE_AXES, Cost, SyntheticOption
from axisrl.recipe.problem import Bounds
from axisrl.recipe.solve import draw_path

EXPONENT_SCHEMA = {
    "axis": pl.String,
    "slope": pl.Float64,
    "local_low": pl.Float64,
    "local_mid": pl.Float64,
    "local_high": pl.Float64,
    "c_low": pl.Float64,
    "c_mid": pl.Float64,
    "c_high": pl.Float64,
    "pinned": pl.Boolean,
}


def exponents(path: pl.DataFrame) -> pl.DataFrame:
    """Recipe exponents ``a_i = d ln x_i* / d ln C`` of a ``recipe_path``.

    One row per axis: ``slope`` (OLS of ``ln x_i*`` on ``ln C`` over ``[c_low, c_high]``), local slopes at
    the lowest, middle and highest budget (the path's ``local_<axis>`` columns, else a second-order
    finite difference along the path), and ``pinned`` (held at a bound at every budget, or fixed:
    slopes 0). Then ``sum`` (unweighted: 1 only for a unit monomial cost) and ``share_weighted_sum``
    (``sum_i (eps_i/C) a_i`` with local slopes, which is 1 at every budget when the synthetic ratios
    do not move; it has no OLS ``slope``).
    """
    if path.height < 3:
        raise ValueError("exponents need a path of at least 3 budgets")
    ln_c = np.log(path["compute"].to_numpy())
    ends = (0, path.height // 2, path.height - 1)
    c_range = {
        "c_low": float(path["compute"][0]),
        "c_mid": float(path["compute"][ends[1]]),
        "c_high": float(path["compute"][-1]),
    }
    binding = path["binding"].to_list()
    rows, locals_ = [], {}
    for axis in RECIPE_AXES:
        ln_x = np.log(path[axis].to_numpy())
        pinned = bool(np.ptp(ln_x) == 0 or all(f"{axis}>=lower" in b or f"{axis}<=upper" in b for b in binding))
        local = (
            path[f"local_{axis}"].to_numpy()
            if f"local_{axis}" in path.columns
            else np.gradient(ln_x, ln_c, edge_order=2)
        )
        locals_[axis] = np.zeros_like(ln_c) if pinned else local
        slope = 0.0 if pinned else float(np.polyfit(ln_c, ln_x, 1)[0])
        rows.append(
            {
                "axis": axis,
                "slope": slope,
                **{
                    f"local_{end}": float(locals_[axis][k]) for end, k in zip(("low", "mid", "high"), ends, strict=True)
                },
                **c_range,
                "pinned": pinned,
            }
        )
    weighted = sum(path[f"share_{a}"].to_numpy() * locals_[a] for a in RECIPE_AXES)
    rows.append(
        {
            "axis": "sum",
            "slope": sum(r["slope"] for r in rows),
            **{
                f"local_{end}": float(sum(locals_[a][k] for a in RECIPE_AXES))
                for end, k in zip(("low", "mid", "high"), ends, strict=True)
            },
            **c_range,
            "pinned": None,
        }
    )
    rows.append(
        {
            "axis": "share_weighted_sum",
            "slope": None,
            **{f"local_{end}": float(weighted[k]) for end, k in zip(("low", "mid", "high"), ends, strict=True)},
            **c_range,
            "pinned": None,
        }
    )
    return pl.DataFrame(rows, schema=EXPONENT_SCHEMA)


def paper_convention(law: Law) -> pl.DataFrame:
    """The paper's normalisation ``alpha_i / sum_j alpha_j`` per axis, labelled as such.

    It is NOT a solution of the Lagrangian of any additive power law (that gives the inverse
    ordering, ``(1/alpha_i) / sum_j 1/alpha_j`` for a product cost); it equals the budget shares
    of a Cobb-Douglas success model under linear costs (``docs/methods.md``). Kept only so that the
    paper's table can be reproduced next to the solved exponents. An axis whose fitted amplitude
    ``A_i`` is 0 has no effect on the loss, whatever its exponent, and counts as ``alpha_i = 0``.
    """
    alpha = {a: law.alpha[a] if law.A[a] > 0 else 0.0 for a in law.alpha}
    total = sum(alpha.values())
    return pl.DataFrame(
        [
            {
                "axis": a,
                "alpha": alpha[a],
                "paper_exponent": alpha[a] / total if total > 0 else None,
                "convention": "paper: alpha_i / sum_j alpha_j (not a Lagrangian solution)",
            }
            for a in RECIPE_AXES
            if a in law.alpha
        ]
    )


def bootstrap_exponents(
    laws: Sequence[Law],
    cost_model: Cost,
    budgets: Sequence[float],
    *,
    bounds: Bounds,
    fixed: Mapping[str, float] | None = None,
    synthetic: Mapping[str, SyntheticOption] | None = None,
    starts: int = 4,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Exponents re-solved for every bootstrap draw of the law (``draw_path``): (draws, intervals).

    ``draws``: ``draw``, ``axis`` (the four axes and ``sum``), OLS ``slope``, ``status`` ("ok" or the
    first failed solve on that draw's path), ``identified`` (the draw gives the axis an effect,
    ``A > 0``; true for axes the law holds fixed and for ``sum``). ``intervals``: per axis the
    percentile interval at ``level`` and the median over the "ok" draws that identify the axis, with
    ``n_draws`` used and ``n_failed`` left out. A draw without an effect on an axis leaves that axis
    whatever budget the others do not take, so its slope describes the constraint and the solver,
    not the data; mixed in, such draws can push an interval off the fitted slope.
    """
    rows, near = [], None
    for draw, law in enumerate(laws):
        path = draw_path(
            law,
            cost_model,
            budgets,
            bounds=bounds,
            fixed=fixed,
            synthetic=synthetic,
            starts=starts,
            seed=seed,
            near=near,
        )
        near = path.row(0, named=True)  # draws lie close together: each starts the next one's first solve
        failed = path.filter(pl.col("status") != "ok")["status"]
        status = "ok" if failed.is_empty() else failed[0]
        table = exponents(path).filter(pl.col("axis") != "share_weighted_sum")
        rows += [
            {"draw": draw, "axis": axis, "slope": slope, "status": status, "identified": law.A.get(axis, 1.0) > 0}
            for axis, slope in zip(table["axis"], table["slope"], strict=True)
        ]
    draws = pl.DataFrame(
        rows,
        schema={
            "draw": pl.Int64,
            "axis": pl.String,
            "slope": pl.Float64,
            "status": pl.String,
            "identified": pl.Boolean,
        },
    )
    tail = (1 - level) / 2
    used = (pl.col("status") == "ok") & pl.col("identified")
    intervals = (
        draws.group_by("axis", maintain_order=True)
        .agg(
            pl.col("slope").filter(used).quantile(tail, "linear").alias("slope_lo"),
            pl.col("slope").filter(used).median().alias("slope_median"),
            pl.col("slope").filter(used).quantile(1 - tail, "linear").alias("slope_hi"),
            used.sum().cast(pl.Int64).alias("n_draws"),
            (pl.col("status") != "ok").sum().cast(pl.Int64).alias("n_failed"),
        )
        .with_columns(pl.lit(level).alias("level"))
    )
    return draws, intervals
