"""The side-by-side frames of a study across domains (``axisrl.report.domains``): each domain's own
frames lined up, the main series only, a missing fit named as such."""

from __future__ import annotations

import polars as pl

from axisrl.report.domains import base_by_domain, drivers_by_domain, exponents_by_domain, exponents_markdown


def _fits(alpha: float) -> pl.DataFrame:
    rows = [
        {"series": series, "axis": axis, "status": "ok", "alpha": alpha + shift, "alpha_lo": 0.0, "alpha_hi": 1.0}
        for series, shift in (("N=64", 0.0), ("N=128", 5.0))  # the first series is the study's main sweeps
        for axis in ("d_env", "d_task")
    ]
    return pl.DataFrame(rows)


TRENDS = pl.DataFrame({"axis": ["d_env"], "slope": [0.02], "slope_lo": [0.01], "slope_hi": [0.03], "p_value": [0.04]})
ORDERING = pl.DataFrame(
    {
        "axis_a": ["d_env"],
        "axis_b": ["d_task"],
        "alpha_diff": [0.1],
        "alpha_diff_lo": [-0.1],
        "alpha_diff_hi": [0.3],
        "alpha_diff_dof": [4.0],
        "p_value": [0.3],
    }
)


def test_exponents_line_up_the_main_sweeps_of_each_domain():
    frame = exponents_by_domain(
        {"toolworld": _fits(0.2), "webworld": _fits(0.4)},
        {"toolworld": TRENDS, "webworld": TRENDS.clear()},
        {"toolworld": ORDERING, "webworld": ORDERING.clear()},
    )
    assert frame["domain"].to_list() == ["toolworld", "webworld"]
    assert frame["alpha_d_env"].to_list() == [0.2, 0.4]  # N=64's, not N=128's
    assert frame["status_d_traj"].to_list() == ["not_run", "not_run"]
    assert frame["trend_d_env_p_value"].to_list() == [0.04, None]
    assert frame["diff_d_env_d_task_p_value"].to_list() == [0.3, None]
    shown = exponents_markdown(frame).row(0, named=True)
    assert shown["alpha (d_env)"] == "0.200 [0, 1.000]" and shown["alpha (d_traj)"] == "not_run"
    assert shown["alpha d_env - d_task (p)"] == "0.100 [-0.100, 0.300], p 0.3"
    assert exponents_markdown(frame).row(1, named=True)["alpha d_env - d_task (p)"] == "-"


def test_drivers_are_means_over_each_domains_finished_runs():
    runs = pl.DataFrame({"status": ["ok", "ok", "failed"], "horizon": [10.0, 20.0, 99.0], "p_T2": [0.1, 0.3, 0.0]})
    frame = drivers_by_domain({"repoworld": runs})
    assert frame.row(0, named=True) == {"domain": "repoworld", "n_runs": 2, "horizon": 15.0, "p_T2": 0.2}


def test_rl_against_its_base_counts_each_domains_finished_runs_above_their_base():
    webworld = pl.DataFrame(
        {
            "status": ["ok", "ok", "ok", "ok", "failed"],
            "p_V": [0.125, 0.100, 0.113, 0.300, 0.900],
            "p_V_base": [0.113, 0.113, 0.113, None, 0.113],  # the fourth run starts from random weights
            "base_bc_steps": [110, 110, 110, None, 110],
        }
    )
    from_random = pl.DataFrame(
        {"status": ["ok"], "p_V": [0.2], "p_V_base": [None]}, schema_overrides={"p_V_base": pl.Float64}
    )
    frame = base_by_domain({"webworld": webworld, "toolworld": from_random})
    row = frame.row(0, named=True)
    assert row["domain"] == "webworld" and row["n_runs"] == 4 and row["n_from_base"] == 3
    assert row["base_bc_steps"] == "110"  # the checkpoint the base rule chose, once
    assert row["runs_above_base"] == 1  # a tie with the base is not above it; failed and random-init runs not counted
    assert abs(row["gain_V"] - (0.012 - 0.013 + 0.0) / 3) < 1e-12
    assert abs(row["p_V"] - (0.125 + 0.100 + 0.113) / 3) < 1e-12
    assert abs(row["share_above_base"] - 1 / 3) < 1e-12
    nothing = frame.row(1, named=True)
    assert nothing["n_runs"] == 1 and nothing["n_from_base"] == 0 and nothing["p_V_base"] is None
