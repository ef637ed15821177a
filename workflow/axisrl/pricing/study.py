"""Every method's price from one collected study: what the ``pricing`` stage writes."""

from __future__ import annotations

import polars as pl

from axisrl.pricing.estimate import OK, fit_collapse, fit_peak, kappa_at, normalised_curve

PRICING_POINT_COLUMNS = ("point_key", "source", "axis", "real_amount", "role", "ratio", "multiple")
"""The plan's pricing points (``axisrl.plan.pricing_points``) as the pricing stage reads them."""


def _counted(runs: pl.DataFrame, points: pl.DataFrame, tier: str) -> pl.DataFrame:
    """Runs of the pricing points with integer ``successes``/``trials`` on ``tier`` (a run without
    held-out episodes gets zero trials and is dropped as failed)."""
    return points.join(runs, on="point_key", how="inner").with_columns(
        successes=(pl.col(f"p_{tier}").fill_null(0.0) * pl.col(f"n_{tier}").fill_null(0)).round(),
        trials=pl.col(f"n_{tier}").fill_null(0).cast(pl.Float64),
        status=pl.when(pl.col(f"n_{tier}").fill_null(0) > 0).then(pl.col("status")).otherwise(pl.lit("failed")),
    )


def price(
    runs: pl.DataFrame,
    points: pl.DataFrame,
    unit_costs: dict[str, float],
    tier: str = "T2",
    threshold: float = 0.95,
    n_boot: int = 1000,
    seed: int = 0,
) -> dict[str, pl.DataFrame]:
    """Every method's discount and collapse ratios at each of its real amounts.

    ``runs``: the collected runs (``point_key``, ``seed``, ``status``, ``p_<tier>``, ``n_<tier>``);
    ``points``: the pricing points. Returns ``pricing`` (one row per source and real amount: kappa
    at r = 1 and r* at ``threshold``, 1.0 and the peak, each with its CI and status, the sampled
    ratios ``r_min``..``r_max``, and the price of
    one real-equivalent unit = unit cost / kappa), ``collapse`` (every criterion row) and ``curves``
    (the normalised points of Figure 4). A source whose real-only baseline is missing or failed
    gets rows whose ``status`` says so.
    """
    from axisrl.synthesis import method_of

    counted = _counted(runs, points, tier)
    rows, collapse_frames, curve_frames = [], [], []
    for source, axis, amount in points.select("source", "axis", "real_amount").unique(maintain_order=True).iter_rows():
        mine = counted.filter((pl.col("source") == source) & (pl.col("real_amount") == amount))
        real = mine.filter(pl.col("role") == "real").with_columns(
            (pl.col("real_amount") * pl.col("multiple")).cast(pl.Float64).alias(axis)
        )
        mixed = mine.filter((pl.col("role") == "mixture") | (pl.col("multiple") == 1))  # r = 0: the real design
        key = {"source": source, "axis": axis, "real_amount": amount}
        kappa = kappa_at(real, mixed.filter(pl.col("ratio") > 0), axis, float(amount), 1.0, n_boot, seed)
        collapse = pl.concat(
            [fit_collapse(mixed, threshold, n_boot, seed), fit_peak(real, mixed, axis, float(amount), n_boot, seed)]
        )
        collapse_frames.append(collapse.with_columns(**{k: pl.lit(v) for k, v in key.items()}))
        curve_frames.append(normalised_curve(mixed).with_columns(**{k: pl.lit(v) for k, v in key.items()}))
        method = method_of(source)
        kappa_row = kappa.row(0, named=True)
        kappa_status = kappa_row.pop("status")
        row = {
            **key,
            "method": method.name,
            "common_core": source != method.name,
            "unit": method.unit,
            "unit_cost": unit_costs.get(method.name, method.unit_cost),
            **kappa_row,
            "kappa_status": kappa_status,
            "r_min": collapse["r_min"][0],
            "r_max": collapse["r_max"][0],
        }
        row["cost_per_real_unit"] = (
            row["unit_cost"] / row["kappa"] if row["kappa"] is not None and row["kappa"] > 0 else None
        )
        for c in collapse.iter_rows(named=True):
            name = c["criterion"] or "threshold"
            row.update(
                {
                    f"r_star_{name}": c["r_star"],
                    f"r_star_{name}_lo": c["r_star_lo"],
                    f"r_star_{name}_hi": c["r_star_hi"],
                    f"r_star_{name}_censored": c["censored"],
                }
            )
        row["collapse_status"] = "; ".join(dict.fromkeys(s for s in collapse["status"] if s != OK)) or OK
        rows.append(row)
    return {
        "pricing": pl.DataFrame(rows, infer_schema_length=None),
        "collapse": pl.concat(collapse_frames, how="diagonal_relaxed") if collapse_frames else pl.DataFrame(),
        "curves": pl.concat(curve_frames, how="diagonal_relaxed") if curve_frames else pl.DataFrame(),
    }
