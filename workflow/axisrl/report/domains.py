"""A study across domains, side by side: each domain's own laws, pools and runs, one row per domain.

Every frame here is a domain's own study's, unchanged (``domains:`` runs one study per domain); these
functions only line them up. The main axis sweeps are a domain's first series of ``axis_fits`` (its
study width's), as its own Table 2 and Figure 2 show them.
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from axisrl.plan import AXES
from axisrl.recipe.study import DRIVERS as TABLE18_DRIVERS
from axisrl.report.compact import SUCCESS_SCALE, fixed_interval, number

DRIVERS = (*TABLE18_DRIVERS, "heldout_seconds_per_episode")
"""Table 18's measured cost drivers and the held-out evaluation's seconds per episode."""


def exponents_by_domain(
    fits: Mapping[str, pl.DataFrame], trends: Mapping[str, pl.DataFrame], ordering: Mapping[str, pl.DataFrame]
) -> pl.DataFrame:
    """Table 2 across domains, one row per domain: each axis's exponent (``alpha_<axis>`` with its
    interval and fit status) on the main sweeps, its trend of held-out success per doubling
    (``trend_<axis>``, interval, p-value) and each ordering difference (``diff_<a>_<b>``: alpha_a -
    alpha_b, interval, p-value)."""
    rows = []
    for domain, fit in fits.items():
        row: dict[str, object] = {"domain": domain}
        main = fit.filter(pl.col("series") == fit["series"][0]) if fit.height else fit
        for axis in AXES:
            hit = main.filter(pl.col("axis") == axis)
            got = hit.row(0, named=True) if hit.height else {}
            row[f"status_{axis}"] = got.get("status", "not_run")
            for column in ("alpha", "alpha_lo", "alpha_hi"):
                row[column.replace("alpha", f"alpha_{axis}")] = got.get(column)
            trend = trends[domain].filter(pl.col("axis") == axis)
            got = trend.row(0, named=True) if trend.height else {}
            for column, suffix in (("slope", ""), ("slope_lo", "_lo"), ("slope_hi", "_hi"), ("p_value", "_p_value")):
                row[f"trend_{axis}{suffix}"] = got.get(column)
        for pair in ordering[domain].iter_rows(named=True):
            name = f"diff_{pair['axis_a']}_{pair['axis_b']}"
            row.update(
                {
                    name: pair["alpha_diff"],
                    f"{name}_lo": pair["alpha_diff_lo"],
                    f"{name}_hi": pair["alpha_diff_hi"],
                    f"{name}_p_value": pair["p_value"],
                }
            )
        rows.append(row)
    return pl.DataFrame(rows, infer_schema_length=None)


def pools_by_domain(pool_stats: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """Table 6 across domains: each domain's dedup statistics per split (raw generator outputs to
    signature-distinct environments), from its own pools."""
    return pl.concat(
        [frame.select(pl.lit(domain).alias("domain"), pl.all()) for domain, frame in pool_stats.items()],
        how="diagonal_relaxed",
    )


def drivers_by_domain(runs: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """Table 18 across domains: the mean of each measured cost driver over a domain's runs that
    finished, with how many runs that is and their mean held-out (T2) success."""
    rows = []
    for domain, frame in runs.items():
        ok = frame.filter(pl.col("status") == "ok")
        means = ok.select(*(pl.col(c).mean() for c in DRIVERS if c in ok.columns), pl.col("p_T2").mean())
        rows.append({"domain": domain, "n_runs": ok.height, **(means.row(0, named=True) if ok.height else {})})
    return pl.DataFrame(rows, infer_schema_length=None)


def base_by_domain(runs: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """RL against its base across domains, one row per domain: of its finished runs, those that start
    from a base (``n_from_base``; a family may train from random weights), their bases' behaviour-cloning
    steps (``base_bc_steps``: which checkpoint the base rule chose, each base's once), their bases' mean
    success on V (``p_V_base``, the same weights on the same episodes), their mean ``p_V``, the mean paired
    gain and how many end above their base. A mean over every design point, with no interval: the
    runs differ in design, so they are not draws of one quantity."""
    rows = []
    for domain, frame in runs.items():
        ok = frame.filter(pl.col("status") == "ok")
        based = (
            ok.filter(pl.col("p_V_base").is_not_null() & pl.col("p_V").is_not_null())
            if "p_V_base" in ok
            else ok.clear()
        )
        row: dict[str, object] = {"domain": domain, "n_runs": ok.height, "n_from_base": based.height}
        if based.height:
            gain = based["p_V"] - based["p_V_base"]
            above = int((gain > 0).sum())
            if "base_bc_steps" in based.columns:
                row["base_bc_steps"] = ", ".join(map(str, based["base_bc_steps"].drop_nulls().unique().sort()))
            row |= {
                "p_V_base": based["p_V_base"].mean(),
                "p_V": based["p_V"].mean(),
                "gain_V": gain.mean(),
                "runs_above_base": above,
                "share_above_base": above / based.height,
            }
        rows.append(row)
    return pl.DataFrame(rows, infer_schema_length=None)


def _interval(value: float | None, lo: float | None, hi: float | None, scale: float | None = None) -> str:
    """``value [lo, hi]`` to 3 decimals (``fixed``: ``0`` where zero up to rounding at ``scale``)."""
    return "-" if value is None else fixed_interval(value, lo, hi, 3, scale)


def exponents_markdown(frame: pl.DataFrame) -> pl.DataFrame:
    """The Markdown view of ``exponents_by_domain``: value [lo, hi] per exponent, the trend, and
    each ordering difference with its p-value."""
    out = []
    for row in frame.iter_rows(named=True):
        shown = {"domain": row["domain"]}
        for axis in AXES:
            ok = row[f"status_{axis}"] == "ok"
            alpha = row[f"alpha_{axis}"], row[f"alpha_{axis}_lo"], row[f"alpha_{axis}_hi"]
            shown[f"alpha ({axis})"] = _interval(*alpha) if ok else row[f"status_{axis}"]
            trend = row.get(f"trend_{axis}"), row.get(f"trend_{axis}_lo"), row.get(f"trend_{axis}_hi")
            shown[f"trend per doubling ({axis})"] = _interval(*trend, SUCCESS_SCALE)
        for a, b in ((AXES[0], AXES[1]), (AXES[0], AXES[2]), (AXES[1], AXES[2])):
            name = f"diff_{a}_{b}"
            diff = _interval(row.get(name), row.get(f"{name}_lo"), row.get(f"{name}_hi"))
            p = row.get(f"{name}_p_value")
            shown[f"alpha {a} - {b} (p)"] = diff if p is None else f"{diff}, p {number(p)}"
        out.append(shown)
    return pl.DataFrame(out)
