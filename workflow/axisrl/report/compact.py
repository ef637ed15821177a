"""The tables as a reader sees them: the paper's columns, one row per setting, an estimate and its
95% interval in one cell, ``0.114 [0.062, 0.16]``.

A stage's frame carries every diagnostic a check or a script needs (often 20-25 columns); printed
whole, it is a table nobody reads. ``compact_table`` picks, by table name, the columns the paper
shows (``VIEWS``: each table's once), and ``markdown`` writes the result; the frame itself stays
whole in Parquet and CSV. A frame without the columns its view reads (a ``not_run`` frame, another
schema) is shown whole instead (``readable``), never an error.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

import polars as pl

OK = "ok"
MISSING = "-"
NOT_IDENTIFIED = "not identified"

AXIS_ORDER = ("d_env", "d_task", "d_traj", "width")
"""The paper's column order: environments, tasks, trajectories, then model size."""
EXPONENT = {"d_env": "alpha_E", "d_task": "alpha_T", "d_traj": "alpha_tau", "width": "alpha_N"}
RECIPE_EXPONENT = {"d_env": "D_E exp.", "d_task": "D_T exp.", "d_traj": "D_tau exp.", "width": "N exp."}
FIT_COLUMNS = ("axis", "status", "alpha", "alpha_lo", "alpha_hi")
"""What a per-axis fit frame gives each exponent cell: one row per (setting, axis)."""


class Unfit(ValueError):
    """The frame has its view's columns but not its shape (a setting with two rows of one axis)."""


class View(NamedTuple):
    """A table's compact form: the columns it reads and how it builds the rows of strings from them."""

    columns: tuple[str, ...]
    build: Callable[[pl.DataFrame], list[dict[str, str]]]


RESIDUE = 1e-12
"""A float smaller than this share of its data's scale is zero up to rounding (``is_residue``)."""
SUCCESS_SCALE = 1.0
"""The scale of a success rate and of its change per doubling: a probability's unit."""
NOT_DEFINED = "not defined"
"""A p-value's cell where it is null: the test has no variance to test against (the laws' warnings say why)."""


def is_residue(value: float, scale: float | None = None) -> bool:
    """Whether ``value`` is zero up to rounding: 0 (of either sign); below ``RESIDUE`` times
    ``scale``, the size of the data it came from, where the caller knows it; and without one, a
    floating-point residue, below ``RESIDUE`` and with at most 64 binary places (what cancelling
    numbers near 1 leaves, ``2^-53 = 1.11e-16``; a computed small number such as a p-value has 100 or more)."""
    if value == 0:
        return True
    if not math.isfinite(value) or abs(value) >= RESIDUE * (1.0 if scale is None else abs(scale)):
        return False
    return scale is not None or value.as_integer_ratio()[1] <= 2**64


def number(value: Any, scale: float | None = None) -> str:
    """A value as a cell: a float to 3 significant digits, plain up to a million (``15600``), then
    with a short exponent (``2.53e10``); ``0`` where it is zero up to rounding relative to
    ``scale``, its data's size (``is_residue``: never ``-0`` or ``1.11e-16``); ``-`` for none."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if is_residue(value, scale):
            return "0"
        text = f"{value:.3g}"
        if 1e3 <= abs(float(text)) < 1e6:
            return f"{float(text):.0f}"
        return text.replace("e+0", "e").replace("e+", "e").replace("e-0", "e-")
    return str(value)


def fixed(value: float, places: int, scale: float | None = None, sign: bool = False) -> str:
    """``value`` to ``places`` decimals (with ``sign``, ``+`` before a positive one), as figure labels
    write numbers: ``0`` where it is zero up to rounding (``is_residue``), and to 3 significant digits
    (``number``) where the decimals would show a signed zero (``-0.0004``, never ``-0.000``)."""
    if is_residue(value, scale):
        return "0"
    text = f"{value:+.{places}f}"
    if float(text) == 0:
        text = ("+" if value > 0 else "") + number(value)
    return text if sign or value < 0 else text.removeprefix("+")


def bounds_scale(*bounds: float | None) -> float | None:
    """The scale of an estimate whose interval is ``bounds``: the largest bound's size. A slope of 1.14e-16
    with the interval [-0.176, 0.176] is a residue of the fit, 0 (``is_residue``); None where the bounds are
    missing, infinite or residues themselves (the residue test without a scale then decides)."""
    sizes = [abs(b) for b in bounds if b is not None and math.isfinite(b)]
    size = max(sizes, default=0.0)
    return None if is_residue(size) else size


def fixed_interval(value: float, lo: float | None, hi: float | None, places: int, scale: float | None = None) -> str:
    """``value [lo, hi]``, each ``fixed`` to ``places`` decimals at ``scale`` (by default the interval's own,
    ``bounds_scale``), as figure legends and the domains table write an estimate; the value alone where a
    bound is missing (None or NaN)."""
    scale = bounds_scale(lo, hi) if scale is None else scale
    if lo is None or hi is None or math.isnan(lo) or math.isnan(hi):
        return fixed(value, places, scale)
    return f"{fixed(value, places, scale)} [{fixed(lo, places, scale)}, {fixed(hi, places, scale)}]"


def p_value(value: float | None) -> str:
    """A p-value's cell: ``number``, or ``not defined`` where it is null (no variance to test)."""
    return NOT_DEFINED if value is None or math.isnan(value) else number(value)


