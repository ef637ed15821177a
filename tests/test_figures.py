"""Figures 2 and 3 render from small synthetic frames, tolerate sparse input, reject bad input."""

from __future__ import annotations

import itertools
import math

import numpy as np
import polars as pl
import pytest

from axisrl.report import figures, style

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
