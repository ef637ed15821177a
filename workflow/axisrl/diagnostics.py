"""Collapse diagnostics: what a run's agent did per training step, summarised per run, and the
collapse rule the laws stage warns by.

The failure modes RL users report most in tool-using agents are tool use collapsing to no calls
and multi-turn responses cut at the length limit; neither shows in reward or success until too
late. Both backends count each training episode as ``EpisodeCounts`` and put ``step_diagnostics``
in every metrics row (beside ``zero_variance_groups``, which each backend counts from its groups);
the train stages put ``run_diagnostics`` in every runs row, so ``runs.parquet`` carries them and
the ``tool_use_collapsed`` flag, and the two GRPO diagnostics users ask for most (``SIGNAL_COLUMNS``):
the share of groups played without a learning signal and the mean per-update KL to the rollout policy.

=====================  ==========================================================================
metrics row column     per training step, over its training episodes
=====================  ==========================================================================
tool_calls_mean        calls of the environment's tools per episode, ``finish`` not counted
no_tool_call_share     share of episodes without such a call (no call at all, or only ``finish``)
turns_mean             the model's turns per episode (verl: assistant generations; tiny: decisions)
parse_failures         tool-call blocks that did not parse, summed (tiny: 0, its actions are
                       structured)
truncated_share        share of episodes cut by the rollout's length limit: verl's
                       ``max_response_length`` tokens; the tiny policy has no tokens, and its
                       length limit is the environment's ``max_steps`` (or the run's env-step cap)
=====================  ==========================================================================
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

STEP_COLUMNS = ("tool_calls_mean", "no_tool_call_share", "turns_mean", "parse_failures", "truncated_share")
"""The metrics row columns ``step_diagnostics`` fills (see the module docstring)."""
TOOL_USE_COLLAPSE_COLUMNS = ("tool_call_rate_last_tenth", "tool_call_rate_peak_tenth", "tool_use_collapsed")
"""The runs row columns of the collapse rule, beside the ``STEP_COLUMNS`` (see ``run_diagnostics``)."""
SIGNAL_COLUMNS = ("zero_variance_share", "rollout_kl_mean")
"""The runs row columns of the learning signal: ``zero_variance_groups`` over ``drawn_groups`` (the
groups played, all updates together), and the mean of the updates' ``rollout_kl`` (None where no row
measured it: behaviour cloning)."""
TENTHS = 10
"""A run's steps are cut into this many consecutive parts for the collapse rule; a run with fewer
steps has no tenths and no collapse flag."""
TOOL_USE_COLLAPSE_FRACTION = 0.5
"""A run's tool use collapsed when the tool-call rate (the share of episodes with a tool call) of
its last tenth of training is below this fraction of its peak tenth's. The peak, not the run's
mean, so that a run collapsing early is still caught; the share of episodes with a call, not the
calls per episode, so that a policy learning to solve in fewer calls is not flagged."""


@dataclass(frozen=True, slots=True)
class EpisodeCounts:
    """One training episode, as the diagnostics count it (see the module docstring)."""

    tool_calls: int
    turns: int
    parse_failures: int
    truncated: bool


def step_diagnostics(episodes: Sequence[EpisodeCounts]) -> dict[str, float | int | None]:
    """The ``STEP_COLUMNS`` of one training step's episodes; all None without episodes."""
    if not episodes:
        return dict.fromkeys(STEP_COLUMNS)
    return {
        "tool_calls_mean": float(np.mean([e.tool_calls for e in episodes])),
        "no_tool_call_share": float(np.mean([e.tool_calls == 0 for e in episodes])),
        "turns_mean": float(np.mean([e.turns for e in episodes])),
        "parse_failures": sum(e.parse_failures for e in episodes),
        "truncated_share": float(np.mean([e.truncated for e in episodes])),
    }


def _per_episode(rows: Sequence[Mapping[str, Any]], column: str) -> float | None:
    """The mean over the rows' episodes of a per-episode column (each step weighted by its episodes)."""
    episodes = sum(row["episodes"] for row in rows)
    return sum(row[column] * row["episodes"] for row in rows) / episodes if episodes else None


def run_diagnostics(metrics: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A run's diagnostics from its metrics rows (steps without episodes left out): the
    ``STEP_COLUMNS`` over all its episodes (``parse_failures`` summed), the tool-call rate of its
    last and of its peak tenth (``tool_call_rate_last_tenth``, ``tool_call_rate_peak_tenth``) and
    ``tool_use_collapsed`` (``TOOL_USE_COLLAPSE_FRACTION``); the tenths and the flag are None for a run of
    fewer than ``TENTHS`` steps."""
    drawn = sum(row.get("drawn_groups") or 0 for row in metrics)
    kls = [row["rollout_kl"] for row in metrics if row.get("rollout_kl") is not None]
    signal = {
        "zero_variance_share": sum(row.get("zero_variance_groups") or 0 for row in metrics) / drawn if drawn else None,
        "rollout_kl_mean": float(np.mean(kls)) if kls else None,
    }
    rows = [row for row in metrics if row["tool_calls_mean"] is not None and row["episodes"]]
    summary = {
        **signal,
        "tool_calls_mean": _per_episode(rows, "tool_calls_mean"),
        "no_tool_call_share": _per_episode(rows, "no_tool_call_share"),
        "turns_mean": _per_episode(rows, "turns_mean"),
        "parse_failures": sum(row["parse_failures"] for row in rows) if rows else None,
        "truncated_share": _per_episode(rows, "truncated_share"),
    }
    if len(rows) < TENTHS:
        return {**summary, **dict.fromkeys(TOOL_USE_COLLAPSE_COLUMNS)}
    n = len(rows)
    parts = [rows[k * n // TENTHS : (k + 1) * n // TENTHS] for k in range(TENTHS)]
    tenths = [1.0 - _per_episode(part, "no_tool_call_share") for part in parts]
    last, peak = tenths[-1], max(tenths)
    return {
        **summary,
        "tool_call_rate_last_tenth": last,
        "tool_call_rate_peak_tenth": peak,
        "tool_use_collapsed": last < TOOL_USE_COLLAPSE_FRACTION * peak,
    }


def tool_use_collapsed_runs(runs: pl.DataFrame) -> list[str]:
    """The run keys of a runs table whose tool use collapsed (none without the flag column)."""
    if "tool_use_collapsed" not in runs.columns:
        return []
    return sorted(runs.filter(pl.col("tool_use_collapsed").fill_null(False))["run_key"].to_list())