def interval(value: float | None, lo: float | None, hi: float | None, scale: float | None = None) -> str:
    """``value [lo, hi]`` (each a ``number`` at ``scale``, by default the interval's own, ``bounds_scale``);
    the value alone when the interval is missing."""
    if value is None or lo is None or hi is None:
        return number(value, scale)
    scale = bounds_scale(lo, hi) if scale is None else scale
    return f"{number(value, scale)} [{number(lo, scale)}, {number(hi, scale)}]"


def readable(frame: pl.DataFrame) -> pl.DataFrame:
    """A frame as a table, whole: columns that are null throughout are dropped (an empty frame keeps its columns)."""
    return frame.select(c for c in frame.columns if frame.is_empty() or frame[c].null_count() < frame.height)


def _text(frame: pl.DataFrame, scale: float | None = None) -> pl.DataFrame:
    """Every cell as its string (``number`` at ``scale``), so a shown frame prints the same wherever it goes."""
    return pl.DataFrame(
        {column: [number(value, scale) for value in frame[column].to_list()] for column in frame.columns},
        schema=dict.fromkeys(frame.columns, pl.String),
    )


def whole(scale: float) -> View:
    """A table shown whole (``readable``), each number at ``scale``, the size its columns share: for the laws'
    frames of losses and exponents (order 1), whose residues (``5.9e-17``) print 0."""
    return View((), lambda frame: _text(readable(frame), scale).to_dicts())


def _axes(values: Iterable[str]) -> list[str]:
    """The axes present, in the paper's order (others after, as they come)."""
    present = list(dict.fromkeys(values))
    return [a for a in AXIS_ORDER if a in present] + [a for a in present if a not in AXIS_ORDER]


def _by_setting(rows: list[dict[str, Any]], keys: Iterable[str], column: str) -> dict[tuple, dict[str, dict]]:
    """Rows grouped by setting (``keys``, first-seen order), then by ``column``; a repeat is ``Unfit``."""
    keys = tuple(keys)
    settings: dict[tuple, dict[str, dict]] = {}
    for row in rows:
        setting = tuple(row[k] for k in keys)
        cells = settings.setdefault(setting, {})
        if row[column] in cells:
            raise Unfit(f"two rows of {column} {row[column]!r} at {setting}")
        cells[row[column]] = row
    return settings


def _exponent(row: dict[str, Any] | None) -> str:
    """A fit's exponent cell: ``alpha [lo, hi]``, its status word when the fit is not ``ok``, ``-`` without one."""
    if row is None:
        return MISSING
    if row["status"] != OK:
        return number(row["status"])
    return interval(row["alpha"], row["alpha_lo"], row["alpha_hi"])


