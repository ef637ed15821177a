"""The seed spread of the axis sweeps, in view: per sweep point and held-out tier, how far the seeds'
success rates scatter against what binomial noise alone would give.

The default study's between-seed spread is its largest noise source (runs are bimodal: a seed
takes off or it does not), larger than the binomial noise of its held-out episodes. The fits carry
it as a pooled ``tau^2`` (``axisrl.laws.data.point_statistics``); this module reports it per point,
so the ``noise`` frame and Figure ``fig_noise`` show where and how much.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from axisrl.laws.data import AXES, axis_sweep, check_one_setting, infer_centre, usable_runs

NOISE_SCHEMA = {
    "axis": pl.String,
    "x": pl.Float64,
    "tier": pl.String,
    "n_seeds": pl.Int64,
    "successes": pl.Int64,
    "trials": pl.Int64,
    "p": pl.Float64,
    "between_seed_var": pl.Float64,
    "binomial_var": pl.Float64,
    "take_off_share": pl.Float64,
    "design_effect": pl.Float64,
}
"""The columns of the ``noise`` frame."""

SEED_SCHEMA = {
    "axis": pl.String,
    "x": pl.Float64,
    "tier": pl.String,
    "seed": pl.Int64,
    "successes": pl.Int64,
    "trials": pl.Int64,
    "p": pl.Float64,
}
"""The columns of ``sweep_seeds``: one row per usable run of an axis sweep."""


def _tier_counts(runs: pl.DataFrame, tier: str) -> pl.DataFrame:
    """The runs with ``tier``'s counts: ``p_<tier>``/``n_<tier>`` where the runs have them (a
    ``successes``/``trials`` pair of another tier is dropped first), else their own counts."""
    if {f"p_{tier}", f"n_{tier}"} <= set(runs.columns):
        return runs.drop("successes", "trials", strict=False)
    return runs


def sweep_seeds(runs: pl.DataFrame, tiers: Sequence[str], axes: Sequence[str] = AXES) -> pl.DataFrame:
    """Every usable run of every axis sweep, per tier: (axis, x, tier, seed, successes, trials, p).

    The sweep runs are selected as the per-axis fits select them (``axisrl.laws.study._sweep_points``):
    usable runs only (``usable_runs``: failed runs are no measurement), the centre inferred from
    them (``infer_centre``), each axis's runs with the other axes at the centre (``axis_sweep``),
    and one setting per sweep (``check_one_setting``). The centre design is in every axis's sweep;
    an axis whose sweep holds one value is left out.
    """
    frames = []
    for tier in tiers:
        ok, _ = usable_runs(_tier_counts(runs, tier), tier)
        if not ok.height:
            continue
        centre = infer_centre(ok, axes)
        for axis in axes:
            sweep = axis_sweep(ok, axis, centre)
            if sweep[axis].n_unique() < 2:  # an axis the runs do not vary is no sweep
                continue
            check_one_setting(sweep, free=[axis])
            frames.append(
                sweep.select(
                    pl.lit(axis).alias("axis"),
                    pl.col(axis).cast(pl.Float64).alias("x"),
                    pl.lit(tier).alias("tier"),
                    pl.col("seed").cast(pl.Int64),
                    "successes",
                    "trials",
                    p=pl.col("successes") / pl.col("trials"),
                )
            )
    if not frames:
        return pl.DataFrame(schema=SEED_SCHEMA)
    return pl.concat(frames).cast(SEED_SCHEMA).sort("tier", "axis", "x", "seed")


def noise_frame(runs: pl.DataFrame, tiers: Sequence[str], take_off: float) -> pl.DataFrame:
    """Per axis-sweep point (``axis``, ``x``) and tier: the seeds' spread against binomial noise.

    With seed ``i`` of a point scoring ``k_i`` of ``n_i`` held-out episodes, ``p_i = k_i / n_i``:

    * ``n_seeds``: the point's usable runs; ``successes``, ``trials``: ``sum k_i``, ``sum n_i``;
    * ``p``: pooled success ``sum k_i / sum n_i``;
    * ``between_seed_var``: the sample variance of the ``p_i`` (ddof 1); null with one seed;
    * ``binomial_var``: ``p (1 - p) mean_i 1 / n_i``, the variance a seed's rate would have if every
      seed had the pooled success ``p`` and differed only by its episodes (so a seed at 0 or 1
      success still counts the noise the binomial model expects of it);
    * ``take_off_share``: the share of seeds with ``p_i > take_off``;
    * ``design_effect``: ``between_seed_var / binomial_var``, the variance of the seeds' mean
      success under seed clustering (``between_seed_var / n_seeds``) over the variance binomial
      noise alone gives it (``binomial_var / n_seeds``): 1 when seeds differ only by their
      episodes' binomial noise, above 1 by as much as the seed spread adds. Null where
      ``between_seed_var`` is null or ``binomial_var`` is 0 (a pooled success of 0 or 1).

    ``runs``: the axis-sweep runs (``p_<tier>``/``n_<tier>`` per tier, or ``successes``/``trials``),
    selected as ``sweep_seeds`` says.
    """
    seeds = sweep_seeds(runs, tiers)
    if not seeds.height:
        return pl.DataFrame(schema=NOISE_SCHEMA)
    p_i = pl.col("p")
    frame = seeds.group_by("axis", "x", "tier").agg(
        n_seeds=pl.len().cast(pl.Int64),
        successes=pl.col("successes").sum(),
        trials=pl.col("trials").sum(),
        between_seed_var=p_i.var(ddof=1),
        mean_inverse_trials=(1 / pl.col("trials")).mean(),
        take_off_share=(p_i > take_off).mean(),
    )
    frame = (
        frame.with_columns(
            p=pl.col("successes") / pl.col("trials"),
            between_seed_var=pl.when(pl.col("n_seeds") > 1).then(pl.col("between_seed_var")),
        )
        .with_columns(
            binomial_var=pl.col("p") * (1 - pl.col("p")) * pl.col("mean_inverse_trials"),
        )
        .with_columns(
            design_effect=pl.when(pl.col("binomial_var") > 0).then(pl.col("between_seed_var") / pl.col("binomial_var")),
        )
    )
    order = {axis: i for i, axis in enumerate(AXES)}
    return (
        frame.select(*NOISE_SCHEMA)
        .cast(NOISE_SCHEMA)
        .sort(pl.col("tier"), pl.col("axis").replace_strict(order, default=len(order)), pl.col("axis"), pl.col("x"))
    )
