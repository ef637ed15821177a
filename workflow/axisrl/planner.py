"""The power planner: what intervals a study design buys, and at what compute, before it is run.

From a design (the config's one-axis sweeps: grids, centre, seeds per point, held-out episodes per
run) and a noise model (a finished study's ``noise`` frame, or stated values), it simulates the
study many times (``axisrl.laws.simulate``) and analyses each simulated study with the laws stage's
own functions, so a predicted half-width is that of the interval the study will report: per axis,
the log-log slope ``alpha`` and the trend of held-out success; per pair of axes, the slope
difference, with the probability that its interval excludes 0 (the ordering test decides); and
kappa at r = 1 of each axis's representative synthesis method (``predict_kappa``). The
compute a design costs is CPU-seconds for the tiny backend (per-run seconds fitted to a finished
study's measured train jobs) and GPU-hours for cluster studies (``axisrl.cluster_cost``).
``search`` tries coarser grids and other seed counts for the cheapest design that reaches given
half-widths or fits a budget. The truth behind the simulations is the finished study's log-log line per
sweep with the real part of its points' offsets (or a stated power law): its noise and those
offsets set the half-widths.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import polars as pl
from scipy import optimize

from axisrl import adaptive
from axisrl.budget import visits_per_run
from axisrl.laws.axis import axis_ordering, slope_intervals, success_trends
from axisrl.laws.data import AXES, VALIDATION_TIER, clipped_success
from axisrl.laws.noise import noise_frame
from axisrl.laws.simulate import NoiseModel, SweepNoise, run_success, simulate_study
from axisrl.plan import spread

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


def stated_truth(design: SweepDesign) -> Truth:
    """Without a finished study: a power law of slope 0.1 per axis through the default study's
    centre success, on the design's grids."""
    centre_loss = -np.log(STATED_CENTRE_SUCCESS)
    curves = {
        axis: (np.array(values, float), centre_loss * (np.array(values, float) / design.centre[axis]) ** -STATED_ALPHA)
        for axis, values in design.grids.items()
    }
    return Truth(curves, dict(design.centre))


def headline_intervals(runs: pl.DataFrame, tier: str = TIER) -> list[tuple[str, str, float, float]]:
    """(quantity, name, lo, hi) of every headline interval a study's runs give, as the laws stage computes them."""
    rows = []
    for row in slope_intervals(runs, tier=tier).iter_rows(named=True):
        rows.append(("alpha", row["axis"], row["alpha_lo"], row["alpha_hi"]))
    for row in success_trends(runs, tier=tier).iter_rows(named=True):
        rows.append(("trend", row["axis"], row["slope_lo"], row["slope_hi"]))
    for row in axis_ordering(runs, tier=tier).iter_rows(named=True):
        rows.append(("alpha_diff", f"{row['axis_a']} - {row['axis_b']}", row["alpha_diff_lo"], row["alpha_diff_hi"]))
    return rows


def _widths(rows: Sequence[tuple[str, str, float, float]], n_sims: int) -> pl.DataFrame:
    """Per quantity, over simulated studies' intervals: the expected half-width, its Monte Carlo SE,
    the 10 % and 90 % quantiles of one study's, and the share of studies whose interval excludes 0."""
    frame = pl.DataFrame(rows, schema=["quantity", "name", "lo", "hi"], orient="row")
    half = (pl.col("hi") - pl.col("lo")) / 2
    return frame.group_by("quantity", "name", maintain_order=True).agg(
        half_width=half.mean(),
        half_width_se=half.std() / np.sqrt(n_sims),
        half_width_q10=half.quantile(0.1, "linear"),
        half_width_q90=half.quantile(0.9, "linear"),
        p_decides=((pl.col("lo") > 0) | (pl.col("hi") < 0)).mean(),
    )