def fits_by_setting(groups: Mapping[str, str], extras: Mapping[str, str] | None = None) -> View:
    """Per-axis fits as the paper's exponent tables: one row per setting (``groups``: column ->
    header), one exponent column per axis, and per axis each ``extras`` column (column -> header)."""
    extras = extras or {}

    def build(frame: pl.DataFrame) -> list[dict[str, str]]:
        rows = frame.to_dicts()
        axes = _axes(row["axis"] for row in rows)
        table = []
        for setting, fits in _by_setting(rows, groups, "axis").items():
            line = {header: number(value) for header, value in zip(groups.values(), setting)}
            for axis in axes:
                fit = fits.get(axis)
                line[f"{EXPONENT.get(axis, 'alpha')} ({axis})"] = _exponent(fit)
                for column, header in extras.items():
                    line[f"{header} ({axis})"] = number(fit[column]) if fit and fit["status"] == OK else MISSING
            table.append(line)
        return table

    return View((*groups, *FIT_COLUMNS, *extras), build)


def _floor(row: dict[str, Any]) -> str:
    if row["status"] != OK or row["floor_identified"] is None:
        return MISSING
    if not row["floor_identified"]:
        return NOT_IDENTIFIED
    return interval(row["floor_alpha"], row["floor_alpha_lo"], row["floor_alpha_hi"])


def _axis_fits(frame: pl.DataFrame) -> list[dict[str, str]]:
    rows = frame.to_dicts()
    _by_setting(rows, ("series",), "axis")  # one row per (series, axis), or Unfit
    return [
        {
            "series": number(row["series"]),
            "axis": row["axis"],
            "points": number(row["n_points"]),
            "alpha": _exponent(row),
            "floor law alpha": _floor(row),
            "R^2": number(row["r_squared"]) if row["status"] == OK else MISSING,
            "AICc prefers": number(row["aicc_prefers"]) if row["status"] == OK else MISSING,
        }
        for row in rows
    ]


AXIS_FITS = View(
    (*FIT_COLUMNS, "series", "n_points", "r_squared", "aicc_prefers")
    + ("floor_alpha", "floor_alpha_lo", "floor_alpha_hi", "floor_identified"),
    _axis_fits,
)
"""Figure 2's fits, one row per (series, axis): the headline slope, the floor law's exponent where
it is identified, R^2 and the law AICc prefers (what ``axisrl fit`` prints)."""


def _calibration(frame: pl.DataFrame) -> list[dict[str, str]]:
    table = []
    for (axis,), values in _by_setting(frame.to_dicts(), ("axis",), "value").items():
        chosen = [row for row in values.values() if row["selected"]]
        selected = number(chosen[0]["value"]) if chosen else MISSING
        if chosen and chosen[0]["at_grid_edge"]:
            selected += " (grid edge)"
        table.append(
            {
                "axis": axis,
                "values": " / ".join(number(v) for v in values),
                "held-out success": " / ".join(number(row["p"]) for row in values.values()),
                "selected": selected,
            }
        )
    return table


def _worlds(frame: pl.DataFrame) -> list[dict[str, str]]:
    return [
        {
            "D_E (d_env)": number(row["d_env"]),
            "worlds W": number(row["worlds"]),
            "variants V": number(row["variants"]),
            "held-out success": interval(row["p"], row["p_lo"], row["p_hi"]),
            "delta L per doubling of W": interval(
                row["delta_loss_per_doubling"], row["delta_loss_lo"], row["delta_loss_hi"]
            ),
        }
        for row in frame.to_dicts()
    ]


ACCOUNTING = {
    "row": "row",
    "d_env": "d_env",
    "d_task": "d_task",
    "d_traj": "d_traj",
    "width": "width",
    "budget": "budget",
    "visits": "cells (visits)",
    "tasks_seen": "tasks",
    "trajectories": "trajectories",
    "rollout_steps": "rollout steps",
    "gradient_steps": "gradient steps",
    "updates": "updates",
    "executed_compute": "FLOPs executed",
    "executed_over_charged": "executed / charged",
}
"""Table 9's columns: the paper's (cells, tasks, trajectories, rollout and gradient tokens, updates,
FLOPs) after the design of each row."""


