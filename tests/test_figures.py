"""Figures 2 and 3 render from small synthetic frames, tolerate sparse input, reject bad input; the
success intervals of Figures 1 and 5 and of ``fig_noise`` stay inside [0, 1]."""

from __future__ import annotations

import itertools
import math

import numpy as np
import polars as pl
import pytest
from matplotlib.collections import LineCollection

from axisrl.report import figures, recipe_figures, style
from axisrl.report.noise_figure import seed_spread_interval

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
ALPHAS = {"d_env": 0.41, "d_task": 0.26, "d_traj": 0.11}
SERIES = {"N=64": 1.0, "N=128": 0.8}


def _points() -> pl.DataFrame:
    """Losses on a known power law L = A x^-alpha, per axis and series, with a small SE."""
    rows = [
        {"axis": axis, "x": float(x), "series": s, "loss": a * x**-alpha, "loss_se": 0.05 * a * x**-alpha, "n_runs": 3}
        for (axis, alpha), (s, a), x in itertools.product(ALPHAS.items(), SERIES.items(), [1, 2, 4, 8, 16, 32])
    ]
    return pl.DataFrame(rows)


def _fits() -> pl.DataFrame:
    """One fit per (axis, series); the floor law identified and preferred for d_traj only."""
    rows = []
    for (axis, alpha), (s, a) in itertools.product(ALPHAS.items(), SERIES.items()):
        floor = axis == "d_traj"
        rows.append(
            {
                "axis": axis,
                "series": s,
                "status": "ok",
                "alpha": alpha,
                "alpha_lo": alpha - 0.03,
                "alpha_hi": alpha + 0.03,
                "A": a,
                "floor_alpha": alpha + 0.2,
                "floor_E": 0.05,
                "floor_A": a,
                "floor_identified": floor,
                "aicc_prefers": "floor" if floor else "power",
                "x_min": 1.0,
                "x_max": 32.0,
            }
        )
    return pl.DataFrame(rows)


def _grid(missing: tuple[int, int] | None = None) -> pl.DataFrame:
    """Success over a 4x4 log-spaced (d_env, d_task) grid with a linear cost model."""
    rows = [
        {"d_env": e, "d_task": t, "p": 1 - math.exp(-0.1 * e**0.5 * t**0.3), "se": 0.02, "cost": 4.0 * e + 0.2 * t}
        for e, t in itertools.product([1, 4, 16, 64], [8, 32, 128, 512])
        if (e, t) != missing
    ]
    return pl.DataFrame(rows)


def _assert_written(png, pdf) -> None:
    assert png.read_bytes()[:8] == PNG_SIGNATURE
    assert png.stat().st_size > 10_000
    assert pdf.read_bytes()[:5] == b"%PDF-"
    assert pdf.stat().st_size > 1_000


def _legend_texts(fig) -> list[str]:
    return [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]


def test_figure2_writes_png_and_pdf(tmp_path, captured):
    png, pdf = tmp_path / "out" / "figure2.png", tmp_path / "out" / "figure2.pdf"
    figures.figure2(_points(), _fits(), png, pdf)
    _assert_written(png, pdf)
    fig = captured[0]
    assert [ax.get_xlabel() for ax in fig.axes] == [style.AXIS_LABELS[a] for a in ALPHAS]
    assert fig.axes[0].get_ylabel() == style.LOSS_LABEL
    assert "N=64: $\\alpha$ = 0.41 [0.38, 0.44]" in _legend_texts(fig)
    curve = fig.axes[0].get_lines()[0]  # N=64 on d_env: power law with null E treated as 0
    x, y = curve.get_data()
    np.testing.assert_allclose(y, x**-0.41)


def test_figure2_titles_each_panel_with_its_success_trend(tmp_path, captured):
    trends = pl.DataFrame(
        {
            "axis": ["d_env", "d_traj"],
            "n_runs": [24, 24],
            "slope": [0.035, -0.001],
            "slope_lo": [0.012, -0.023],
            "slope_hi": [0.059, 0.021],
        }
    )
    figures.figure2(_points(), _fits(), tmp_path / "f.png", tmp_path / "f.pdf", trends)
    titles = [ax.get_title() for ax in captured[0].axes]
    assert titles == [
        "success +0.035 per doubling [+0.012, +0.059]\n(axis sweeps, 24 runs)",
        "",
        "success -0.001 per doubling [-0.023, +0.021]\n(axis sweeps, 24 runs)",
    ]
    with pytest.raises(ValueError, match="trends is missing required column"):
        figures.figure2(_points(), _fits(), tmp_path / "f.png", tmp_path / "f.pdf", trends.drop("slope_lo"))