def predict(
    design: SweepDesign, truth: Truth, noise: NoiseModel | SweepNoise, n_sims: int = 200, seed: int = 0
) -> pl.DataFrame:
    """Per headline quantity (``quantity``, ``name``): the expected 95 % half-width over ``n_sims``
    simulated studies of ``design``, its Monte Carlo SE, the 10 % and 90 % quantiles of a single
    study's half-width (one study's interval varies with its seeds' own spread), and ``p_decides``,
    the share of studies whose interval excludes 0 (for an ordering difference: the test decides)."""
    rows = []
    for study in range(n_sims):
        rows += headline_intervals(_simulate(design, truth, noise, seed + study))
    return _widths(rows, n_sims)


FIRST_WAVE_TIER = "T0"
"""The tier a simulated first wave's noise is read from: in simulated studies T0 is a draw of its
own, independent of T2, as the validation tier V is in a real study (simulations draw no V)."""


class TwoStage(NamedTuple):
    """One simulated two-stage study: both waves' runs, the allocation, and the truth's points."""

    runs: pl.DataFrame
    allocation: adaptive.AllocationResult
    points: pl.DataFrame


def two_stage_study(
    design: SweepDesign,
    truth: Truth | Callable[[pl.DataFrame], np.ndarray],
    noise: NoiseModel | SweepNoise,
    settings: Mapping[str, Any],
    cost: RunCost,
    seed: int,
) -> TwoStage:
    """A study of ``design``'s sweeps under ``study.adaptive`` ``settings``: its first wave
    (``first_seeds`` a point), the allocation ``adaptive.allocate`` makes from that wave's
    ``FIRST_WAVE_TIER`` success at ``cost``, and the second wave it places. Each point's runs are
    drawn up to the cap at once and the waves take the seeds they name: a run does not depend on
    which others are run."""
    loss = truth.loss if isinstance(truth, Truth) else truth
    full = simulate_study(
        loss,
        grids=design.grids,
        centre=design.centre,
        seeds=tuple(range(settings["max_seeds"])),
        n_tasks=3 * design.episodes,
        noise=noise,
        seed=seed,
        with_episodes=False,
    )
    first = full.runs.filter(pl.col("seed") < settings["first_seeds"])
    study = {
        "adaptive": settings,
        "centre": dict(design.centre),
        "seeds": list(range(settings["first_seeds"])),
        "families": {"axis_sweeps": {"extra_seeds": []}},
    }
    allocation = adaptive.allocate(
        first,
        study,
        lambda points: np.array([cost.per_run(d) for d in points["d_traj"]]),
        cost.unit,
        design.episodes,
        tier=FIRST_WAVE_TIER,
    )
    placed = allocation.allocation.select("point_key", seed="seeds").explode("seed").drop_nulls()
    second = full.runs.join(placed, on=["point_key", "seed"], how="semi")
    return TwoStage(pl.concat([first, second]), allocation, full.points)


class AdaptivePrediction(NamedTuple):
    """``predict``'s frame for the two-stage design, with the mean runs and cost a study spends and
    each sweep point's mean extra seeds."""

    predicted: pl.DataFrame
    runs: float
    runs_se: float
    cost: float
    extra: pl.DataFrame


def predict_adaptive(
    design: SweepDesign,
    truth: Truth,
    noise: NoiseModel | SweepNoise,
    settings: Mapping[str, Any],
    cost: RunCost,
    n_sims: int = 200,
    seed: int = 0,
) -> AdaptivePrediction:
    """``predict`` for the two-stage design: ``n_sims`` simulated studies through ``two_stage_study``."""
    rows, runs, spent, extra = [], [], [], []
    for study in range(n_sims):
        simulated = two_stage_study(design, truth, noise, settings, cost, seed + study)
        rows += headline_intervals(simulated.runs)
        runs.append(simulated.runs.height)
        spent.append(float(simulated.allocation.allocation["cost"].sum()))
        extra.append(simulated.allocation.allocation.select(*AXES, "sweeps", "first_seeds", "extra_seeds", "run_cost"))
    points = (
        pl.concat(extra)
        .group_by(*AXES, maintain_order=True)
        .agg(
            pl.col("sweeps").first(),
            pl.col("first_seeds").mean(),
            pl.col("extra_seeds").mean(),
            pl.col("run_cost").mean(),
        )
        .sort(*AXES)
    )
    first_cost = sum(cost.per_run(d) * n for d, n in zip(points["d_traj"], points["first_seeds"], strict=True))
    return AdaptivePrediction(
        _widths(rows, n_sims),
        float(np.mean(runs)),
        float(np.std(runs) / np.sqrt(n_sims)),
        float(first_cost + np.mean(spent)),
        points,
    )


