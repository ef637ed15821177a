"""Studies simulated from a known law, so that the fits can be checked against the truth.

Each run's success probability is ``exp(-L)`` of the law at its design, with the noise real studies
show (``NoiseModel``, or one per sweep: ``SweepNoise``): multiplicative between-seed noise on ``L``
whose size differs by grid point, and a share of runs that do not take off. Each held-out task is
an independent Bernoulli draw. Runs get the columns of the ``collect`` stage, episodes the per-task
rows of ``evaluate``, and ``points`` each grid point's expected pooled success, the truth the fits
estimate.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import NamedTuple

import numpy as np
import polars as pl

from axisrl.laws.data import TIERS
from axisrl.laws.joint import Law, predict_loss
from axisrl.plan import Design, run_key

DEFAULT_GRIDS: dict[str, tuple[int, ...]] = {
    "d_env": (1, 2, 4, 8, 16, 32),
    "d_task": (8, 16, 32, 64, 128, 256),
    "d_traj": (2, 4, 8, 16, 32, 64),
}
DEFAULT_CENTRE: dict[str, int] = {"d_env": 8, "d_task": 32, "d_traj": 8}
VISITS_PER_RUN = 256
STEPS_PER_EPISODE = 4
"""Compute columns follow the default ``fixed_visits`` budget: every run visits tasks as often,
``d_traj`` rollouts a visit."""


@dataclass(frozen=True)
class NoiseModel:
    """How the runs of one grid point differ.

    ``seed_sd``: standard deviation of ``ln L`` between training seeds (0: binomial noise only);
    ``seed_sd_spread``: standard deviation of ``ln seed_sd`` across grid points (each point draws its
    own seed spread, as the default study's design effects range over a factor of 50);
    ``no_take_off``: the chance that a run does not take off and scores ``untrained_success``
    instead (the tiny backend's bimodal seeds).
    """

    seed_sd: float = 0.0
    seed_sd_spread: float = 0.0
    no_take_off: float = 0.0
    untrained_success: float = 0.02

    def of(self, off_centre: str | None) -> NoiseModel:
        """The model of a point off the centre along ``off_centre`` (None: the centre or off it in two
        axes): one model for every point."""
        return self

    def describe(self) -> str:
        """One line for a printout."""
        return (
            f"seed SD of ln L {self.seed_sd:.3f} (spread {self.seed_sd_spread} across points), "
            f"{self.no_take_off:.1%} of runs do not take off (success {self.untrained_success:.3g})"
        )


@dataclass(frozen=True)
class SweepNoise:
    """Noise that differs by sweep: ``sweeps[axis]`` for the points off the centre along ``axis``,
    ``centre`` for the centre, the interaction's points and any axis without a model of its own.
    A sweep's seeds can take off more or less often than another's (one environment is not 32)."""

    centre: NoiseModel
    sweeps: Mapping[str, NoiseModel]

    def of(self, off_centre: str | None) -> NoiseModel:
        return self.sweeps.get(off_centre, self.centre) if off_centre is not None else self.centre

    def describe(self) -> str:
        return "; ".join(
            [f"centre: {self.centre.describe()}", *(f"{axis}: {m.describe()}" for axis, m in self.sweeps.items())]
        )


GAUSS_HERMITE = np.polynomial.hermite_e.hermegauss(40)
"""Nodes and weights of the seed-noise expectation (probabilists' Hermite: weight ``exp(-z^2/2)``)."""


def expected_success(
    loss: np.ndarray, seed_sd: np.ndarray, no_take_off: np.ndarray, untrained_success: np.ndarray
) -> np.ndarray:
    """A run's expected held-out success at law loss ``loss``, seed spread ``seed_sd`` and its
    model's take-off (``NoiseModel``), elementwise."""
    nodes, weights = GAUSS_HERMITE
    trained = np.exp(-loss[:, None] * np.exp(seed_sd[:, None] * nodes[None])) @ weights / weights.sum()
    return (1 - no_take_off) * trained + no_take_off * untrained_success


EPISODE_SCHEMA = {"run_key": pl.String, "task_id": pl.String, "tier": pl.String, "success": pl.Boolean}


def run_success(
    law_loss: np.ndarray,
    run_sd: np.ndarray,
    shocks: np.ndarray,
    no_take_off: np.ndarray | float,
    untrained_success: np.ndarray | float,
    rng: np.random.Generator,
) -> np.ndarray:
    """Each run's success probability: ``exp(-L e^(sd z))`` for its seed shock ``z``, or
    ``untrained_success`` for a run that does not take off (drawn from ``rng`` when any run can)."""
    p_run = np.exp(-law_loss * np.exp(run_sd * shocks))
    if np.any(no_take_off):
        p_run = np.where(rng.random(len(p_run)) < no_take_off, untrained_success, p_run)
    return p_run


class SimulatedStudy(NamedTuple):
    runs: pl.DataFrame
    episodes: pl.DataFrame
    points: pl.DataFrame
    """One row per grid point: ``point_key``, its design, ``loss`` (the law's), ``seed_sd`` (drawn)
    and ``expected_success`` (over seeds and episodes)."""


def _designs(
    grids: Mapping[str, Sequence[int]],
    centre: Mapping[str, int],
    width: int,
    interaction: Mapping[str, Sequence[int]] | None,
) -> dict[str, tuple[Design, list[str]]]:
    """One-axis sweeps (``grids`` may include ``width``) and an optional factorial, merged by design."""
    base = Design(**centre, width=width, algo="grpo", reward_density="sparse")
    family_designs = [
        ("axis_sweeps", replace(base, **{axis: value})) for axis, values in grids.items() for value in values
    ]
    if interaction:
        family_designs += [
            ("interaction", replace(base, **dict(zip(interaction, combo, strict=True))))
            for combo in itertools.product(*interaction.values())
        ]
    merged: dict[str, tuple[Design, list[str]]] = {}
    for family, design in family_designs:
        _, families = merged.setdefault(design.point_key, (design, []))
        if family not in families:
            families.append(family)
    return merged


def _off_centre(design: Design, centre: Mapping[str, int]) -> str | None:
    """The one axis ``design`` leaves the centre along, None at the centre or off it in two."""
    off = [axis for axis, value in centre.items() if getattr(design, axis) != value]
    return off[0] if len(off) == 1 else None


def simulate_study(
    law: Law | Callable[[pl.DataFrame], np.ndarray],
    *,
    grids: Mapping[str, Sequence[int]] = DEFAULT_GRIDS,
    centre: Mapping[str, int] = DEFAULT_CENTRE,
    width: int = 64,
    interaction: Mapping[str, Sequence[int]] | None = None,
    seeds: Sequence[int] = (0, 1, 2),
    n_tasks: int = 256,
    noise: NoiseModel | SweepNoise = NoiseModel(),
    seed: int = 0,
    with_episodes: bool = True,
) -> SimulatedStudy:
    """Runs (collect columns, one per design x seed) and their per-task episodes.

    ``law`` is a ``Law`` or any function from design rows to ``L`` (e.g. a product of powers, whose
    one-axis sweeps are exact power laws).
    ``noise`` says how seeds differ (default: binomial noise only), the same at every point or by
    sweep (``SweepNoise``). Tasks are split round-robin into tiers T0, T1, T2; "all" pools them.
    ``with_episodes=False`` draws each tier's successes as one binomial count per run and returns no
    episodes (a power planner's thousands of studies).
    """
    rng = np.random.default_rng(seed)
    designs = _designs(grids, centre, width, interaction)
    rows = [
        {
            "run_key": run_key(point_key, s),
            "point_key": point_key,
            "families": families,
            "domain": "simulated",
            **asdict(design),
            "seed": s,
        }
        for point_key, (design, families) in designs.items()
        for s in seeds
    ]
    runs = pl.DataFrame(rows)
    law_loss = predict_loss(law, runs) if isinstance(law, Law) else law(runs)
    shocks = rng.standard_normal(runs.height)
    model = {key: noise.of(_off_centre(design, centre)) for key, (design, _) in designs.items()}
    point_sd = {key: m.seed_sd for key, m in model.items()}
    spreads = np.array([m.seed_sd_spread for m in model.values()])
    if spreads.any():
        spread = np.exp(spreads * rng.standard_normal(len(designs)))
        point_sd = {key: sd * factor for (key, sd), factor in zip(point_sd.items(), spread, strict=True)}
    run_sd = np.array([point_sd[key] for key in runs["point_key"]])
    run_model = [model[key] for key in runs["point_key"]]
    p_run = run_success(
        law_loss,
        run_sd,
        shocks,
        np.array([m.no_take_off for m in run_model]),
        np.array([m.untrained_success for m in run_model]),
        rng,
    )
    tier_of_task = np.array(TIERS[:3])[np.arange(n_tasks) % 3]
    if with_episodes:
        success = rng.random((runs.height, n_tasks)) < p_run[:, None]
        counts = {tier: success[:, tier_of_task == tier].sum(axis=1) for tier in TIERS[:3]}
    else:
        counts = {tier: rng.binomial(int((tier_of_task == tier).sum()), p_run) for tier in TIERS[:3]}
    counts["all"] = sum(counts[tier] for tier in TIERS[:3])
    columns = {}
    for tier in TIERS:
        n = n_tasks if tier == "all" else int((tier_of_task == tier).sum())
        p = counts[tier] / n
        columns |= {
            f"n_{tier}": np.full(runs.height, n),
            f"p_{tier}": p,
            f"se_{tier}": np.sqrt(p * (1 - p) / n),
            f"loss_{tier}": -np.log(np.clip(p, 0.5 / n, 1 - 0.5 / n)),
        }
    episodes = VISITS_PER_RUN * pl.col("d_traj")
    runs = runs.with_columns(
        status=pl.lit("ok"),
        **columns,
        visits=pl.lit(VISITS_PER_RUN),
        episodes=episodes,
        env_steps=episodes * STEPS_PER_EPISODE,
        rollout_flops=2.0 * pl.col("width").cast(pl.Float64) ** 2 * episodes * STEPS_PER_EPISODE,
        train_flops=6.0 * pl.col("width").cast(pl.Float64) ** 2 * episodes * STEPS_PER_EPISODE,
    )
    episodes = pl.DataFrame(schema=EPISODE_SCHEMA)
    if with_episodes:
        episodes = pl.DataFrame(
            {
                "run_key": np.repeat(runs["run_key"].to_numpy(), n_tasks),
                "task_id": np.tile([f"task-{t:04d}" for t in range(n_tasks)], runs.height),
                "tier": np.tile(tier_of_task, runs.height),
                "success": success.ravel(),
            },
            schema=EPISODE_SCHEMA,
        )
    points = pl.DataFrame([{"point_key": key, **asdict(design)} for key, (design, _) in designs.items()])
    point_loss = predict_loss(law, points) if isinstance(law, Law) else law(points)
    point_seed_sd = np.array([point_sd[key] for key in points["point_key"]])
    point_model = [model[key] for key in points["point_key"]]
    points = points.with_columns(
        loss=point_loss,
        seed_sd=point_seed_sd,
        expected_success=expected_success(
            point_loss,
            point_seed_sd,
            np.array([m.no_take_off for m in point_model]),
            np.array([m.untrained_success for m in point_model]),
        ),
    )
    return SimulatedStudy(runs, episodes, points)