def test_figure2_too_few_points(tmp_path, captured):
    fits = _fits().with_columns(
        status=pl.when((pl.col("axis") == "d_task") & (pl.col("series") == "N=128"))
        .then(pl.lit("too_few_points"))
        .otherwise(pl.col("status")),
    )
    points = _points().filter((pl.col("axis") != "d_task") | (pl.col("series") != "N=128") | (pl.col("x") < 3))
    figures.figure2(points, fits, tmp_path / "f.png", tmp_path / "f.pdf")
    _assert_written(tmp_path / "f.png", tmp_path / "f.pdf")
    assert "N=128: too few points" in _legend_texts(captured[0])


def test_figure3_with_missing_cell(tmp_path, captured):
    png, pdf = tmp_path / "figure3.png", tmp_path / "figure3.pdf"
    figures.figure3(_grid(missing=(64, 8)), png, pdf)
    _assert_written(png, pdf)
    image = captured[0].axes[0].get_images()[0].get_array()
    assert image.mask[0, 3]  # d_task=8 (row 0), d_env=64 (column 3) stays blank
    assert image.shape == (4, 4)


@pytest.mark.parametrize("column", figures.POINT_COLUMNS)
def test_figure2_missing_point_column(tmp_path, column):
    with pytest.raises(ValueError, match=rf"column\(s\): {column}$"):
        figures.figure2(_points().drop(column), _fits(), tmp_path / "f.png", tmp_path / "f.pdf")


def test_figure2_missing_fit_column(tmp_path):
    with pytest.raises(ValueError, match="alpha_hi"):
        figures.figure2(_points(), _fits().drop("alpha_hi"), tmp_path / "f.png", tmp_path / "f.pdf")


@pytest.mark.parametrize("column", ["d_env", "d_task", "p", "cost"])
def test_figure3_missing_column(tmp_path, column):
    with pytest.raises(ValueError, match=rf"column\(s\): {column}$"):
        figures.figure3(_grid().drop(column), tmp_path / "f.png", tmp_path / "f.pdf")


def test_figure2_title_of_a_trend_without_variance_prints_0(tmp_path, captured):
    """Sweeps whose runs all score the same: their trend, 1e-17 of a success rate, is titled 0 (it
    read ``+0.000 per doubling [-0.000, +0.000]`` before), and its null p-value is named."""
    trends = pl.DataFrame(
        {
            "axis": ["d_env"],
            "n_runs": [15],
            "slope": [-6.938893903907228e-18],
            "slope_lo": [-2.7975e-17],
            "slope_hi": [1.4097e-17],
            "p_value": [None],
        },
        schema_overrides={"p_value": pl.Float64},
    )
    figures.figure2(_points(), _fits(), tmp_path / "f.png", tmp_path / "f.pdf", trends)
    assert captured[0].axes[0].get_title() == (
        "success 0 per doubling [0, 0]\n(axis sweeps, 15 runs; no variance: p-value not defined)"
    )


RECIPE_AXES = ("width", "d_env", "d_task", "d_traj")


def _measured_near_0() -> pl.DataFrame:
    """The validate stage's columns for three strategies measured on 400 pooled episodes, two near
    0 (none and 2 successes: ``p`` clipped to 1/800 and 0.005) and one at 0.3."""
    rows = []
    for strategy, successes in (("recipe", 0), ("trajectories_only", 2), ("chinchilla_transfer", 120)):
        p = min(max(successes / 400, 0.5 / 400), 1 - 0.5 / 400)
        rows.append(
            {"role": "strategy", "strategy": strategy, "compute": 100.0, "compute_factor": 1.0, "currency": "flop"}
            | dict.fromkeys(RECIPE_AXES, 8)
            | {"predicted_success": 0.02, "success_lo": 0.0, "success_hi": 0.05, "n_seeds": 4, "p": p}
            | {"trials": 400, "p_se": math.sqrt(p * (1 - p) / 400)}
        )
    return pl.DataFrame(rows)