def against_fixed(
    design: SweepDesign,
    truth: Truth,
    noise: NoiseModel | SweepNoise,
    settings: Mapping[str, Any],
    cost: RunCost,
    n_sims: int = 200,
) -> tuple[AdaptivePrediction, pl.DataFrame]:
    """The two-stage design of ``settings`` (``study.adaptive``; budget 0: what the fixed ``design``
    spends beyond the first wave) against the fixed design at the same cost: per quantity the
    adaptive half-width, the fixed design's at as many seeds as that cost buys (interpolated
    linearly between the whole seed counts around it, simulated with the same studies' seeds) and
    their ratio."""
    settings = dict(settings)
    if not settings["budget"]:
        settings["budget"] = cost.of(design) - cost.of(replace(design, seeds=settings["first_seeds"]))
    two_stage = predict_adaptive(design, truth, noise, settings, cost, n_sims)
    seeds = two_stage.cost / cost.of(replace(design, seeds=1))
    below = max(2, int(np.floor(seeds)))
    share = float(np.clip(seeds - below, 0.0, 1.0))
    fixed = [
        predict(replace(design, seeds=n), truth, noise, n_sims).select("quantity", "name", "half_width")
        for n in (below, below + 1)
    ]
    at_cost = (
        fixed[0]
        .join(fixed[1], on=["quantity", "name"], suffix="_above")
        .select(
            "quantity", "name", fixed_half_width=(1 - share) * pl.col("half_width") + share * pl.col("half_width_above")
        )
    )
    compared = two_stage.predicted.select("quantity", "name", "half_width", "half_width_se").join(
        at_cost, on=["quantity", "name"]
    )
    return two_stage, compared.with_columns(
        fixed_seeds=pl.lit(seeds), ratio=pl.col("half_width") / pl.col("fixed_half_width")
    )


KAPPA_SCHEMA = {
    "source": pl.String,
    "axis": pl.String,
    "real_amount": pl.Float64,
    "kappa_true": pl.Float64,
    "half_width": pl.Float64,
    "half_width_q10": pl.Float64,
    "half_width_q90": pl.Float64,
    "p_bounded": pl.Float64,
}
"""Per method: its interval's median half-width over the simulated studies whose interval is
bounded, the 10 % and 90 % quantiles, and ``p_bounded``, the share of studies whose interval has two
finite bounds within the tables' ``KAPPA_SHOWN_MAX``."""


def _kappa_interval(
    axis: str,
    amount: float,
    multiples: np.ndarray,
    losses: np.ndarray,
    seeds: int,
    episodes: int,
    noise: NoiseModel,
    n_boot: int,
    seed: int,
) -> tuple[float, float] | None:
    """One simulated pricing study's kappa interval at ``r = 1`` (None: not bounded): the real-only
    runs at ``multiples`` of ``amount`` and the mixture, at true losses ``losses`` (the mixture's
    last), ``seeds`` each, priced by ``pricing.estimate.kappa_at``."""
    from axisrl.pricing.estimate import kappa_at
    from axisrl.pricing.tables import KAPPA_SHOWN_MAX

    rng = np.random.default_rng(seed)
    law_loss = np.repeat(losses, seeds)
    point_factor = np.exp(noise.seed_sd_spread * rng.standard_normal(len(losses)))
    shocks = rng.standard_normal(len(law_loss))
    run_sd = np.repeat(noise.seed_sd * point_factor, seeds)
    p_run = run_success(law_loss, run_sd, shocks, noise.no_take_off, noise.untrained_success, rng)
    runs = pl.DataFrame(
        {
            axis: np.repeat(np.append(amount * multiples, amount), seeds),
            "successes": rng.binomial(episodes, p_run),
            "trials": episodes,
            "seed": np.tile(range(seeds), len(losses)),
        }
    )
    n_real = len(multiples) * seeds
    mixed = runs[n_real:].with_columns(ratio=pl.lit(1.0))
    row = kappa_at(runs[:n_real], mixed, axis, amount, 1.0, n_boot, seed).row(0, named=True)
    bounds = (row["kappa_lo"], row["kappa_hi"])
    if row["status"] != "ok" or not all(v is not None and np.isfinite(v) and abs(v) <= KAPPA_SHOWN_MAX for v in bounds):
        return None
    return bounds


