"""Collapse diagnostics: a run's summary of its metrics rows, the collapse rule at its threshold,
and the laws analysis naming the runs whose tool use collapsed."""

from __future__ import annotations

import polars as pl
import pytest

from axisrl.diagnostics import TENTHS, TOOL_USE_COLLAPSE_FRACTION, run_diagnostics, tool_use_collapsed_runs
from axisrl.laws import simulate_study
from axisrl.laws.study import LawSettings, analyse


def step(no_tool_call_share: float, tool_calls_mean: float = 3.0, episodes: int = 10) -> dict:
    """A metrics row of one training step (the columns ``run_diagnostics`` reads)."""
    return {
        "episodes": episodes,
        "tool_calls_mean": tool_calls_mean,
        "no_tool_call_share": no_tool_call_share,
        "turns_mean": tool_calls_mean + 1,
        "parse_failures": 1,
        "truncated_share": 0.1,
    }


def test_a_run_whose_last_tenth_stopped_calling_tools_collapsed():
    rows = [step(0.0) for _ in range(18)] + [step(1.0, tool_calls_mean=0.0) for _ in range(2)]
    summary = run_diagnostics(rows)
    assert (summary["tool_call_rate_last_tenth"], summary["tool_call_rate_peak_tenth"]) == (0.0, 1.0)
    assert summary["tool_use_collapsed"] is True
    assert summary["no_tool_call_share"] == pytest.approx(0.1) and summary["parse_failures"] == 20
    assert summary["tool_calls_mean"] == pytest.approx(2.7) and summary["truncated_share"] == pytest.approx(0.1)


def test_fewer_calls_per_episode_is_not_a_collapse_while_every_episode_still_calls():
    """A policy that learns to solve in fewer calls keeps its tool-call rate."""
    rows = [step(0.0, tool_calls_mean=10.0 - 0.4 * k) for k in range(20)]
    summary = run_diagnostics(rows)
    assert summary["tool_use_collapsed"] is False and summary["tool_call_rate_last_tenth"] == 1.0


def test_the_threshold_is_strict_and_the_peak_is_any_tenth():
    """Peak in the third tenth (rate 0.8), the others at exactly TOOL_USE_COLLAPSE_FRACTION of it:
    not collapsed; a little lower in the last tenth: collapsed."""
    peak, at = 0.8, TOOL_USE_COLLAPSE_FRACTION * 0.8
    rows = [step(1 - (peak if k in (4, 5) else at)) for k in range(2 * TENTHS)]
    assert run_diagnostics(rows)["tool_call_rate_peak_tenth"] == pytest.approx(peak)
    assert run_diagnostics(rows)["tool_use_collapsed"] is False
    rows[-2:] = [step(1 - at + 0.01)] * 2
    assert run_diagnostics(rows)["tool_use_collapsed"] is True


def test_steps_are_weighted_by_their_episodes_and_steps_without_episodes_left_out():
    """A verl step the episode log has no records for has None diagnostics; a short run has no tenths."""
    empty = dict.fromkeys(step(0.0)) | {"episodes": None}
    summary = run_diagnostics([step(0.0, episodes=30), step(1.0, tool_calls_mean=0.0, episodes=10), empty])
    assert summary["no_tool_call_share"] == pytest.approx(0.25) and summary["tool_calls_mean"] == pytest.approx(2.25)
    assert summary["parse_failures"] == 2
    assert summary["tool_use_collapsed"] is None and summary["tool_call_rate_last_tenth"] is None
    assert run_diagnostics([empty])["tool_calls_mean"] is None


def test_the_laws_analysis_names_the_runs_whose_tool_use_collapsed():
    runs = simulate_study(
        lambda designs: 2.0 * designs["d_env"].to_numpy() ** -0.4 * designs["d_task"].to_numpy() ** -0.25
    ).runs
    flags = [True, None, True] + [False] * (runs.height - 3)
    flagged = runs.with_columns(tool_use_collapsed=pl.Series(flags, dtype=pl.Boolean))
    named = sorted(runs["run_key"][[0, 2]].to_list())
    assert tool_use_collapsed_runs(flagged) == named and tool_use_collapsed_runs(runs) == []
    warnings = analyse(flagged, settings=LawSettings(n_boot=20))["warnings"]["warning"].to_list()
    [collapse] = [w for w in warnings if "tool use collapsed" in w]
    assert collapse.endswith("2 run(s): " + ", ".join(named))
    assert not any(
        "tool use collapsed" in w for w in analyse(runs, settings=LawSettings(n_boot=20))["warnings"]["warning"]
    )
