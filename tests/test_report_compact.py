"""The compact tables: cells written as "value [lo, hi]", one row per setting, the paper's columns,
and the whole frame whenever a frame is not the shape its view reads."""

from __future__ import annotations

import polars as pl
import pytest

from axisrl.report.compact import VIEWS, compact_table, fixed, interval, markdown, number, readable
from axisrl.report.tables import write_table
from axisrl.targets import TABLES

FIT = {
    "status": "ok",
    "reason": None,
    "n_points": 6,
    "n_runs": 18,
    "n_failed_excluded": 0,
    "x_min": 1.0,
    "x_max": 32.0,
    "alpha_dof": 4,
    "A": 1.8,
    "r_squared": 0.97,
    "dispersion": 1.1,
    "floor_alpha": 0.3,
    "floor_alpha_lo": 0.2,
    "floor_alpha_hi": 0.4,
    "floor_E": 0.5,
    "floor_A": 1.2,
    "floor_identified": True,
    "floor_note": "",
    "aicc_power": 10.0,
    "aicc_floor": 12.0,
    "aicc_prefers": "power",
    "max_loo_point_shift": 0.01,
    "max_loo_seed_shift": 0.02,
    "loo_unstable": False,
}
"""A fit row of the per-axis fit frames (one row per setting and axis), less its axis and alpha."""


def fit(axis: str, alpha: float | None, lo: float | None = None, hi: float | None = None, **changes) -> dict:
    return {"axis": axis, "alpha": alpha, "alpha_lo": lo, "alpha_hi": hi, **FIT, **changes}


def table2() -> pl.DataFrame:
    """Two settings; the second has too few d_task points for a fit."""
    rows = []
    for width, density in ((64, "sparse"), (128, "dense")):
        setting = {"width": width, "algo": "grpo", "reward_density": density}
        rows += [
            setting | fit("d_env", 0.4123, 0.3512, 0.4734),
            setting
            | (
                fit("d_task", None, status="too_few_points", reason="2 usable grid points")
                if width == 128
                else fit("d_task", 0.26, 0.2, 0.31)
            ),
            setting | fit("d_traj", 0.11, 0.06, 0.16),
        ]
    return pl.DataFrame(rows, infer_schema_length=None)


def test_cells_are_three_significant_digits_with_the_interval_beside():
    assert interval(0.11, 0.06, 0.16) == "0.11 [0.06, 0.16]"
    assert interval(0.41234, -0.08336, 0.31167) == "0.412 [-0.0834, 0.312]"
    assert interval(0.27, None, None) == "0.27"
    assert interval(None, 0.1, 0.2) == "-"
    assert [number(x) for x in (15577.75, 2.53e10, 8.1e-6, 32.0, 7, None, float("nan"))] == [
        "15600",
        "2.53e10",
        "8.1e-6",
        "32",
        "7",
        "-",
        "-",
    ]


def test_table2_is_one_row_per_setting_with_the_three_exponents():
    shown = compact_table("table2", table2())
    assert shown.columns == [
        "width N",
        "algorithm",
        "reward density",
        "alpha_E (d_env)",
        "alpha_T (d_task)",
        "alpha_tau (d_traj)",
    ]
    assert shown.rows() == [
        ("64", "grpo", "sparse", "0.412 [0.351, 0.473]", "0.26 [0.2, 0.31]", "0.11 [0.06, 0.16]"),
        ("128", "grpo", "dense", "0.412 [0.351, 0.473]", "too_few_points", "0.11 [0.06, 0.16]"),
    ]
    assert all(dtype == pl.String for dtype in shown.dtypes)


def test_a_setting_without_an_axis_shows_a_dash_and_extras_follow_their_axis():
    frame = pl.DataFrame(
        [
            {"rule": "raw", "d_task_reference": 32, "d_task_effective_reference": 32.0} | fit("d_task", 0.05, 0.0, 0.1),
            {"rule": "skill", "d_task_reference": 32, "d_task_effective_reference": 29.0}
            | fit("d_task", None, status="too_few_points"),
        ],
        infer_schema_length=None,
    )
    shown = compact_table("table15", frame)
    assert shown.columns == ["rule", "raw d_task", "effective d_task", "alpha_T (d_task)", "R^2 (d_task)"]
    assert shown.rows() == [("raw", "32", "32", "0.05 [0, 0.1]", "0.97"), ("skill", "32", "29", "too_few_points", "-")]

    held = pl.DataFrame(
        [
            {"d_env": None, "d_task": 32, "d_traj": 8} | fit("d_env", 0.4, 0.3, 0.5),
            {"d_env": 8, "d_task": None, "d_traj": 8} | fit("d_task", 0.2, 0.1, 0.3),
        ],
        infer_schema_length=None,
    )
    assert compact_table("table5", held).rows() == [
        ("-", "32", "8", "0.4 [0.3, 0.5]", "-"),
        ("8", "-", "8", "-", "0.2 [0.1, 0.3]"),
    ]