def predict_kappa(
    study: Mapping[str, Any],
    truth: Truth,
    noise: NoiseModel | SweepNoise,
    episodes: int,
    *,
    kappa: float = 1.0,
    n_sims: int = 50,
    n_boot: int = 200,
    seed: int = 0,
) -> pl.DataFrame:
    """Kappa at ``r = 1`` of each axis's representative method (``pricing.tables.REPRESENTATIVES``)
    at the mixtures family's first real amount, by simulating its real-only runs (1x and the
    ``real_multiples``) and its ``r = 1`` mixture under ``noise`` and pricing each simulated study as
    the pricing stage does (``n_boot`` resamples), with the centre's noise (its designs are off the
    sweeps). The truth: the sweeps' product law at the real designs, and a mixture worth ``kappa``
    real units per synthetic one."""
    from axisrl.plan import pricing_points
    from axisrl.pricing.tables import REPRESENTATIVES

    wanted = set(REPRESENTATIVES.values())
    points = [p for p in pricing_points(study) if p.source in wanted and p.role == "real"]
    rows = []
    for (source, axis), group in itertools.groupby(points, key=lambda p: (p.source, p.axis)):
        of_source = list(group)
        amount = min(p.real_amount for p in of_source)
        real = [p for p in of_source if p.real_amount == amount]
        multiples = np.array([p.multiple for p in real], dtype=float)
        losses = np.array([truth.product_loss(p.design.as_dict()) for p in real])
        exponent = float(-np.polyfit(np.log(multiples), np.log(losses), 1)[0])
        with_mixture = np.append(losses, losses[multiples == 1][0] * (1 + kappa) ** -exponent)
        intervals = [
            _kappa_interval(
                axis, amount, multiples, with_mixture, len(study["seeds"]), episodes, noise.of(None), n_boot, s
            )
            for s in range(seed, seed + n_sims)
        ]
        widths = np.array([(hi - lo) / 2 for lo, hi in filter(None, intervals)] or [np.nan])
        rows.append(
            {
                "source": source,
                "axis": axis,
                "real_amount": float(amount),
                "kappa_true": kappa,
                "half_width": float(np.median(widths)),
                "half_width_q10": float(np.quantile(widths, 0.1)),
                "half_width_q90": float(np.quantile(widths, 0.9)),
                "p_bounded": float(np.mean([i is not None for i in intervals])),
            }
        )
    return pl.DataFrame(rows, schema=KAPPA_SCHEMA)


@dataclass(frozen=True)
class RunCost:
    """What one run of a design costs: ``unit`` (cpu_seconds or gpu_hours) per run, from
    ``base + per_rollout * rollouts`` (tiny) or the GPU cost model at its ``d_traj`` (cluster).
    ``base`` holds the evaluation of ``episodes`` T2 episodes a run; a design with another T2 pool
    pays ``per_episode`` for each episode more or less (0: not measured, so the pool is not searched).
    ``source`` says what priced it, for the reader of a cost: measured jobs, or a model."""

    unit: str
    base: float = 0.0
    per_rollout: float = 0.0
    visits: float = 0.0
    config: Mapping[str, Any] | None = None
    per_episode: float = 0.0
    episodes: int = 0
    source: str = ""

    def of(self, design: SweepDesign) -> float:
        """The design's total: every distinct sweep point times its seeds."""
        points = [design.centre | {axis: x} for axis, values in design.grids.items() for x in values]
        distinct = {tuple(sorted(p.items())) for p in points}
        pool = self.per_episode * (design.episodes - self.episodes)
        return design.seeds * sum(self.per_run(dict(p)["d_traj"]) + pool for p in distinct)

    def per_run(self, d_traj: int) -> float:
        """One run at ``d_traj`` with the measured T2 pool."""
        if self.unit == "gpu_hours":
            from axisrl.cluster_cost import run_gpu_hours

            return run_gpu_hours(self.config, d_traj)
        return self.base + self.per_rollout * self.visits * d_traj