def renamed(columns: Mapping[str, str], scale: float | None = None) -> View:
    """A table whose cells are shown as they are: the paper's columns (column -> header), each
    number at ``scale`` where its columns share one (``number``)."""

    def build(frame: pl.DataFrame) -> list[dict[str, str]]:
        return [{header: number(row[column], scale) for column, header in columns.items()} for row in frame.to_dicts()]

    return View(tuple(columns), build)


def _subset_fits(frame: pl.DataFrame) -> list[dict[str, str]]:
    return [
        {
            "axis": row["axis"],
            "range": f"{number(row['x_min'])} to {number(row['x_max'])} ({number(row['range_ratio'])}x)",
            "points (subset / all)": f"{number(row['n_points_subset'])} / {number(row['n_points_all'])}",
            "alpha (subset)": interval(row["alpha_subset"], row["alpha_subset_lo"], row["alpha_subset_hi"]),
            "alpha (all points)": interval(row["alpha_all"], row["alpha_all_lo"], row["alpha_all_hi"]),
            "R^2": number(row["r_squared"]),
            "max leave-one-out shift": number(row["max_loo_point_shift"]),
        }
        for row in frame.to_dicts()
    ]


def _trends(frame: pl.DataFrame) -> list[dict[str, str]]:
    return [
        {
            "axis": row["axis"],
            "n_runs": number(row["n_runs"]),
            "n_points": number(row["n_points"]),
            "slope": interval(row["slope"], row["slope_lo"], row["slope_hi"], SUCCESS_SCALE),
            "p_value": p_value(row["p_value"]),
        }
        for row in frame.to_dicts()
    ]


TRENDS = View(("axis", "n_runs", "n_points", "slope", "slope_lo", "slope_hi", "p_value"), _trends)
"""The laws' ``trends``: held-out success gained per doubling of each axis, ``slope [lo, hi]`` (zero
up to rounding of a success rate shows ``0``), and its p-value, ``not defined`` where it is null
(the runs' success has no variance; the laws' ``warnings`` say so)."""


def _slope(row: dict[str, Any] | None) -> str:
    """``slope (SE se)``, each at the scale of the pair (``bounds_scale``: a slope of 1e-16, SE 0.18, prints 0)."""
    if not row:
        return MISSING
    scale = bounds_scale(row["slope"], row["slope_se"])
    return f"{number(row['slope'], scale)} (SE {number(row['slope_se'], scale)})"


def _local_slopes(frame: pl.DataFrame) -> list[dict[str, str]]:
    by_axis = _by_setting(frame.to_dicts(), ("axis",), "segment")
    segments = sorted({segment for slopes in by_axis.values() for segment in slopes})
    return [
        {"axis": axis, **{f"segment {j}": _slope(slopes.get(j)) for j in segments}}
        for (axis,), slopes in by_axis.items()
    ]


def _pricing(frame: pl.DataFrame) -> list[dict[str, str]]:
    r_star = next((c for c in frame.columns if c.startswith("r_star_")), None)
    if r_star is None:
        raise Unfit("no r_star_<threshold> column")
    shown = {
        "method": "method",
        "axis": "primary axis",
        "real_amount": "real amount",
        "kappa_at_r1": "kappa at r = 1",
        r_star: f"r* ({r_star.removeprefix('r_star_')})",
        "cost_per_unit": "cost per unit",
        "status": "status",
    }
    return renamed(shown).build(frame)


def recipe_exponents(label: str, header: str) -> View:
    """Tables 19 and 21: one row per cost model (``label``, shown as ``header``), the recipe exponent
    of each axis, or ``not identified`` where the fitted law gives the axis no effect."""

    def build(frame: pl.DataFrame) -> list[dict[str, str]]:
        return [
            {
                header: number(row[label]),
                **{
                    f"{RECIPE_EXPONENT[axis]} ({axis})": NOT_IDENTIFIED
                    if row[f"identified_{axis}"] is False
                    else number(row[axis])
                    for axis in AXIS_ORDER
                },
            }
            for row in frame.to_dicts()
        ]

    return View((label, *AXIS_ORDER, *(f"identified_{axis}" for axis in AXIS_ORDER)), build)


