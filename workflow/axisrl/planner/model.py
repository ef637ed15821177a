"""The model of a study the planner simulates: its design (``SweepDesign``, ``design_of``), the truth its
simulated studies are drawn around (``Truth``) and the noise read off a finished study's ``noise`` frame
(``from_noise_frame``), with the stated values used without one. Apart because every other module of the
planner reads these and this one reads none of them; ``_simulate``, one simulated study of a design, lives
here too since matching a frame's seed spread (``_matched_seed_sd``) simulates studies."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import numpy as np
import polars as pl
from scipy import optimize

from axisrl import adaptive
from axisrl.laws.data import AXES, VALIDATION_TIER, clipped_success
from axisrl.laws.noise import noise_frame
from axisrl.laws.simulate import NoiseModel, SweepNoise, simulate_study

TIER = "T2"
"""The tier whose intervals the planner predicts (the headline's), in its simulated studies."""
PLANNING_TIER = VALIDATION_TIER
"""The tier a finished study's noise is read from: the validation worlds, since a seed count chosen
on the test tier's spread would be chosen on the test set (its worlds are drawn as T2's are)."""
STATED_SEED_SD_SPREAD = 0.33
"""Spread of the seed SD across points: a handful of seeds cannot estimate it per study, so it is stated."""
STATED_NOISE = NoiseModel(
    seed_sd=0.095, seed_sd_spread=STATED_SEED_SD_SPREAD, no_take_off=0.028, untrained_success=0.05
)
"""The default study's noise, pooled over its sweeps (``from_noise_frame``'s centre model of its
``noise`` frame, V tier, 4 seeds a point, every run from the pretrained base; from random init it
was seed SD 0.10 with 24 % of seeds not taking off): what the planner assumes without a frame."""
STATED_CENTRE_SUCCESS = 0.18
STATED_ALPHA = 0.1
QUANTITIES = adaptive.QUANTITIES


@dataclass(frozen=True)
class SweepDesign:
    """The headline sweeps of a study: grid values per axis, the centre, seeds per grid point and
    held-out (T2) episodes per run."""

    grids: Mapping[str, tuple[int, ...]]
    centre: Mapping[str, int]
    seeds: int
    episodes: int

    @property
    def runs(self) -> int:
        """Distinct training runs: the centre once, every other grid point of every sweep, times seeds."""
        return self.seeds * (1 + sum(len(values) - 1 for values in self.grids.values()))

    def label(self) -> str:
        points = "/".join(str(len(self.grids[axis])) for axis in self.grids)
        return f"{self.seeds} seeds, {points} points, {self.episodes} T2 episodes"


@dataclass(frozen=True)
class Truth:
    """The held-out loss the simulated studies are drawn around: per axis its sweep's curve ``(x, L)``,
    interpolated linearly in ``ln x`` and ``ln L`` (held flat beyond its ends); the centre design
    takes the first axis's curve at its centre value."""

    curves: Mapping[str, tuple[np.ndarray, np.ndarray]]
    centre: Mapping[str, int]
    offsets_kept: float = 0.0
    """The share of a finished study's point offsets about its log-log lines the curves keep."""

    @property
    def centre_loss(self) -> float:
        axis = next(iter(self.curves))
        x, loss = self.curves[axis]
        return float(np.exp(np.interp(np.log(self.centre[axis]), np.log(x), np.log(loss))))

    def loss(self, designs: pl.DataFrame) -> np.ndarray:
        off = {axis: designs[axis].to_numpy() != value for axis, value in self.centre.items()}
        if (np.sum(list(off.values()), axis=0) > 1).any():
            raise ValueError("a design off the centre in two axes is in no one-axis sweep")
        out = np.full(designs.height, self.centre_loss)
        for axis, (x, loss) in self.curves.items():
            values = designs[axis].to_numpy()[off[axis]].astype(np.float64)
            out[off[axis]] = np.exp(np.interp(np.log(values), np.log(x), np.log(loss)))
        return out

    def product_loss(self, values: Mapping[str, float]) -> float:
        """``L`` off the sweeps (a mixture's base design): the centre's loss times each axis's
        ``(x / centre)^-slope``, the product law of the sweeps' slopes."""
        slopes = self.slopes()
        return self.centre_loss * float(np.prod([(values[a] / c) ** -slopes[a] for a, c in self.centre.items()]))

    def slopes(self) -> dict[str, float]:
        """Each curve's least-squares log-log slope (``alpha``), to say what the truth is."""
        return {axis: float(-np.polyfit(np.log(x), np.log(loss), 1)[0]) for axis, (x, loss) in self.curves.items()}


def design_of(config: Mapping[str, Any], episodes: int | None = None) -> SweepDesign:
    """The config's axis sweeps (its ``study``); ``episodes`` per run defaults to the held-out T2
    pool's size (``synthesize.heldout``)."""
    study = config["study"]
    sweeps = study["families"]["axis_sweeps"]
    seeds = len(study["seeds"]) + len(sweeps.get("extra_seeds", []))
    if episodes is None:
        heldout = config["synthesize"]["heldout"]
        episodes = heldout["t2_worlds"] * heldout["t2_variants_per_world"] * heldout["tasks_per_env"]
    grids = {axis: tuple(sorted(study["grids"][axis])) for axis in AXES}
    return SweepDesign(grids, dict(study["centre"]), seeds, episodes)


class _SweepLine(NamedTuple):
    """One sweep of a noise frame: ``ln x``, ``ln L`` of its points, their log-log line there, and the
    sampling variance of each point's ``ln L`` (its seeds' spread, or binomial with one seed)."""

    log_x: np.ndarray
    log_loss: np.ndarray
    line: np.ndarray
    variance: np.ndarray


def _sweep_line(sweep: pl.DataFrame) -> _SweepLine:
    """A point whose seeds all scored 0 (or all 1) has no finite ``ln L``: its success is clipped as
    the fits clip it (``clipped_success``, half an episode off 0 or 1), and its variance is the
    binomial one there (its seeds' spread and binomial variance are 0)."""
    successes, trials = sweep["successes"].to_numpy(), sweep["trials"].to_numpy()
    log_x, p = np.log(sweep["x"].to_numpy()), clipped_success(successes, trials)
    log_loss = np.log(-np.log(p))
    variance_p = sweep["between_seed_var"].fill_null(sweep["binomial_var"]).to_numpy() / sweep["n_seeds"].to_numpy()
    variance_p = np.where((successes == 0) | (successes == trials), p * (1 - p) / trials, variance_p)
    line = np.polyval(np.polyfit(log_x, log_loss, 1), log_x)
    return _SweepLine(log_x, log_loss, line, variance_p / (p * np.log(p)) ** 2)


def _offsets_kept(lines: Sequence[_SweepLine]) -> float:
    """The share of the points' scatter about each sweep's log-log line that is real: a point's own
    offset (its pool, say) recurs with new seeds, its sampling noise does not. Method of moments over
    all sweeps: the residuals' sum of squares less what the points' variances give (``(G - 2) / G``
    of their sum about a fitted line), as a share of it, floored at 0."""
    residual_ss = sum(float(np.sum((line.log_loss - line.line) ** 2)) for line in lines)
    noise_ss = sum((len(line.log_x) - 2) / len(line.log_x) * float(line.variance.sum()) for line in lines)
    return max(0.0, 1.0 - noise_ss / residual_ss) if residual_ss > 0 else 0.0


def from_noise_frame(
    noise: pl.DataFrame, centre: Mapping[str, int], take_off: float, tier: str = PLANNING_TIER
) -> tuple[Truth, SweepNoise, int]:
    """The truth, noise and episodes per run that a finished study's ``noise`` frame (its ``tier``
    rows) implies: each sweep's log-log line with the share of its points' offsets that is real
    (``_offsets_kept``: a real trend interval is widened by them), and a noise model per sweep
    (``SweepNoise``: its seeds take off more or less often than another sweep's, and a sweep's trend
    interval is as wide as its own runs' spread): the share of seeds that did not take off, at half
    ``take_off``, and the seed SD of ``ln L`` that gives the measured seed spread
    (``_matched_seed_sd``, at the tier's own episodes per run, so its binomial part is its own). The
    centre's model pools every row; a sweep's is read off its points off the centre."""
    rows = noise.filter(pl.col("tier") == tier)
    if rows.is_empty():
        raise ValueError(
            f"the noise frame has no {tier} rows (a study from before the validation tier: rerun its laws stage)"
        )
    sweeps = {axis: rows.filter(pl.col("axis") == axis).sort("x") for axis in AXES}
    for axis, sweep in sweeps.items():
        if sweep.height < 3:
            raise ValueError(f"the noise frame has {sweep.height} {axis} points; a sweep's line needs 3")
    lines = {axis: _sweep_line(sweep) for axis, sweep in sweeps.items()}
    kept = _offsets_kept(list(lines.values()))
    curves = {
        axis: (sweeps[axis]["x"].to_numpy(), np.exp(line.line + kept * (line.log_loss - line.line)))
        for axis, line in lines.items()
    }
    episodes = episodes_per_run(rows)
    truth = Truth(curves, dict(centre), kept)
    grids = {axis: tuple(int(x) for x in sweep["x"]) for axis, sweep in sweeps.items()}
    design = SweepDesign(grids, dict(centre), int(np.median(rows["n_seeds"].to_numpy())), episodes)
    pooled = NoiseModel(0.0, STATED_SEED_SD_SPREAD, _no_take_off(rows), take_off / 2)
    pooled = replace(pooled, seed_sd=_matched_seed_sd(design, truth, SweepNoise(pooled, {}), None, rows, take_off))
    models = {}
    for axis, sweep in sweeps.items():
        off_centre = sweep.filter(pl.col("x") != centre[axis])
        model = replace(pooled, seed_sd=0.0, no_take_off=_no_take_off(off_centre))
        noise_of = SweepNoise(pooled, {axis: model})
        models[axis] = replace(model, seed_sd=_matched_seed_sd(design, truth, noise_of, axis, off_centre, take_off))
    return truth, SweepNoise(pooled, models), episodes


def _no_take_off(rows: pl.DataFrame) -> float:
    """The share of a noise frame's seeds (``rows``) that did not take off."""
    seeds = rows["n_seeds"].to_numpy()
    return float(1 - (rows["take_off_share"].to_numpy() * seeds).sum() / seeds.sum())


def episodes_per_run(rows: pl.DataFrame) -> int:
    """Held-out episodes per run of a noise frame's rows (one tier's)."""
    return int(round(float((rows["trials"] / rows["n_seeds"]).mean())))


def _excess(rows: pl.DataFrame) -> float:
    """The points' mean between-seed variance of success beyond binomial noise."""
    return float((rows["between_seed_var"] - rows["binomial_var"]).drop_nulls().mean())


MATCH_SIMS = 24
"""Simulated studies per step of ``_matched_seed_sd``'s search (the same seeds at every step)."""


def _matched_seed_sd(
    design: SweepDesign, truth: Truth, noise: SweepNoise, axis: str | None, rows: pl.DataFrame, take_off: float
) -> float:
    """The seed SD of ``ln L`` at which simulated studies of the finished study's design show the
    measured excess variance (``_excess``) of its ``rows`` on average: the centre's model (``axis``
    None, every row) or ``axis``'s (its points off the centre). The take-off share is read off the
    frame, and the rest of the seeds' spread is matched by simulation, not by a delta method that a
    bimodal mixture breaks."""
    excess = _excess(rows)

    def with_sd(seed_sd: float) -> SweepNoise:
        if axis is None:
            return SweepNoise(replace(noise.centre, seed_sd=seed_sd), noise.sweeps)
        return SweepNoise(noise.centre, {**noise.sweeps, axis: replace(noise.sweeps[axis], seed_sd=seed_sd)})

    def simulated(seed_sd: float) -> float:
        frames = [
            noise_frame(_simulate(design, truth, with_sd(seed_sd), s), [TIER], take_off) for s in range(MATCH_SIMS)
        ]
        if axis is not None:
            frames = [f.filter(pl.col("axis") == axis, pl.col("x") != design.centre[axis]) for f in frames]
        return float(np.mean([_excess(f) for f in frames]))

    if simulated(0.0) >= excess:
        return 0.0
    high = 0.5
    while simulated(high) < excess and high < 4:
        high *= 2
    return float(optimize.brentq(lambda sd: simulated(sd) - excess, 0.0, high, xtol=1e-3))


def _simulate(design: SweepDesign, truth: Truth, noise: NoiseModel | SweepNoise, seed: int) -> pl.DataFrame:
    """One simulated study of ``design``: its runs, with T2 counts of ``design.episodes`` per run."""
    return simulate_study(
        truth.loss,
        grids=design.grids,
        centre=design.centre,
        seeds=tuple(range(design.seeds)),
        n_tasks=3 * design.episodes,
        noise=noise,
        seed=seed,
        with_episodes=False,
    ).runs
