"""Which environments and tasks a grid point trains on: nested prefixes of one fixed order.

Environment identities (at the design's signature level) are taken in generation order, so the ``d_env``
environments of a smaller grid point are a prefix of a larger one's. A design that fixes the number of worlds W
takes the first W worlds holding at least ``d_env / W`` distinct environments. Tasks (those kept by the default
dedup rule) are ranked within each identity by ``task_id`` and dealt round-robin across the chosen identities, so
``d_task`` tasks are a prefix of ``2 * d_task`` and spread evenly. At the placebo level (frames of the placebo
pool) every ``env_id`` counts as an environment, though they all share one signature.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from axisrl.plan import Design


class PoolTooSmall(ValueError):
    """A grid point asks for more environments or tasks than the synthesized pool holds."""


def _identities(envs: pl.DataFrame, worlds: int | None, d_env: int, remedy: str) -> list[str]:
    """The first ``d_env`` values of the ``identity`` column (from the first ``worlds`` worlds able to give
    ``d_env / worlds`` each, when ``worlds`` is set)."""
    order = envs.select("world_id", "identity").unique("identity", keep="first", maintain_order=True)
    if worlds is None:
        chosen = order["identity"].head(d_env).to_list()
    else:
        per_world = d_env // worlds
        counts = order.group_by("world_id", maintain_order=True).len()
        eligible = counts.filter(pl.col("len") >= per_world)["world_id"].head(worlds).to_list()
        chosen = [
            identity
            for world in eligible
            for identity in order.filter(pl.col("world_id") == world)["identity"].head(per_world).to_list()
        ]
    if len(chosen) < d_env:
        raise PoolTooSmall(
            f"the pool has {order.height} distinct environments at this level, the design needs "
            f"d_env={d_env}"
            + (f" from {worlds} worlds with {d_env // worlds} each" if worlds else "")
            + f" (raise {remedy})"
        )
    return chosen


def _deal(
    tasks: pl.DataFrame, keyed: pl.DataFrame, chosen: list[str], count: int, name: str, remedy: str
) -> pl.DataFrame:
    """The first ``count`` kept tasks of the ``chosen`` identities, dealt round-robin across them in
    identity order (each identity's tasks ranked by ``task_id``)."""
    rank = {identity: i for i, identity in enumerate(chosen)}
    candidates = (
        tasks.filter(pl.col("keep"))
        .join(keyed.select("env_id", "identity"), on="env_id", how="inner")
        .filter(pl.col("identity").is_in(chosen))
        .with_columns(identity_rank=pl.col("identity").replace_strict(rank, return_dtype=pl.Int64))
        .sort("identity_rank", "task_id")
        .with_columns(task_rank=pl.int_range(pl.len()).over("identity_rank"))
        .sort("task_rank", "identity_rank")
    )
    if candidates.height < count:
        raise PoolTooSmall(
            f"{len(chosen)} environments hold {candidates.height} distinct tasks, the design needs "
            f"{name}={count} (raise {remedy})"
        )
    return candidates.head(count).drop("identity", "identity_rank", "task_rank")


def task_capacity(envs: pl.DataFrame, tasks: pl.DataFrame, env_level: str = "s1") -> list[int]:
    """Entry ``k - 1``: how many kept tasks the first ``k`` environments (at ``env_level``, in the
    order ``select_training_data`` takes them) hold, i.e. the largest ``d_task`` a design with
    ``d_env = k`` can ask for; its length is the largest ``d_env``."""
    keyed = envs.with_columns(identity=pl.col(f"env_{env_level}"))
    order = keyed.select("identity").unique("identity", keep="first", maintain_order=True)
    per_identity = (
        tasks.filter(pl.col("keep")).join(keyed.select("env_id", "identity"), on="env_id").group_by("identity").len()
    )
    counts = order.join(per_identity, on="identity", how="left", maintain_order="left")["len"].fill_null(0)
    return counts.cum_sum().to_list()


def select_training_data(
    envs: pl.DataFrame,
    tasks: pl.DataFrame,
    design: Mapping[str, Any],
    synthetic: tuple[pl.DataFrame, pl.DataFrame] | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The env rows and task rows a run of ``design`` trains on (dedup-stage frames in, same columns out).

    A mixture design (``source`` not ``"real"``) adds the synthetic units of its source from
    ``synthetic`` (the synthetic pool's env and task frames): environment synthesis adds
    ``d_env_synthetic`` synthetic environments (their identities in the synthetic pool's order)
    holding ``d_task_synthetic`` of their tasks; task synthesis adds ``d_task_synthetic`` synthetic
    tasks written for the chosen real environments. Trajectory synthesis changes no data here.
    """
    placebo = design["env_level"] == "placebo"
    level = "env_id" if placebo else f"env_{design['env_level']}"
    keyed = envs.with_columns(identity=pl.col(level))
    chosen = _identities(
        keyed,
        design["worlds"],
        design["d_env"],
        "synthesize.placebo_contents" if placebo else "synthesize.n_worlds or variants_per_world",
    )
    selected = _deal(
        tasks,
        keyed,
        chosen,
        design["d_task"],
        "d_task",
        "synthesize.placebo_tasks_per_env" if placebo else "synthesize.tasks_per_env",
    )
    if design.get("source", "real") == "real":
        return envs.filter(pl.col("env_id").is_in(selected["env_id"].unique().to_list())), selected
    if synthetic is None:
        raise ValueError(f"design mixes in {design['source']!r} but no synthetic pool was given")
    amounts = Design(**design).synthetic_amounts()
    source_envs, source_tasks = synthetic
    source_tasks = source_tasks.filter(pl.col("source") == design["source"])
    added = selected.head(0)
    if amounts["d_env_synthetic"]:
        source_envs = source_envs.filter(pl.col("source") == design["source"]).with_columns(identity=pl.col(level))
        synthetic_ids = _identities(source_envs, None, int(amounts["d_env_synthetic"]), "sources.envs")
        added = _deal(
            source_tasks,
            source_envs,
            synthetic_ids,
            int(amounts["d_task_synthetic"]),
            "d_task_synthetic",
            "sources.env_tasks",
        )
        envs = pl.concat([envs, source_envs.drop("identity")], how="diagonal_relaxed")
    elif amounts["d_task_synthetic"]:
        added = _deal(
            source_tasks,
            keyed,
            chosen,
            int(amounts["d_task_synthetic"]),
            "d_task_synthetic",
            "sources.tasks_per_env or sources.task_envs",
        )
    tasks = pl.concat([selected, added], how="diagonal_relaxed")
    return envs.filter(pl.col("env_id").is_in(tasks["env_id"].unique().to_list())), tasks