def test_the_floor_exponent_shows_only_where_it_is_identified():
    frame = pl.DataFrame(
        [
            {"series": "N=64"} | fit("d_env", 0.4, 0.3, 0.5),
            {"series": "N=64"} | fit("d_task", 0.2, 0.1, 0.3, floor_identified=False, floor_alpha=1.5),
            {"series": "N=64"} | fit("d_traj", None, status="too_few_points", floor_identified=None),
        ],
        infer_schema_length=None,
    )
    shown = compact_table("axis_fits", frame)
    assert shown["floor law alpha"].to_list() == ["0.3 [0.2, 0.4]", "not identified", "-"]
    assert shown["alpha"].to_list() == ["0.4 [0.3, 0.5]", "0.2 [0.1, 0.3]", "too_few_points"]
    assert shown["AICc prefers"].to_list() == ["power", "power", "-"]


def test_a_frame_its_view_cannot_read_is_shown_whole():
    not_run = pl.DataFrame({"status": ["not_run"], "reason": ["the study has no runs that table13 reads"]})
    assert compact_table("table13", not_run).rows() == [("not_run", "the study has no runs that table13 reads")]

    two_models = pl.concat(  # the older shape: a row per law, so two rows per setting and axis
        [table2().with_columns(model=pl.lit("power")), table2().with_columns(model=pl.lit("floor"))]
    )
    whole = compact_table("table2", two_models)
    assert whole.height == two_models.height and "model" in whole.columns
    assert "reason" in whole.columns and "alpha_dof" in whole.columns

    assert compact_table("points", table2()).columns == readable(table2()).columns


def test_recipe_tables_say_not_identified_and_table20_is_one_row_per_domain():
    exponents = {"width": 0.27, "d_env": 0.6, "d_task": 0.7, "d_traj": 0.62}
    identified = {"identified_width": False, "identified_d_env": True, "identified_d_task": True}
    table19 = pl.DataFrame([{"cost_model": "linear", **exponents, **identified, "identified_d_traj": None}])
    assert compact_table("table19", table19).rows() == [("linear", "0.6", "0.7", "0.62", "not identified")]

    table20 = pl.DataFrame(
        [
            {"domain": "toolworld", "axis": axis, "slope": slope, "slope_lo": slope - 0.1, "slope_hi": slope + 0.1}
            | {"identified": None if axis == "sum" else axis != "width", "paper_exponent": 0.1}
            for axis, slope in {**exponents, "sum": 2.19}.items()
        ]
    )
    shown = compact_table("table20", table20)
    assert shown.height == 1
    assert shown.row(0) == (
        "toolworld",
        "0.6 [0.5, 0.7]",
        "0.7 [0.6, 0.8]",
        "0.62 [0.52, 0.72]",
        "not identified",
        "2.19 [2.09, 2.29]",
    )


def test_calibration_is_one_row_per_axis():
    frame = pl.DataFrame(
        {
            "axis": ["d_env"] * 3,
            "value": [4, 8, 16],
            "n_runs": [4, 4, 4],
            "p": [0.2288, 0.18, 0.2733],
            "loss": [1.47, 1.71, 1.30],
            "threshold": [0.263] * 3,
            "selected": [False, False, True],
            "at_grid_edge": [True] * 3,
        }
    )
    assert compact_table("table4", frame).rows() == [("d_env", "4 / 8 / 16", "0.229 / 0.18 / 0.273", "16 (grid edge)")]


def test_every_table_target_has_a_compact_form():
    assert set(TABLES) <= set(VIEWS)


def test_markdown_lines_up_and_escapes_pipes():
    text = markdown(pl.DataFrame({"a": ["x|y", "long value"], "b": ["1", None]}))
    lines = text.splitlines()
    assert lines[0].startswith("| a ") and set(lines[1]) == {"|", "-"}
    assert len({len(line) for line in lines}) == 1
    assert "x\\|y" in lines[2] and lines[3].endswith("| -   |")


def test_write_table_writes_the_compact_markdown_and_the_whole_csv(tmp_path):
    frame = table2()
    write_table(frame, tmp_path / "t.md", tmp_path / "t.csv", "Table 2: exponents", "table2")
    text = (tmp_path / "t.md").read_text()
    assert text.startswith("# Table 2: exponents\n")
    assert "| alpha_E (d_env) " in text and "0.412 [0.351, 0.473]" in text and "n_failed_excluded" not in text
    csv = pl.read_csv(tmp_path / "t.csv")
    assert csv.columns == readable(frame).columns and csv.height == frame.height
    assert csv["alpha"].to_list()[0] == pytest.approx(0.4123)