def _recipe_domains(frame: pl.DataFrame) -> list[dict[str, str]]:
    def cell(row: dict[str, Any] | None) -> str:
        if row is None:
            return MISSING
        if row["identified"] is False:
            return NOT_IDENTIFIED
        return interval(row["slope"], row["slope_lo"], row["slope_hi"])

    return [
        {
            "domain": domain,
            **{f"{RECIPE_EXPONENT[axis]} ({axis})": cell(axes.get(axis)) for axis in AXIS_ORDER},
            "sum": cell(axes.get("sum")),
        }
        for (domain,), axes in _by_setting(frame.to_dicts(), ("domain",), "axis").items()
    ]


DEDUP = fits_by_setting(
    {"rule": "rule", "d_task_reference": "raw d_task", "d_task_effective_reference": "effective d_task"},
    {"r_squared": "R^2"},
)


def _asymptote_laws(frame: pl.DataFrame) -> list[dict[str, str]]:
    """Table 2, asymptote: per axis the exponent of final V success beside those of A and C_mid, each
    with its interval, or the reason the points' curves give none."""

    def law(row: dict[str, Any], name: str, reason: str | None) -> str:
        if row[name] is None:
            return number(reason) if reason else MISSING
        return interval(row[name], row[f"{name}_lo"], row[f"{name}_hi"], SUCCESS_SCALE)

    return [
        {
            "axis": row["axis"],
            "points whose curves identify A": f"{row['n_identified']} of {row['n_points']}",
            "alpha, final V success": law(row, "alpha_final", None),
            "alpha_A, asymptote": law(row, "alpha_A", row["reason"]),
            "beta_C_mid, midpoint": law(row, "beta_C_mid", row["C_mid_reason"] or row["reason"]),
        }
        for row in frame.to_dicts()
    ]


def _extrapolation(frame: pl.DataFrame) -> list[dict[str, str]]:
    """The extrapolation check by design point, then its summary rows (each run's row is in the CSV)."""
    rows = []
    for row in frame.filter(pl.col("unit") != "run").to_dicts():
        summary = row["unit"].startswith("all ")
        predicted = interval(row["predicted"], row["lo"], row["hi"], SUCCESS_SCALE)
        rows.append(
            {
                "design point": row["unit"] if summary else row["key"],
                "fit on the first half": f"{row['n_predicted']} predicted" if summary else row["status"],
                "last point on V": MISSING if summary else number(row["observed"], SUCCESS_SCALE),
                "predicted [95 %]": MISSING if summary else predicted,
                "error (all: mean absolute)": number(row["mean_abs_error" if summary else "error"], SUCCESS_SCALE),
                "covered (all: share)": number(row["coverage"]) if summary else number(row["covered"]),
            }
        )
    return rows


