"""Scaling-law fits of agentic-RL data: pure functions, polars frames in and out.

Methods and their reasons: ``docs/methods.md``. Modules: ``models`` (the power and floor models
fitted to one sweep's points), ``axis`` (per-axis laws, model selection, local slopes, success
trends, leave-one-out, two-stage bootstrap, axis ordering), ``joint`` (joint law, nested
interaction, Chinchilla objective, GLM pre-test), ``tables`` (the paper's robustness tables),
``simulate`` (studies from a known law, for tests), ``data`` (input schema, seed pooling); the learning
curves on V (issue 51, imported from their modules): ``curves`` (the saturating fit per run and per point,
seed-bootstrap intervals), ``curve_extrapolation`` (first half against the last point), ``curve_laws`` (laws of
the asymptote along the axes, a user's curves table) and ``curves_sim`` (simulated curve studies, coverage).

Input: runs
    One row per training run. Required: the design axes used (``d_env``, ``d_task``, ``d_traj``;
    ``width`` when model size is an axis) and success counts, either

    * ``successes`` and ``trials`` (integers), or
    * ``p_<tier>`` and ``n_<tier>`` for the chosen ``tier`` in {T0, T1, T2, all} (as written by
      the ``collect`` stage; ``successes = round(p * n)``).

    Optional: ``seed`` (missing: every row is its own seed), ``status`` (rows other than "ok" are
    excluded, counted in ``n_failed_excluded`` and warned about; ``data.check_runs`` refuses the
    others' empty or impossible counts and amounts, and two rows of one design and seed),
    ``run_key`` (needed to match episodes), ``point_key``, ``families`` (list of experiment
    families, used by ``tables`` to pick runs), and the setting columns ``width``, ``algo``,
    ``reward_density``, ``env_level``, ``worlds``, ``budget``: a fit refuses to pool runs that
    differ in any of them unless it is one of the fitted axes (use ``fit_axes_by`` to group).

Input: episodes (optional, for the task-level bootstrap)
    One row per held-out episode: ``run_key``, ``task_id``, ``tier``, ``success`` (bool).

Loss: ``L = -ln p`` of the seed-pooled success ``p = sum successes / sum trials``, clipped to
[1/(2n), 1 - 1/(2n)].
"""

from axisrl.laws.axis import (
    axis_ordering,
    fit_axes,
    fit_axes_by,
    leave_one_out,
    local_slopes,
    success_trends,
)
from axisrl.laws.data import pool_points, usable_runs
from axisrl.laws.joint import (
    Law,
    bootstrap_joint,
    fit_chinchilla,
    fit_joint,
    fitted_law,
    interaction_pretest,
    predict_loss,
)
from axisrl.laws.models import fit_floor, fit_power, floor_profile
from axisrl.laws.simulate import simulate_study
from axisrl.laws.tables import (
    budget_convention_table,
    calibration_table,
    held_axis_table,
    pool_construction_table,
    subset_fit_table,
    task_dedup_table,
    worlds_variants_table,
)

__all__ = [
    "Law",
    "axis_ordering",
    "bootstrap_joint",
    "budget_convention_table",
    "calibration_table",
    "fit_axes",
    "fit_axes_by",
    "fit_chinchilla",
    "fit_floor",
    "fit_joint",
    "fit_power",
    "fitted_law",
    "floor_profile",
    "held_axis_table",
    "interaction_pretest",
    "leave_one_out",
    "local_slopes",
    "pool_construction_table",
    "pool_points",
    "predict_loss",
    "simulate_study",
    "subset_fit_table",
    "success_trends",
    "task_dedup_table",
    "usable_runs",
    "worlds_variants_table",
]