POOL_FACTORS = (0.5, 1.0, 2.0)
"""T2 pools ``search`` tries, as multiples of the design's, where the evaluation's cost is measured."""


STATED_RUN_SECONDS = (4.35, 0.00084)
"""CPU-seconds of a tiny run, base and per rollout, fitted to the default study's train jobs (AMD
EPYC, 2 vCPUs: bench/README, an adaptive second wave): the price where a study has no measured jobs."""


def train_keys(config: Mapping[str, Any], schema: Mapping[str, Any]) -> frozenset[str]:
    """The train stage's keys of every run the study ``config`` plans (each domain's in a study
    across domains), from the registry Snakemake keys its jobs by: a measured train job is this
    study's when its key is one. A study Snakemake refuses (a design the pool or the budget cannot
    honour) raises the same ConfigError here."""
    from axisrl.config import domain_configs, validate_config
    from axisrl.stages import study

    configs = [validate_config(c, schema) for c in domain_configs(config, schema).values()] or [config]
    return frozenset(point.train.key for c in configs for point in study(c, schema).points.values())


def measured_jobs(results: Path, keys: Collection[str] | None = None) -> list[str]:
    """The train keys under ``results`` with a benchmark and a runs table (``keys``: of these only)."""
    benchmarks = sorted((results / "benchmarks" / "train").glob("*.tsv"))
    return [
        bench.stem
        for bench in benchmarks
        if (keys is None or bench.stem in keys) and (results / "train" / bench.stem / "runs.parquet").exists()
    ]


def measured_cpu_cost(results: Path, visits: float, keys: Collection[str] | None = None) -> RunCost:
    """CPU-seconds per tiny-backend run, ``base + per_rollout * rollouts``, fitted by least squares to
    a finished study's train jobs (``results/benchmarks/train/<key>.tsv`` wall seconds against the
    rollouts of the runs in ``results/train/<key>/runs.parquet``; ``keys``: only these jobs). One
    process per core: a job's wall seconds are its CPU-seconds. A held-out episode costs what its
    runs measured (``heldout_seconds_per_episode``, median; 0 for a study from before it) and
    ``base`` holds the evaluation of their T2 pool (``episodes``, read off the jobs' episodes)."""
    jobs, per_episode, t2 = [], [], []
    for key in measured_jobs(results, keys):
        runs = results / "train" / key / "runs.parquet"
        frame = pl.read_parquet(runs)
        seconds = float(pl.read_csv(results / "benchmarks" / "train" / f"{key}.tsv", separator="\t")["s"][0])
        jobs.append((seconds, frame.height, float(frame["episodes"].sum())))
        episodes = runs.with_name("episodes.parquet")
        if "heldout_seconds_per_episode" in frame.columns and episodes.exists():
            per_episode += frame["heldout_seconds_per_episode"].to_list()
            n_t2 = pl.scan_parquet(episodes).filter(pl.col("tier") == TIER).select(pl.len()).collect().item()
            t2.append(n_t2 / frame.height)
    if len(jobs) < 2:
        raise ValueError(f"{results}: fewer than 2 measured train jobs to fit CPU-seconds per run from")
    seconds, n_runs, rollouts = (np.array(column) for column in zip(*jobs, strict=True))
    (base, per_rollout), *_ = np.linalg.lstsq(np.column_stack((n_runs, rollouts)), seconds, rcond=None)
    source = (
        f"CPU-seconds fitted to {len(jobs)} measured train jobs{'' if keys is None else ' of this study'} in {results}"
    )
    if not per_episode:
        return RunCost("cpu_seconds", float(base), float(per_rollout), visits, source=source)
    return RunCost(
        "cpu_seconds",
        float(base),
        float(per_rollout),
        visits,
        per_episode=float(np.median(per_episode)),
        episodes=round(float(np.median(t2))),
        source=source,
    )


