"""The study plan: experiment families from config, expanded to runs and merged.

A *design* is everything that determines what a training run does except its seed; a *run* is a
design plus a seed. Families only decide which designs exist: two families that ask for the same
design (the centre point of the three axis sweeps, say) share one run, which lists both families.
The plan is pure config -> rows, cheap enough to compute at Snakemake parse time.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from axisrl.budget import BUDGET_KEYS, DEFAULT_CONVENTION, budget_problems, training_budget
from axisrl.config import ConfigError, canonical_json
from axisrl.synthesis import CORE_SUFFIX, method_of, synthetic_amounts

AXES = ("d_env", "d_task", "d_traj")
HELD_FACTORS = {"quarter": 0.25, "half": 0.5, "double": 2.0}
VARIED_FIELD_FAMILIES = (
    ("budget_conventions", "budget", "conventions"),
    ("model_sizes", "width", "widths"),
    ("algorithms", "algo", "algos"),
    ("reward_density", "reward_density", "densities"),
    ("base_strength", "base", "bases"),
)
"""Families that set one design field to each listed value and sweep the named axes: (family, field, list key)."""

LATER_FIELDS = ("base",)
"""Design fields a key hashes only when set (``Design.keyed``)."""


@dataclass(frozen=True)
class Design:
    """One grid point. ``env_level`` says how distinct environments are counted (dedup level, or the
    placebo that scales procedural content under one signature); ``worlds`` fixes the number of L2
    worlds the ``d_env`` environments come from (None: as many as the pool order gives)."""

    d_env: int
    d_task: int
    d_traj: int
    width: int
    algo: str
    reward_density: str
    env_level: str = "s1"
    worlds: int | None = None
    budget: str = DEFAULT_CONVENTION
    """The training-budget convention (``axisrl.budget``)."""
    source: str = "real"
    """``"real"``, or the synthetic method mixed in (``axisrl.synthesis``), at ``ratio`` synthetic
    units per real unit on the method's axis."""
    ratio: float = 0.0
    flop_budget: float | None = None
    """The executed FLOPs a ``charged_flops`` design is charged (the recipe's strategy runs); None otherwise."""
    base: str | None = None
    """What the runs start from: None, the study's ``train.init``; ``random``; ``base`` (the study's
    base) or ``strong`` (the strong base) of the pretrain stage (the ``base_strength`` family)."""

    def as_dict(self) -> dict[str, Any]:
        """The fields by name: ``dataclasses.asdict`` without its recursive deep copy (every field
        is a scalar), which a 5,000-run plan calls tens of thousands of times while Snakemake parses."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    def keyed(self) -> dict[str, Any]:
        """The fields a key hashes: ``as_dict`` without the fields added after the first study
        (``LATER_FIELDS``) where they are unset, so that every key made before them stands."""
        return {name: value for name, value in self.as_dict().items() if not (name in LATER_FIELDS and value is None)}

    def start(self, train_init: str) -> str:
        """What its runs start from: ``random``, ``base`` or ``strong`` (``train_init`` when unset)."""
        return self.base or train_init

    @functools.cached_property
    def point_key(self) -> str:
        return hashlib.sha256(canonical_json(self.keyed()).encode()).hexdigest()[:12]

    def synthetic_amounts(self) -> dict[str, float]:
        """Synthetic units added per axis (``axisrl.synthesis.synthetic_amounts``)."""
        return synthetic_amounts(self.as_dict())


def _scaled(value: int, factor: float) -> int:
    return max(1, round(value * factor))


def spread(values: Sequence[Any], points: int | None) -> list[Any]:
    """``points`` of ``values`` (all if None), evenly spread by rank with both ends kept: a coarser
    sweep over the same range."""
    ordered = sorted(values)
    if points is None or points >= len(ordered):
        return ordered
    return [ordered[i] for i in sorted({round(j * (len(ordered) - 1) / (points - 1)) for j in range(points)})]


def _sweeps(centre: Design, grids: Mapping[str, list[int]], axes: list[str]) -> Iterator[tuple[str, Design]]:
    """One-axis sweeps: (axis, design) for each named axis over its grid, the other two held at the centre."""
    for axis in axes:
        for value in grids[axis]:
            yield axis, replace(centre, **{axis: value})


@dataclass(frozen=True)
class PricingPoint:
    """A grid point of one method's pricing: a mixture at ``ratio`` (``role="mixture"``) or a
    real-only run at ``multiple`` times the real amount (``role="real"``; its 1x run is the mixture
    curve's r = 0 point)."""

    source: str
    axis: str
    real_amount: int
    role: str
    ratio: float
    multiple: int
    design: Design


def _multiplied(design: Design, axis: str, multiple: float) -> Design:
    """``design`` with ``multiple`` times the real amount on ``axis`` (environment counts carry
    their tasks: tasks per environment held)."""
    scaled = {axis: _scaled(getattr(design, axis), multiple)}
    if axis == "d_env":
        scaled["d_task"] = _scaled(design.d_task, multiple)
    return replace(design, **scaled)


def pricing_points(study: Mapping[str, Any]) -> Iterator[PricingPoint]:
    """Every grid point of the ``mixtures`` family: per method and real amount, the mixtures at each
    ratio and the real-only runs at 1x, 2x, 4x the real amount (so kappa at r = 1 is interpolated)."""
    mixtures = study["families"]["mixtures"]
    if not mixtures["enabled"]:
        return
    centre = Design(**study["centre"], width=study["width"], algo=study["algo"], reward_density=study["reward_density"])
    second = mixtures["second_amount"]
    sources = [*mixtures["methods"], *(f"{m}{CORE_SUFFIX}" for m in mixtures["methods"] if mixtures["common_core"])]
    for source in sources:
        axis = method_of(source).axis
        base = replace(centre, **mixtures["bases"][axis])
        amounts = [1] + ([second["factor"]] if source.removesuffix(CORE_SUFFIX) in second["methods"] else [])
        for factor in amounts:
            real = _multiplied(base, axis, factor)
            amount = getattr(real, axis)
            for multiple in (1, *mixtures["real_multiples"]):
                yield PricingPoint(source, axis, amount, "real", 0.0, multiple, _multiplied(real, axis, multiple))
            for ratio in mixtures["ratios"] if factor == 1 else spread(mixtures["ratios"], second["ratio_points"]):
                yield PricingPoint(
                    source, axis, amount, "mixture", float(ratio), 1, replace(real, source=source, ratio=float(ratio))
                )


def family_designs(study: Mapping[str, Any]) -> Iterator[tuple[str, str | None, Design]]:
    """(family, swept axis or None, design) for every enabled family of the ``study`` config section."""
    families = study["families"]
    centre = Design(**study["centre"], width=study["width"], algo=study["algo"], reward_density=study["reward_density"])
    grids = study["grids"]
    repeated = {axis: spread(grids[axis], study["family_points"]) for axis in AXES}  # sweeps under another setting

    if families["axis_sweeps"]["enabled"]:
        swept = families["axis_sweeps"].get("axes", AXES)  # a config validated before the key existed has none
        for axis, design in _sweeps(centre, grids, [axis for axis in AXES if axis in swept]):
            yield "axis_sweeps", axis, design
    if families["calibration"]["enabled"]:
        for axis, design in _sweeps(centre, families["calibration"]["grids"], list(AXES)):
            yield "calibration", axis, design
    if families["held_axis"]["enabled"]:
        for name in families["held_axis"]["factors"]:
            factor = HELD_FACTORS[name]
            held = replace(centre, **{axis: _scaled(getattr(centre, axis), factor) for axis in AXES})
            for axis, design in _sweeps(held, repeated, families["held_axis"]["axes"]):
                if design.d_env <= design.d_task:  # a d_env sweep stops at the held d_task
                    yield f"held_axis_{name}", axis, design
    if families["interaction"]["enabled"]:
        for d_env in families["interaction"]["d_env"]:
            for d_task in families["interaction"]["d_task"]:
                yield "interaction", None, replace(centre, d_env=d_env, d_task=d_task)
    if families["worlds_variants"]["enabled"]:
        for d_env in families["worlds_variants"]["d_env"]:
            for worlds in families["worlds_variants"]["worlds"]:
                if d_env % worlds == 0:
                    yield "worlds_variants", None, replace(centre, d_env=d_env, worlds=worlds)
    if families["pool_construction"]["enabled"]:
        for level in families["pool_construction"]["levels"]:
            for axis, design in _sweeps(replace(centre, env_level=level), repeated, ["d_env"]):
                yield f"pool_{level}", axis, design
    for family, field, values in VARIED_FIELD_FAMILIES:
        config = families[family]
        if config["enabled"]:
            for value in config[values]:
                for axis, design in _sweeps(replace(centre, **{field: value}), repeated, config["axes"]):
                    yield (f"budget_{value}" if family == "budget_conventions" else family), axis, design
    for point in pricing_points(study):
        yield "mixtures", None, point.design


@dataclass
class PlannedDesign:
    """A distinct design with the families that asked for it and the sweeps it lies on, each
    ``"<family>:<axis>"`` (the sweep centre lies on all three axis sweeps)."""

    design: Design
    families: list[str]
    sweeps: list[str]


def plan_designs(study: Mapping[str, Any]) -> dict[str, PlannedDesign]:
    """Distinct designs by point key, in first-seen order."""
    merged: dict[str, PlannedDesign] = {}
    for family, axis, design in family_designs(study):
        planned = merged.setdefault(design.point_key, PlannedDesign(design, [], []))
        if family not in planned.families:
            planned.families.append(family)
        if axis is not None and f"{family}:{axis}" not in planned.sweeps:
            planned.sweeps.append(f"{family}:{axis}")
    return merged


def run_key(point_key: str, seed: int) -> str:
    return hashlib.sha256(f"{point_key}:{seed}".encode()).hexdigest()[:12]


def seed_sequence(study: Mapping[str, Any], length: int) -> list[int]:
    """The first ``length`` seeds of the axis sweeps' sequence: ``study.seeds``, its ``extra_seeds``,
    then on from the largest of them. An adaptive study's first wave is its head
    (``study.adaptive.first_seeds``); the second wave continues it at each point."""
    listed = [*study["seeds"], *study["families"]["axis_sweeps"]["extra_seeds"]]
    start = max(listed, default=-1) + 1
    return (listed + list(range(start, start + max(0, length - len(listed)))))[:length]


def seed_batches(study: Mapping[str, Any], planned: PlannedDesign) -> list[tuple[int, ...]]:
    """The seeds a design is trained with, one batch per train job: ``study.seeds`` for every
    design, and the axis sweeps' ``extra_seeds`` in a second job, so the first job stays the one
    that other families and the recipe share. In an adaptive study the axis sweeps' second job
    holds the rest of its first wave (the second wave is the allocation's)."""
    batches = [tuple(study["seeds"])]
    extra = study["families"]["axis_sweeps"]["extra_seeds"]
    adaptive = study.get("adaptive", {})
    if adaptive.get("enabled"):
        extra = seed_sequence(study, adaptive["first_seeds"])[len(study["seeds"]) :]
    if extra and "axis_sweeps" in planned.families:
        batches.append(tuple(extra))
    return batches


def plan_rows(designs: Mapping[str, PlannedDesign], study: Mapping[str, Any], domain: str) -> list[dict[str, Any]]:
    """One row per run (design x seed): the ``runs.parquet`` of the plan stage."""
    rows = []
    for point_key, planned in designs.items():
        for seed in itertools.chain.from_iterable(seed_batches(study, planned)):
            rows.append(
                {
                    "run_key": run_key(point_key, seed),
                    "point_key": point_key,
                    "families": planned.families,
                    "sweeps": planned.sweeps,
                    "domain": domain,
                    **planned.design.as_dict(),
                    **planned.design.synthetic_amounts(),
                    "seed": seed,
                }
            )
    return rows


def check_designs(designs: Mapping[str, PlannedDesign], train: Mapping[str, Any]) -> None:
    """Designs the data or the budget cannot honour: fewer tasks than environments leaves
    environments unused; a design that cannot execute its training budget (``budget_problems``)."""
    problems = [
        f"d_env={p.design.d_env} d_task={p.design.d_task} ({', '.join(p.families)})"
        for p in designs.values()
        if p.design.d_task < p.design.d_env
    ]
    problems += [
        f"{p.design.budget} design d_env={p.design.d_env} d_task={p.design.d_task} d_traj={p.design.d_traj}: "
        f"{problem} ({', '.join(p.families)})"
        for p in designs.values()
        for problem in budget_problems(p.design.as_dict(), train)
    ]
    problems += [
        f"d_env={p.design.d_env} is not a multiple of worlds={p.design.worlds} ({', '.join(p.families)})"
        for p in designs.values()
        if p.design.worlds and p.design.d_env % p.design.worlds
    ]
    problems += [
        f"{p.design.source} at ratio {p.design.ratio:g} adds {column}={amount:g} (not a whole number >= 1: "
        "choose ratios and real amounts whose product is one)"
        for p in designs.values()
        if p.design.source != "real"
        for column, amount in p.design.synthetic_amounts().items()
        if amount and (amount < 1 or amount != int(amount))
    ]
    if problems:
        raise ConfigError("study: designs the pool or the budget cannot honour:\n  " + "\n  ".join(problems))


ALGO_ONLY = {
    "grpo": ("norm_adv_by_std_in_grpo", "grpo_minibatches", "kl_coef", "loss_agg_mode"),
    "ppo": ("gamma", "lam", "ppo_epochs", "ppo_minibatches", "vf_coef", "ent_coef"),
}
"""Train options that only one algorithm reads."""


SWITCHED = ("dynamic_sampling", "kl_bound")
"""Train blocks switched on by ``enabled`` (x-hashed-when-enabled: absent from a hashed config while off)."""


def switched_settings(train: Mapping[str, Any]) -> dict[str, Any]:
    """The switched blocks that are on, as the tiny backend's flat settings (absent while off, so
    a design's settings and key are those from before the blocks existed)."""
    out: dict[str, Any] = {}
    sampling = train.get("dynamic_sampling", {})
    if sampling.get("enabled"):
        out.update(dynamic_sampling=True, max_draws=sampling["max_draws"])
    bound = train.get("kl_bound", {})
    if bound.get("enabled"):
        out.update(kl_bound=bound["rule"], target_kl=bound["target_kl"])
    return out


def backend_settings(train: Mapping[str, Any], design: Mapping[str, Any]) -> dict[str, Any]:
    """What one design's runs are trained with: the study-wide ``train`` section resolved for the
    design (its training budget, its algorithm's options, its axes). The train key hashes exactly
    this, so an option a design does not read (a cap of another convention, the other algorithm's
    options) never retrains it."""
    unread = {"backend", "llm", "init", *BUDGET_KEYS, *SWITCHED}  # init: the train stage's base, keyed by its upstream
    unread.update(option for algo, options in ALGO_ONLY.items() if algo != design["algo"] for option in options)
    return {
        **{k: v for k, v in train.items() if k not in unread},
        **switched_settings(train),
        **training_budget(design, train).trainer_settings(),
        "algo": design["algo"],
        "width": design["width"],
        "reward_density": design["reward_density"],
    }