def test_measured_success_intervals_are_wilson_inside_0_and_1():
    """Figures 1 and 5 draw a measured success's Wilson interval on its pooled episodes: inside
    [0, 1] near 0, where ``p +- 1.96 p_se`` went below 0; at 0 successes it starts at 0 exactly."""
    shown = recipe_figures.measured_interval(_measured_near_0())
    lo, hi, p = (shown[c].to_numpy() for c in ("p_wilson_lo", "p_wilson_hi", "p"))
    assert (0 <= lo).all() and (lo <= p).all() and (p <= hi).all() and (hi <= 1).all()
    assert lo[0] == 0 and hi[0] == pytest.approx(1.96**2 / (400 + 1.96**2), rel=1e-3)
    assert lo[2] == pytest.approx(0.2568, abs=1e-3) and hi[2] == pytest.approx(0.3474, abs=1e-3)
    assert (shown["p"] - 1.96 * shown["p_se"]).min() < 0  # what the figures drew before


def test_figure5_and_figure1_draw_measured_intervals_inside_0_and_1(tmp_path, captured):
    measured = _measured_near_0()
    path = pl.DataFrame({"compute": [50.0, 100.0], "currency": ["flop"] * 2} | {a: [4.0, 8.0] for a in RECIPE_AXES})
    exponents = pl.DataFrame({"axis": list(RECIPE_AXES), "slope": [0.0, 0.3, 0.4, 0.3]})
    curves = measured.select("strategy", "compute", "predicted_success")
    recipe_figures.figure5(path, exponents, curves, measured, tmp_path / "5.png", tmp_path / "5.pdf")
    recipe_figures.figure1(measured, tmp_path / "1.png", tmp_path / "1.pdf")
    for figure, panel in ((captured[0], 1), (captured[1], 0)):
        ax = figure.axes[panel]
        bars = [c for c in ax.collections if isinstance(c, LineCollection)]
        ends = np.concatenate([np.asarray(s)[:, 1] for c in bars for s in c.get_segments()])
        assert len(ends) >= 6 and ends.min() >= 0 and ends.max() <= 1
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert any("Wilson 95%" in label for label in labels), labels


def test_the_seed_spread_interval_of_the_noise_figure_stays_inside_0_and_1():
    """The seeds' own interval of a point's success: Wilson on the effective trials, inside [0, 1]
    near 0 (``p - 1.96 sqrt(s^2 / seeds)`` was cut at 0 before), the point itself where the seeds
    agree, none with one seed."""
    rows = pl.DataFrame(
        {
            "p": [0.01, 0.3, 0.0, 0.2],
            "between_seed_var": [0.0004, 0.04, 0.0, None],
            "n_seeds": [4, 4, 4, 1],
        },
        schema_overrides={"between_seed_var": pl.Float64},
    )
    lo, hi = seed_spread_interval(rows)
    assert 0 < lo[0] < 0.01 < hi[0] < 1 and 0 < lo[1] < 0.3 < hi[1] < 1
    assert lo[2] == hi[2] == 0 and np.isnan(lo[3]) and np.isnan(hi[3])
    assert 0.01 - 1.96 * math.sqrt(0.0004 / 4) < 0  # what the band was, cut at 0


def test_figure2_ticks_each_axis_at_its_grid_points(tmp_path, captured):
    """A sweep over 4, 8, 16 is labelled 4, 8, 16: not a log axis's decades and minor ticks (4, 6, 10)."""
    points = _points()
    figures.figure2(points, _fits(), tmp_path / "f.png", tmp_path / "f.pdf")
    for ax, axis in zip(captured[0].axes, figures.AXIS_ORDER, strict=False):
        grid = sorted(points.filter(pl.col("axis") == axis)["x"].unique().to_list())
        assert list(ax.get_xticks()) == grid and not list(ax.xaxis.get_minor_locator()())
        assert [t.get_text() for t in ax.get_xticklabels()] == [f"{v:g}" for v in grid]