def cpu_cost(results: Path | None, visits: float, keys: Collection[str] | None) -> RunCost:
    """A tiny study's CPU-seconds: fitted to its own measured train jobs in ``results`` (``keys``, its
    train keys; None: every job there) where there are 2 or more, else ``STATED_RUN_SECONDS``:
    another study's jobs price other designs, and fitted to them a run's cost came out negative."""
    if results is not None and len(measured_jobs(results, keys)) >= 2:
        return measured_cpu_cost(results, visits, keys)
    if results is None or not results.is_dir():
        why = "no results folder to read measured train jobs from"
    else:
        found, ours = len(measured_jobs(results)), len(measured_jobs(results, keys))
        why = f"{results} holds {found} measured train jobs, {ours} of this study (by train key)"
    base, per_rollout = STATED_RUN_SECONDS
    return RunCost(
        "cpu_seconds",
        base,
        per_rollout,
        visits,
        source=f"the stated cost model ({base:g} s a run + {per_rollout:g} s a rollout, the default study's): {why}",
    )


def check_positive(cost: RunCost, design: SweepDesign) -> None:
    """Refuse a cost model that prices a run of the design at 0 or less (a fit to too few or too
    alike jobs can): no such cost is a price."""
    for d_traj in sorted({*design.grids["d_traj"], design.centre["d_traj"]}):
        if not cost.per_run(d_traj) > 0:
            raise ValueError(
                f"{cost.source} prices a run at d_traj={d_traj} at {cost.per_run(d_traj):.3g} "
                f"{cost.unit.replace('_', '-')}: a cost must be positive (too few or too alike jobs to fit)"
            )


def candidates(design: SweepDesign, seeds: Sequence[int], pools: Sequence[float] = (1.0,)) -> list[SweepDesign]:
    """The design with every other seed count and every coarser grid over the same range
    (``plan.spread``, the centre kept), down to the 3 points a slope's interval needs, at each T2
    pool in ``pools`` (multiples of the design's episodes per run)."""
    longest = max(len(values) for values in design.grids.values())
    designs: dict[tuple, SweepDesign] = {}
    for n_seeds, n_points, pool in itertools.product(seeds, range(3, longest + 1), pools):
        grids = {
            axis: tuple(sorted({*spread(values, n_points), design.centre[axis]}))
            for axis, values in design.grids.items()
        }
        episodes = max(1, round(design.episodes * pool))
        designs.setdefault(
            (n_seeds, episodes, *grids.values()), replace(design, grids=grids, seeds=n_seeds, episodes=episodes)
        )
    return list(designs.values())


def search(
    design: SweepDesign,
    truth: Truth,
    noise: NoiseModel | SweepNoise,
    cost: RunCost,
    seeds: Sequence[int] = (2, 3, 4, 6, 8),
    n_sims: int = 30,
) -> pl.DataFrame:
    """Every candidate design (``candidates``, and each at the T2 pools of ``POOL_FACTORS`` where
    ``cost`` prices a held-out episode): its cost and the largest expected half-width of each kind
    of quantity, cheapest first."""
    rows = []
    for candidate in candidates(design, seeds, POOL_FACTORS if cost.per_episode > 0 else (1.0,)):
        widths = predict(candidate, truth, noise, n_sims).group_by("quantity").agg(pl.col("half_width").max())
        widest = dict(widths.iter_rows())
        rows.append(
            {
                "design": candidate.label(),
                "seeds": candidate.seeds,
                "episodes": candidate.episodes,
                "runs": candidate.runs,
                "cost": cost.of(candidate),
                **{f"max_half_width_{q}": widest.get(q) for q in QUANTITIES},
            }
        )
    return pl.DataFrame(rows).sort("cost")


