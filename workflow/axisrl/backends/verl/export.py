"""A run's tasks, in any domain, as verl Parquet (the columns ``verl.utils.dataset.rl_dataset.RLHFDataset`` reads).

One row per task: ``data_source`` (the domain's name: the agent loop and the reward build that
domain's environment, and verl groups validation metrics by it), ``prompt`` (the domain's
``render_chat`` system and user messages; the agent loop adds the tools from the spec when it
applies the chat template), ``ability``, ``reward_model`` (``ground_truth``: the task as JSON,
what the reward verifies against), ``agent_name`` (selects ``AgentEpisodeLoop``; without it verl
silently runs the single-turn loop) and ``extra_info``. The schema is written explicitly so every
row's structs have the same fields and types (Parquet unifies struct columns across rows: a key
missing in one row would arrive as None in another), and nested data travels as JSON strings.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from axisrl.backends.verl.episode import AGENT_NAME, TASK_FIELDS
from axisrl.domains import load

ABILITY = "tool_use"
MESSAGE = pa.struct([("role", pa.string()), ("content", pa.string())])
SCHEMA = pa.schema(
    [
        ("data_source", pa.string()),
        ("prompt", pa.list_(MESSAGE)),
        ("ability", pa.string()),
        ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
        ("agent_name", pa.string()),
        (
            "extra_info",
            pa.struct(
                [
                    ("index", pa.int64()),
                    ("split", pa.string()),
                    ("tier", pa.string()),
                    ("env_id", pa.string()),
                    ("task_id", pa.string()),
                    ("spec", pa.string()),
                    ("task", pa.string()),
                ]
            ),
        ),
    ]
)
"""``extra_info``: ``split`` ("train" or "heldout"), ``tier`` (T0/T1/T2 for held-out tasks, null
for training), ``spec`` (the environment) and ``task`` (``TASK_FIELDS``) as JSON strings; the
agent loop builds the episode from these two."""


def verl_rows(domain: str, envs: pl.DataFrame, tasks: pl.DataFrame, split: str) -> list[dict[str, Any]]:
    """The verl rows of ``domain``'s ``tasks`` (with ``env_id``, ``TASK_FIELDS`` and, for held-out
    ones, ``tier``), whose environments are rows of ``envs`` (``env_id``, ``spec``)."""
    render_chat = load(domain).render_chat
    specs = dict(zip(envs["env_id"], envs["spec"]))
    missing = sorted(set(tasks["env_id"]) - set(specs))
    if missing:
        raise ValueError(f"tasks refer to environments not given: {missing[:5]}")
    rows = []
    for index, task in enumerate(tasks.iter_rows(named=True)):
        spec = json.loads(specs[task["env_id"]])
        task_json = json.dumps({k: task[k] for k in TASK_FIELDS}, sort_keys=True)
        rows.append(
            {
                "data_source": domain,
                "prompt": render_chat(spec, task)["messages"],
                "ability": ABILITY,
                "reward_model": {"style": "rule", "ground_truth": task_json},
                "agent_name": AGENT_NAME,
                "extra_info": {
                    "index": index,
                    "split": split,
                    "tier": task.get("tier"),
                    "env_id": task["env_id"],
                    "task_id": task["task_id"],
                    "spec": specs[task["env_id"]],
                    "task": task_json,
                },
            }
        )
    return rows


def write_verl_parquet(
    domain: str, envs: pl.DataFrame, tasks: pl.DataFrame, path: str | Path, split: str, min_rows: int = 1
) -> Path:
    """Write ``verl_rows`` to ``path`` (parents created); the path.

    The task list is repeated whole until it has ``min_rows`` rows: verl's training dataloader drops
    the last incomplete batch, so fewer tasks than prompts per step would give zero steps per epoch
    (and a ZeroDivisionError); repeated, a step draws some tasks twice, as the tiny backend's task
    sampler does when an update asks for more tasks than there are."""
    if tasks.is_empty():
        raise ValueError(f"no {split} tasks to export")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    repeated = pl.concat([tasks] * -(-min_rows // tasks.height))
    pq.write_table(pa.Table.from_pylist(verl_rows(domain, envs, repeated, split), schema=SCHEMA), path)
    return path
