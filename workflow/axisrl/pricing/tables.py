"""The paper's pricing tables (3, 16 and 17) as text frames from the ``pricing`` frame."""

from __future__ import annotations

import polars as pl

from axisrl.pricing.estimate import OK

REPRESENTATIVES = {"d_env": "awm", "d_task": "autoplay", "d_traj": "swirl"}
"""The paper's representative method per axis (Table 17, Figure 4's r* lines); another method of
the axis stands in when the study does not run it."""


KAPPA_SHOWN_MAX = 1e3
"""Tables show a bound beyond this as ``>1e3``: near-flat bootstrap laws invert to astronomically
large amounts, which says "unbounded", not a number (the Parquet keeps the value)."""


def _bound(value: float | None) -> str:
    if value is None:
        return "-"
    return f">{KAPPA_SHOWN_MAX:.0e}".replace("+0", "") if value > KAPPA_SHOWN_MAX else f"{value:.3g}"


def _interval(value: float | None, lo: float | None, hi: float | None) -> str:
    if value is None:
        return "-"
    return f"{_bound(value)} [{_bound(lo)}, {_bound(hi)}]"


def _r_star(row: dict, name: str) -> str:
    censored = row.get(f"r_star_{name}_censored")
    if censored:
        bound = row["r_max"] if censored.startswith(">") else row["r_min"]
        return f"{censored[0]}{bound:g}"
    return _interval(row.get(f"r_star_{name}"), row.get(f"r_star_{name}_lo"), row.get(f"r_star_{name}_hi"))


def _status(row: dict) -> str:
    return (
        "; ".join(dict.fromkeys(s for s in (row["kappa_status"], *row["collapse_status"].split("; ")) if s != OK)) or OK
    )


def pricing_tables(pricing: pl.DataFrame, threshold: float = 0.95) -> dict[str, pl.DataFrame]:
    """Tables 3, 16 and 17 from the ``pricing`` frame, estimates with their 95% CIs
    as text (censored crossings as ``>r_max``)."""
    from axisrl.synthesis import METHODS

    rows = pricing.to_dicts()
    own = [r for r in rows if not r["common_core"]]
    table3 = pl.DataFrame(
        [
            {
                "method": METHODS[r["method"]].paper,
                "axis": r["axis"],
                "real_amount": r["real_amount"],
                "kappa_at_r1": _interval(r["kappa"], r["kappa_lo"], r["kappa_hi"]),
                f"r_star_{threshold:g}": _r_star(r, "threshold"),
                "cost_per_unit": f"{r['unit_cost']:g} USD/{r['unit']}",
                "cost_per_real_equivalent_unit": None
                if r["cost_per_real_unit"] is None
                else f"{r['cost_per_real_unit']:.3g}",
                "status": _status(r),
            }
            for r in own
        ],
        infer_schema_length=None,
    )

    core = {(r["method"], r["real_amount"]): r for r in rows if r["common_core"]}
    first_amount = {}
    for r in own:
        first_amount.setdefault(r["method"], r["real_amount"])
    table16 = pl.DataFrame(
        [
            {
                "method": METHODS[r["method"]].paper,
                "axis": r["axis"],
                "kappa": _interval(r["kappa"], r["kappa_lo"], r["kappa_hi"]),
                "kappa_common_core": (
                    _interval(c["kappa"], c["kappa_lo"], c["kappa_hi"])
                    if (c := core.get((r["method"], r["real_amount"])))
                    else "not_run"
                ),
                "r_star": _r_star(r, "threshold"),
                "r_star_common_core": _r_star(c, "threshold") if c else "not_run",
            }
            for r in own
            if r["real_amount"] == first_amount[r["method"]]
        ],
        infer_schema_length=None,
    )

    chosen = {}
    for r in own:
        if r["real_amount"] != first_amount[r["method"]]:
            continue
        if r["method"] == REPRESENTATIVES[r["axis"]] or r["axis"] not in chosen:
            chosen[r["axis"]] = r
    criteria = {
        "threshold": f"crossing of {threshold:g} by the fitted logistic (default)",
        "baseline": "crossing of the real-only baseline (1.00)",
        "peak": "peak of the curve",
    }
    table17 = pl.DataFrame(
        [
            {
                "criterion": text,
                **{
                    f"r_star_{axis} ({METHODS[r['method']].paper})": _r_star(r, name)
                    for axis, r in sorted(chosen.items())
                },
            }
            for name, text in criteria.items()
        ]
    )
    return {"table3": table3, "table16": table16, "table17": table17}
