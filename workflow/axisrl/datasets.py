"""Which environments and tasks a grid point trains on: nested prefixes of one fixed order.

Environment identities (at the design's signature level) are taken in generation order, so the
``d_env`` environments of a smaller grid point are a prefix of a larger one's. A design that fixes
the number of worlds W takes the first W worlds holding at least ``d_env / W`` distinct environments. Tasks (those kept by
the default dedup rule) are ranked within each identity by ``task_id`` and dealt round-robin across
the chosen identities, so ``d_task`` tasks are a prefix of ``2 * d_task`` and spread evenly.
At the placebo level (frames of the placebo pool) every ``env_id`` counts as an environment,
though they all share one signature.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl


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
        chosen = [identity for world in eligible
                  for identity in order.filter(pl.col("world_id") == world)["identity"].head(per_world).to_list()]
    if len(chosen) < d_env:
        raise PoolTooSmall(f"the pool has {order.height} distinct environments at this level, the design needs "
                           f"d_env={d_env}" + (f" from {worlds} worlds with {d_env // worlds} each" if worlds else "")
                           + f" (raise {remedy})")
    return chosen


def select_training_data(envs: pl.DataFrame, tasks: pl.DataFrame,
                         design: Mapping[str, Any]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The env rows and task rows a run of ``design`` trains on (dedup-stage frames in, same columns out)."""
    placebo = design["env_level"] == "placebo"
    keyed = envs.with_columns(identity=pl.col("env_id" if placebo else f"env_{design['env_level']}"))
    chosen = _identities(keyed, design["worlds"], design["d_env"],
                         "synthesize.placebo_contents" if placebo else "synthesize.n_worlds or variants_per_world")
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
    if candidates.height < design["d_task"]:
        raise PoolTooSmall(f"d_env={design['d_env']} environments hold {candidates.height} distinct tasks, the design "
                           f"needs d_task={design['d_task']} (raise synthesize."
                           f"{'placebo_tasks_per_env' if placebo else 'tasks_per_env'})")
    selected = candidates.head(design["d_task"]).drop("identity", "identity_rank", "task_rank")
    return envs.filter(pl.col("env_id").is_in(selected["env_id"].unique().to_list())), selected
