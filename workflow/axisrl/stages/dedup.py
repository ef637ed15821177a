"""The dedup family: embed every task once, then signature identities, pool statistics and task keep-flags
for the real pools and, each source on its own, for the synthetic ones (library code: ``axisrl.dedup``)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import polars as pl

from axisrl.artifacts import read_artifact, write_artifact
from axisrl.config import StageSpec
from axisrl.dedup import check_heldout_disjoint, env_signatures, pool_stats, task_dedup_summary, task_keep_flags
from axisrl.stages.pools import SPLIT_FILES

log = logging.getLogger("axisrl")


def embed(spec: StageSpec, settings: Mapping[str, Any], inputs: Mapping[str, str], outputs: Mapping[str, str]) -> None:
    """Embed every task instruction once, so threshold changes in dedup never re-embed."""
    from axisrl.embedding import embed_texts

    tasks = pl.concat(
        [
            read_artifact(inputs[name], "synthesize").select("task_id", "split", "instruction")
            for _, name in SPLIT_FILES.values()
        ]
    )
    log.info("embedding %d instructions with %s", tasks.height, settings["model"])
    vectors = embed_texts(tasks["instruction"].to_list(), settings["model"], settings["batch_size"])
    frame = tasks.select("task_id", "split").with_columns(
        pl.Series("embedding", vectors, dtype=pl.Array(pl.Float32, vectors.shape[1]))
    )
    write_artifact(frame, outputs["embeddings"], spec)


def dedup(spec: StageSpec, settings: Mapping[str, Any], inputs: Mapping[str, str], outputs: Mapping[str, str]) -> None:
    """Signature-level environment identity, pool statistics and task keep-flags for every pool."""
    embeddings = read_artifact(inputs["embeddings"], "embed")
    domain, options = settings["domain"], settings["dedup"]
    envs = {
        split: env_signatures(read_artifact(inputs[files[0]], "synthesize"), domain)
        for split, files in SPLIT_FILES.items()
    }
    check_heldout_disjoint(envs["train"], envs["heldout"])
    stats, summary = [], []
    for split, (env_file, task_file) in SPLIT_FILES.items():
        log.info("dedup %s: %d raw environments", split, envs[split].height)
        stats.append(pool_stats(envs[split], split, domain))
        tasks = read_artifact(inputs[task_file], "synthesize").join(
            envs[split].select("env_id", "env_s1"), on="env_id", how="left", maintain_order="left"
        )
        tasks = task_keep_flags(
            tasks, embeddings, options["thetas"], options["theta"], options["block_size"], options["task_rule"]
        )
        summary += task_dedup_summary(tasks, split, options["thetas"])
        write_artifact(envs[split], outputs[env_file], spec)
        write_artifact(tasks, outputs[task_file], spec)
    write_artifact(pl.DataFrame(stats), outputs["pool_stats"], spec)
    write_artifact(pl.DataFrame(summary, schema_overrides={"theta": pl.Float64}), outputs["task_dedup"], spec)


def dedup_sources(
    spec: StageSpec, settings: Mapping[str, Any], inputs: Mapping[str, str], outputs: Mapping[str, str]
) -> None:
    """Dedup the synthetic pool like a real one, each source on its own: environment signatures and
    identities, and task keep-flags (embedding its own instructions, so a change of sources never
    re-embeds the real pool). Task-synthesis tasks sit on real environments and take their
    identities from the real pool."""
    from axisrl.embedding import embed_texts

    envs = read_artifact(inputs["synthetic_envs"], "sources")
    tasks = read_artifact(inputs["synthetic_tasks"], "sources")
    real_envs = read_artifact(inputs["real_envs"], "dedup")
    if envs.height:
        envs = pl.concat(
            [
                env_signatures(envs.filter(pl.col("source") == source))
                for source in envs["source"].unique(maintain_order=True)
            ]
        )
        check_heldout_disjoint(envs, read_artifact(inputs["heldout_envs"], "dedup"))
    identities = pl.concat(
        [real_envs.select("env_id", "env_s1"), *([envs.select("env_id", "env_s1")] if envs.height else [])]
    )
    if tasks.height:
        options = settings["dedup"]
        vectors = embed_texts(
            tasks["instruction"].to_list(), options["embedding"]["model"], options["embedding"]["batch_size"]
        )
        embeddings = tasks.select("task_id").with_columns(
            pl.Series("embedding", vectors, dtype=pl.Array(pl.Float32, vectors.shape[1]))
        )
        tasks = pl.concat(
            [
                task_keep_flags(
                    tasks.filter(pl.col("source") == source).join(
                        identities, on="env_id", how="left", maintain_order="left"
                    ),
                    embeddings,
                    options["thetas"],
                    options["theta"],
                    options["block_size"],
                    options["task_rule"],
                )
                for source in tasks["source"].unique(maintain_order=True)
            ]
        )
        for source, kept, total in (
            tasks.group_by("source", maintain_order=True).agg(pl.col("keep").sum(), pl.len()).iter_rows()
        ):
            log.info("dedup %s: %d of %d tasks kept", source, kept, total)
    write_artifact(envs, outputs["synthetic_envs"], spec)
    write_artifact(tasks, outputs["synthetic_tasks"], spec)


def heldout(inputs: Mapping[str, str]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The held-out pool every run is evaluated on: its environments and the tasks dedup kept."""
    return (
        read_artifact(inputs["heldout_envs"], "dedup"),
        read_artifact(inputs["heldout_tasks"], "dedup").filter(pl.col("keep")),
    )