def test_a_number_zero_up_to_rounding_prints_0():
    """Floating-point residues (``2^-53``, ``0.1 + 0.2 - 0.3``) and, where the data's scale is known,
    anything below 1e-12 of it print ``0``, never ``-0`` or ``1.11e-16``; a small number that is no
    residue (a p-value, ``3.2e-14``) keeps its digits."""
    residue = 0.1 + 0.2 - 0.3
    assert [number(x) for x in (1.1102230246251565e-16, residue, -residue, -0.0, 0.0)] == ["0"] * 5
    assert number(3.2e-14) == "3.2e-14" and number(8.1e-6) == "8.1e-6"
    assert number(-2.7975e-17, scale=1.0) == "0" and number(-2.7975e-17) == "-2.8e-17"
    assert number(5e-13, scale=10.0) == "0" and number(5e-13, scale=0.01) == "5e-13"
    assert interval(6.9e-18, -2.8e-17, 1.4e-17, scale=1.0) == "0 [0, 0]"
    assert [fixed(x, 3, 1.0, sign=True) for x in (-1.4e-17, 0.035, -0.0004, 0.0)] == ["0", "+0.035", "-0.0004", "0"]
    assert fixed(-0.2, 2) == "-0.20" and fixed(0.41, 2) == "0.41"


def test_trends_print_0_and_say_where_a_p_value_is_not_defined():
    """The trend table of sweeps without variance: slopes of 1e-17 printed ``0``, the null p-value
    ``not defined`` (it printed ``2.78e-17 ... 0.423`` before), a real trend as it is."""
    trends = pl.DataFrame(
        {
            "axis": ["d_env", "d_task"],
            "n_runs": [15, 15],
            "n_points": [5, 5],
            "slope": [2.7755575615628914e-17, 0.0312],
            "slope_lo": [-2.7975e-17, 0.0101],
            "slope_hi": [8.3e-17, 0.0523],
            "p_value": [None, 0.0071],
        },
        schema_overrides={"p_value": pl.Float64},
    )
    shown = compact_table("trends", trends)
    assert shown.columns == ["axis", "n_runs", "n_points", "slope", "p_value"]
    assert shown.rows() == [
        ("d_env", "15", "5", "0 [0, 0]", "not defined"),
        ("d_task", "15", "5", "0.0312 [0.0101, 0.0523]", "0.0071"),
    ]


def test_the_power_table_prints_residues_as_0():
    """Half-widths and probabilities of order 1: a half-width of 4.7e-17 (identical simulated
    intervals) is 0, in the compact view and through ``number`` as ``axisrl power`` prints it."""
    power = pl.DataFrame(
        {
            "quantity": ["trend"],
            "name": ["d_env"],
            "half_width": [0.0412],
            "half_width_q10": [4.72e-17],
            "half_width_q90": [0.0634],
            "p_decides": [1.0],
            "p_bounded": [1.0],
        }
    )
    assert compact_table("power", power).row(0) == ("trend", "d_env", "0.0412", "0", "0.0634", "1", "1")
    assert number(1.1102230246251565e-16) == "0"


def test_the_curve_tables_show_an_interval_or_the_reason_there_is_none():
    from axisrl.laws.curve_laws import ASYMPTOTE_LAW_SCHEMA

    laws = pl.DataFrame(
        [
            {"axis": "d_env", "status": "ok", "n_points": 4, "n_identified": 4, "alpha_final": 0.1}
            | {"alpha_final_lo": 0.0, "alpha_final_hi": 0.2, "alpha_A": 0.3, "alpha_A_lo": 0.1, "alpha_A_hi": 0.5}
            | {"C_mid_reason": "2 of 4 points' curves identify C_mid; a law needs 3"},
            {"axis": "d_task", "status": "not_identified", "n_points": 3, "n_identified": 1}
            | {"reason": "1 of 3 points' curves identify A; a law needs 3"},
        ],
        schema=ASYMPTOTE_LAW_SCHEMA,
    )
    rows = compact_table("table2_asymptote", laws).rows()
    assert rows[0] == (
        "d_env",
        "4 of 4",
        "0.1 [0, 0.2]",
        "0.3 [0.1, 0.5]",
        "2 of 4 points' curves identify C_mid; a law needs 3",
    )
    assert rows[1][3] == rows[1][4] == "1 of 3 points' curves identify A; a law needs 3" and rows[1][2] == "-"
