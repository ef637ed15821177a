"""Figures 1 and 5 and ``axisrl recipe`` on small real recipe frames built without the workflow:
a hand-made law (width held at the centre), a cost model, and the recipe's own path and strategies."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import numpy as np
import polars as pl
import pytest

from axisrl import artifacts
from axisrl.artifacts import write_artifact
from axisrl.cli import main
from axisrl.config import StageSpec
from axisrl.laws.joint import Law
from axisrl.recipe import (
    RECIPE_AXES,
    CostModel,
    allocation_at,
    bootstrap_exponents,
    chinchilla_transfer,
    exponents,
    log_budgets,
    recipe,
    recipe_path,
    trajectories_only,
)
from axisrl.recipe.study import cost_frame
from axisrl.report import recipe_figures

LAW = Law(E=0.3, A={"d_env": 2.0, "d_task": 3.0, "d_traj": 1.0}, alpha={"d_env": 0.5, "d_task": 0.3, "d_traj": 0.2})
RANGES = {"d_env": (2.0, 64.0), "d_task": (8.0, 1024.0), "d_traj": (1.0, 32.0)}
CENTRE = {"width": 64.0, "d_env": 8.0, "d_task": 64.0, "d_traj": 4.0}
FIXED = {"width": CENTRE["width"]}
MODEL = CostModel(
    "flop",
    visits=64.0,
    c_width=1e3,
    c_env=2e5,
    c_task=1e4,
    c_traj=100.0,
    c_token=1.0,
    tokens_per_rollout=20.0,
    model_size_exponent=2.0,
    terms=("linear", "bilinear"),
)
UNIT = float(MODEL.cost(CENTRE))
MIN_COST = float(MODEL.cost(FIXED | {a: lo for a, (lo, _) in RANGES.items()}))
STRATEGIES = ("recipe", "trajectories_only", "chinchilla_transfer")
SPEC = StageSpec("recipe", {}, {})
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _draws(n: int = 30, seed: int = 0) -> list[Law]:
    rng = np.random.default_rng(seed)
    return [
        Law(
            LAW.E * float(np.exp(0.05 * rng.standard_normal())),
            {a: v * float(np.exp(0.05 * rng.standard_normal())) for a, v in LAW.A.items()},
            {a: v + 0.02 * float(rng.standard_normal()) for a, v in LAW.alpha.items()},
        )
        for _ in range(n)
    ]


def _law_frame(draws: list[Law]) -> pl.DataFrame:
    """The columns ``axisrl.recipe.fitted.law_frame`` writes: draw -1 is the fit."""
    rows = [
        {
            "draw": k - 1,
            "E": law.E,
            "m_star": law.m_star,
            "k_star": law.k_star,
            **{f"A_{a}": law.A.get(a) for a in RECIPE_AXES},
            **{f"alpha_{a}": law.alpha.get(a) for a in RECIPE_AXES},
            **{f"lo_{a}": RANGES.get(a, (None, None))[0] for a in RECIPE_AXES},
            **{f"hi_{a}": RANGES.get(a, (None, None))[1] for a in RECIPE_AXES},
            **{f"centre_{a}": CENTRE[a] for a in RECIPE_AXES},
        }
        for k, law in enumerate([LAW, *draws])
    ]
    return pl.DataFrame(rows, schema_overrides={name: pl.Float64 for name in rows[0] if name != "draw"})


def _write_recipe(folder, draws: list[Law] | None = None) -> None:
    write_artifact(_law_frame(_draws() if draws is None else draws), folder / "law.parquet", SPEC)
    write_artifact(cost_frame(MODEL, "toolworld"), folder / "cost.parquet", SPEC)


def _allocation(strategy: str, compute: float):
    reference = dict(CENTRE)
    if strategy == "recipe":
        return recipe(LAW, MODEL, compute, bounds=RANGES, fixed=FIXED, starts=2)
    if strategy == "trajectories_only":
        return trajectories_only(LAW, MODEL, compute, reference)
    return chinchilla_transfer(LAW, MODEL, compute, reference, hold=("width",))


@pytest.fixture(scope="module")
def frames() -> dict[str, pl.DataFrame]:
    """path, exponents (with bootstrap intervals), curves and measured, as the recipe and validate stages write them."""
    budgets = log_budgets(UNIT, 8 * UNIT, 6)
    path = recipe_path(LAW, MODEL, budgets, bounds=RANGES, fixed=FIXED, starts=2)
    _, intervals = bootstrap_exponents(_draws(3), MODEL, budgets[::2], bounds=RANGES, fixed=FIXED, starts=2)
    table = exponents(path).join(intervals, on="axis", how="left")
    curves = pl.DataFrame(
        [
            {
                "strategy": s,
                "compute": float(c),
                "currency": "flop",
                "predicted_success": (a := _allocation(s, float(c))).predicted_success,
                **a.values,
                **{f"share_{x}": a.shares[x] for x in RECIPE_AXES},
            }
            for c in budgets
            for s in STRATEGIES
        ]
    )
    rng = np.random.default_rng(1)
    rows = []
    jobs = [("strategy", s, f) for f in (1.0, 2.0, 4.0) for s in STRATEGIES] + [("validation", "recipe", 8.0)]
    for role, strategy, factor in jobs:
        compute = factor * UNIT
        solved = _allocation(strategy, compute)
        design = {a: max(1, round(v)) for a, v in solved.values.items()}
        rounded = allocation_at(LAW, MODEL, {a: float(v) for a, v in design.items()}, compute, strategy=strategy)
        predicted = rounded.predicted_success
        p = float(np.clip(predicted + 0.03 * rng.standard_normal(), 0.01, 0.99))
        trials = 400
        rows.append(
            {
                "role": role,
                "strategy": strategy,
                "compute_factor": factor,
                "compute": compute,
                "currency": "flop",
                "point_key": f"{strategy}-{factor:g}",
                **design,
                "algo": "ppo",
                "cost": rounded.cost,
                "predicted_loss": rounded.predicted_loss,
                "predicted_success": predicted,
                "success_lo": predicted - 0.08,
                "success_hi": predicted + 0.06,
                **{f"share_{a}": rounded.shares[a] for a in RECIPE_AXES},
                **{f"solved_{a}": solved.values[a] for a in RECIPE_AXES},
                "n_seeds": 2,
                "p": p,
                "loss": -np.log(p),
                "loss_se": 0.02,
                "trials": trials,
                "p_se": float(np.sqrt(p * (1 - p) / trials)),
                "inside_interval": True,
            }
        )
    return {"path": path, "exponents": table, "curves": curves, "measured": pl.DataFrame(rows)}


def _assert_written(png, pdf, min_png: int = 10_000) -> None:
    assert png.read_bytes()[:8] == PNG_SIGNATURE
    assert png.stat().st_size > min_png
    assert pdf.read_bytes()[:5] == b"%PDF-"
    assert pdf.stat().st_size > 1_000


# --- figures ---------------------------------------------------------------------------------------


def test_figure5_writes_png_and_pdf(tmp_path, frames, captured):
    png, pdf = tmp_path / "out" / "fig5.png", tmp_path / "out" / "fig5.pdf"
    recipe_figures.figure5(frames["path"], frames["exponents"], frames["curves"], frames["measured"], png, pdf)
    _assert_written(png, pdf)
    left, right = captured[0].axes
    labels = [t.get_text() for t in left.get_legend().get_texts()]
    assert any(re.fullmatch(r"d_env: \d\.\d\d \[\d\.\d\d, \d\.\d\d\]", label) for label in labels), labels
    assert "width: 0 (pinned)" in labels
    assert left.get_xscale() == right.get_xscale() == "log" and left.get_yscale() == "log"
    assert "(flop)" in right.get_xlabel()
    right_labels = [t.get_text() for t in right.get_legend().get_texts()]
    assert right_labels[:3] == ["recipe", "trajectories only", "Chinchilla transfer"]
    # 3 strategies x 3 measured compute levels, each jittered off the level by a different factor
    measured_x = np.concatenate([line.get_xdata() for line in right.lines if line.get_marker() == "o"])
    assert len(measured_x) == 9 and len(set(np.round(measured_x, 3))) == 9
    stars = [line for line in right.lines if line.get_marker() == "*"]
    assert len(stars) == 1 and stars[0].get_color() == "black"


def test_figure5_without_measurements_draws_predictions(tmp_path, frames):
    measured = frames["measured"].drop("n_seeds", "p", "loss", "loss_se", "trials", "p_se", "inside_interval")
    png, pdf = tmp_path / "fig5.png", tmp_path / "fig5.pdf"
    recipe_figures.figure5(frames["path"], frames["exponents"], frames["curves"], measured, png, pdf)
    _assert_written(png, pdf)


def test_figure1_writes_png_and_pdf(tmp_path, frames, captured):
    png, pdf = tmp_path / "fig1.png", tmp_path / "fig1.pdf"
    recipe_figures.figure1(frames["measured"], png, pdf)
    _assert_written(png, pdf)
    bars, *pies = captured[0].axes
    assert f"{4 * UNIT:.3g} flop" in bars.get_title()
    assert [p.get_title() for p in pies] == ["recipe", "trajectories only", "Chinchilla transfer"]
    heights = [patch.get_height() for patch in bars.patches if patch.get_height() > 0]
    top = frames["measured"].filter(pl.col("compute_factor") == 4.0, pl.col("role") == "strategy")
    np.testing.assert_allclose(sorted(heights), sorted(top["p"].to_list()))
    # width is held at the centre but costs something: every pie has a wedge per positive share
    assert all(len(p.patches) == 4 for p in pies)


@pytest.mark.parametrize("unmeasured", ["no_column", "all_null"])
def test_figure1_placeholder_without_measurements(tmp_path, frames, captured, unmeasured):
    measured = frames["measured"]
    measured = (
        measured.drop("p") if unmeasured == "no_column" else measured.with_columns(p=pl.lit(None, dtype=pl.Float64))
    )
    png, pdf = tmp_path / "fig1.png", tmp_path / "fig1.pdf"
    recipe_figures.figure1(measured, png, pdf)
    _assert_written(png, pdf, min_png=1_000)
    texts = [t.get_text() for t in captured[0].axes[0].texts]
    assert texts and "Figure 1" in texts[0]


# --- axisrl recipe --------------------------------------------------------------------------------


def test_cli_recipe_prints_allocation_and_interval(tmp_path, capsys):
    _write_recipe(tmp_path)
    budget = 3 * UNIT
    assert main(["recipe", "--budget", f"{budget:.6e}", "--law", str(tmp_path / "law.parquet"), "--starts", "3"]) == 0
    out = capsys.readouterr().out
    assert "flop" in out and str(tmp_path / "law.parquet") in out and "toolworld" in out
    solved = recipe(LAW, MODEL, float(f"{budget:.6e}"), bounds=RANGES, fixed=FIXED, starts=3)
    for axis in RECIPE_AXES:
        line = next(line for line in out.splitlines() if line.strip().startswith(f"{axis} "))
        assert f"{max(1, round(solved.values[axis])):,}" in line.split()
        assert f"{solved.shares[axis]:.3f}" in line
    match = re.search(r"predicted held-out success: ([\d.]+), 95% interval \[([\d.]+), ([\d.]+)\]", out)
    assert match, out
    point, low, high = map(float, match.groups())
    assert point == pytest.approx(solved.predicted_success, abs=1e-3)
    assert low < high and low <= point + 0.05 and high >= point - 0.05
    assert f"{UNIT:.4g} flop" in out  # the centre design's cost, for orientation


def test_cli_recipe_budget_below_minimum(tmp_path, capsys):
    _write_recipe(tmp_path)
    code = main(["recipe", "--budget", "1e3", "--law", str(tmp_path / "law.parquet")])
    assert code == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("axisrl: error: ")
    assert "minimum" in lines[0] and f"{MIN_COST:.6g}" in lines[0]
    assert captured.out == ""


def test_cli_recipe_finds_the_newest_law(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    stamps = iter(
        [
            datetime(2024, 1, 2, tzinfo=UTC),
            datetime(2024, 1, 2, tzinfo=UTC),
            datetime(2024, 1, 1, tzinfo=UTC),
            datetime(2024, 1, 1, tzinfo=UTC),
        ]
    )

    class Clock(datetime):
        @classmethod
        def now(cls, tz=None):
            return next(stamps)

    monkeypatch.setattr(artifacts, "datetime", Clock)
    _write_recipe(tmp_path / "results" / "recipe" / "aaaa", draws=[])  # newer, first in path order
    _write_recipe(tmp_path / "results" / "recipe" / "zzzz")  # older, last in path order
    monkeypatch.undo()
    monkeypatch.chdir(tmp_path)
    assert main(["recipe", "--budget", str(2 * UNIT), "--starts", "2"]) == 0
    out = capsys.readouterr().out
    assert "results/recipe/aaaa/law.parquet" in out and "zzzz" not in out
    assert "no interval" in out  # the newer law has no bootstrap draws


def test_cli_recipe_without_a_law(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["recipe", "--budget", "3.4e10"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("axisrl: error: ") and "run `snakemake recipe` first or pass --law" in err


def test_cli_recipe_unknown_domain(tmp_path, capsys):
    _write_recipe(tmp_path)
    assert (
        main(["recipe", "--budget", str(2 * UNIT), "--law", str(tmp_path / "law.parquet"), "--domain", "webshop"]) == 2
    )
    err = capsys.readouterr().err
    assert "webshop" in err and "toolworld" in err