VIEWS: dict[str, View] = {
    "axis_fits": AXIS_FITS,
    "table2": fits_by_setting({"width": "width N", "algo": "algorithm", "reward_density": "reward density"}),
    "table3": View(("method", "axis", "real_amount", "kappa_at_r1", "cost_per_unit", "status"), _pricing),
    "table4": View(("axis", "value", "p", "selected", "at_grid_edge"), _calibration),
    "table5": fits_by_setting({"d_env": "held d_env", "d_task": "held d_task", "d_traj": "held d_traj"}),
    "table7": fits_by_setting({"env_level": "pool construction"}),
    "table8": View(
        ("d_env", "worlds", "variants", "p", "p_lo", "p_hi")
        + ("delta_loss_per_doubling", "delta_loss_lo", "delta_loss_hi"),
        _worlds,
    ),
    "table9": renamed(ACCOUNTING),
    "table10": fits_by_setting({"budget": "budget convention"}),
    "table11": View(
        ("axis", "x_min", "x_max", "range_ratio", "n_points_subset", "n_points_all", "r_squared")
        + ("alpha_subset", "alpha_subset_lo", "alpha_subset_hi", "alpha_all", "alpha_all_lo", "alpha_all_hi")
        + ("max_loo_point_shift",),
        _subset_fits,
    ),
    "table12": View(("axis", "segment", "slope", "slope_se"), _local_slopes),
    "table13": fits_by_setting({"domain": "domain", "base": "starts from", "p_base": "its base's success"}),
    "table14": DEDUP,
    "table15": DEDUP,
    "table16": renamed(
        {
            "method": "method",
            "axis": "axis",
            "kappa": "kappa (as run)",
            "kappa_common_core": "kappa (common core)",
            "r_star": "r* (as run)",
            "r_star_common_core": "r* (common core)",
        }
    ),
    "table17": View(("criterion",), lambda frame: _text(frame).to_dicts()),
    "table18": renamed(
        {
            "domain": "domain",
            "horizon": "H (steps)",
            "rollout_steps_per_trajectory": "rollout steps / trajectory",
            "env_seconds_per_call": "env seconds / call",
            "verifier_seconds_per_trajectory": "verifier seconds / trajectory",
            "failed_rollout_fraction": "f (failed rollouts)",
            "utilization": "eta (utilization)",
        }
    ),
    "table19": recipe_exponents("cost_model", "cost model"),
    "table20": View(("domain", "axis", "slope", "slope_lo", "slope_hi", "identified"), _recipe_domains),
    "table21": recipe_exponents("perturbation", "perturbation"),
    "table2_asymptote": View(
        ("axis", "n_identified", "n_points", "alpha_final", "alpha_A", "beta_C_mid", "reason", "C_mid_reason"),
        _asymptote_laws,
    ),
    "table_extrapolation": View(
        ("unit", "key", "status", "observed", "predicted", "lo", "hi", "error", "covered", "coverage"),
        _extrapolation,
    ),
    "trends": TRENDS,
    "ordering": View(
        ("axis_a", "axis_b", "alpha_diff", "alpha_diff_lo", "alpha_diff_hi", "p_value"),
        lambda frame: [
            {
                "axes": f"{row['axis_a']} - {row['axis_b']}",
                "alpha difference": interval(row["alpha_diff"], row["alpha_diff_lo"], row["alpha_diff_hi"]),
                "p_value": p_value(row["p_value"]),
            }
            for row in frame.to_dicts()
        ],
    ),
    "loo": whole(1.0),  # exponents left one out and their shifts
    "joint": whole(1.0),  # the joint laws' floors, amplitudes and exponents, on the loss's scale
    "power": renamed(
        {
            "quantity": "quantity",
            "name": "axis or pair",
            "half_width": "expected 95 % half-width",
            "half_width_q10": "one study's, 10 %",
            "half_width_q90": "one study's, 90 %",
            "p_decides": "P(interval excludes 0)",
            "p_bounded": "P(interval bounded)",
        },
        scale=1.0,  # half-widths of exponents and of success per doubling, and probabilities: all of order 1
    ),
}
"""Each table's compact form, by table (and ``laws`` frame) name; a name not here is shown whole."""


def compact_table(name: str, frame: pl.DataFrame) -> pl.DataFrame:
    """Table ``name``'s ``frame`` as the reader sees it, every cell a string: its ``VIEWS`` form, or
    the whole frame (``readable``) when it has none or ``frame`` lacks the columns or shape it reads."""
    view = VIEWS.get(name)
    if view is None or frame.is_empty() or not set(view.columns) <= set(frame.columns):
        return _text(readable(frame))
    try:
        rows = view.build(frame)
    except Unfit:
        return _text(readable(frame))
    return pl.DataFrame(rows, schema=dict.fromkeys(rows[0], pl.String))


def _cell(value: str) -> str:
    return value.replace("|", "\\|").replace("\n", " ")


def markdown(frame: pl.DataFrame) -> str:
    """A frame of strings (``compact_table``'s) as a Markdown table, its columns padded to line up in a terminal."""
    if not frame.columns:
        return "(no columns)"
    rows = [[_cell(column) for column in frame.columns]] + [
        [_cell(number(value)) for value in row] for row in frame.iter_rows()
    ]
    widths = [max(3, *(len(row[k]) for row in rows)) for k in range(len(frame.columns))]
    lines = ["| " + " | ".join(cell.ljust(width) for cell, width in zip(row, widths)) + " |" for row in rows]
    lines.insert(1, "|" + "|".join("-" * (width + 2) for width in widths) + "|")
    return "\n".join(lines)