class Plan(NamedTuple):
    """The planner's answer for one study config: its design, the noise it assumed, the predicted
    half-widths, the design's cost, and (with targets or a budget) the searched designs."""

    design: SweepDesign
    noise: NoiseModel | SweepNoise
    truth: Truth
    predicted: pl.DataFrame
    kappa: pl.DataFrame | None
    cost: RunCost
    searched: pl.DataFrame | None


POWER_SCHEMA = {
    "quantity": pl.String,
    "name": pl.String,
    "half_width": pl.Float64,
    "half_width_se": pl.Float64,
    "half_width_q10": pl.Float64,
    "half_width_q90": pl.Float64,
    "p_decides": pl.Float64,
    "p_bounded": pl.Float64,
    "status": pl.String,
    "reason": pl.String,
}


def power_table(
    noise: pl.DataFrame, study: Mapping[str, Any], take_off: float, n_sims: int = 200, kappa_sims: int = 50
) -> pl.DataFrame:
    """The ``power`` target: what this study's design buys, predicted from its own noise frame (a
    second study of it, with other seeds, should measure these half-widths); a study whose sweeps
    are too short for the planner gets one row saying why."""
    try:
        truth, model, episodes = from_noise_frame(noise, study["centre"], take_off)
    except ValueError as exc:
        return pl.DataFrame({"status": ["not_run"], "reason": [str(exc)]})
    headline = noise.filter(pl.col("tier") == TIER)
    if not headline.is_empty():
        episodes = episodes_per_run(headline)  # the design's own T2 pool, the noise read off V
    predicted = predict(design_of({"study": study}, episodes), truth, model, n_sims)
    frames = [pl.DataFrame(schema=POWER_SCHEMA), predicted]  # every column; p_bounded is kappa's alone
    if study["families"]["mixtures"]["enabled"]:
        frames.append(kappa_rows(predict_kappa(study, truth, model, episodes, n_sims=kappa_sims)))
    return (
        pl.concat(frames, how="diagonal_relaxed")
        .with_columns(status=pl.lit("ok"), reason=pl.lit(None, dtype=pl.String))
        .select(list(POWER_SCHEMA))
        .cast(POWER_SCHEMA)
    )


def kappa_rows(kappa: pl.DataFrame) -> pl.DataFrame:
    """``predict_kappa``'s frame as rows of the planner's table (quantity ``kappa_r1``)."""
    return kappa.select(
        quantity=pl.lit("kappa_r1"),
        name=pl.format("{} ({})", "source", "axis"),
        half_width="half_width",
        half_width_q10="half_width_q10",
        half_width_q90="half_width_q90",
        p_bounded="p_bounded",
    )


def plan(
    config: Mapping[str, Any],
    noise: pl.DataFrame | None = None,
    results: Path | None = None,
    *,
    search_designs: bool = False,
    n_sims: int = 200,
    keys: Collection[str] | None = None,
) -> Plan:
    """The planner on a study config: the config's design, the noise of ``noise`` (a ``noise``
    frame) or stated values, CPU-seconds (tiny backend: ``cpu_cost``, from ``results``' train jobs
    of the study, whose train keys are ``keys``; None: every job there) or GPU-hours (verl), and
    with ``search_designs`` every candidate design."""
    design = design_of(config)
    if noise is not None:
        truth, model, _ = from_noise_frame(noise, config["study"]["centre"], config["laws"]["take_off"])
    else:
        truth, model = stated_truth(design), STATED_NOISE
    if config["train"]["backend"] == "tiny":
        cost = cpu_cost(results, visits_per_run(config["train"]), keys)
    else:
        cost = RunCost("gpu_hours", config=config, source="the GPU cost model (axisrl.cluster_cost, an estimate)")
    check_positive(cost, design)
    predicted = predict(design, truth, model, n_sims)
    mixtures = config["study"]["families"]["mixtures"]["enabled"]
    kappa = predict_kappa(config["study"], truth, model, design.episodes) if mixtures else None
    searched = search(design, truth, model, cost) if search_designs else None
    return Plan(design, model, truth, predicted, kappa, cost, searched)
