"""What the domain test modules (``test_<domain>.py``, ``test_<domain>_view.py``) share: the columns of a
pool's rows, every spec and task of a pool, a small validated ``synthesize`` section, and a scripted chat
engine for the LLM evaluation loop."""

from __future__ import annotations

import json
from collections.abc import Callable

from axisrl.config import validate_config
from axisrl.stages.pools import ENV_COLUMNS, TASK_COLUMNS

STAGE_COLUMNS = frozenset({"source", "defect"})
"""The columns the pools stage adds to a domain's rows."""
ENV_ROW = frozenset(ENV_COLUMNS) - STAGE_COLUMNS
"""The columns of every domain's environment rows (mathcode's add ``generator``)."""
TASK_ROW = frozenset(TASK_COLUMNS) - STAGE_COLUMNS
"""The columns of every domain's task rows."""

SMALL = {
    "n_worlds": 6,
    "variants_per_world": 3,
    "contents_per_variant": 2,
    "reskins_per_world": 1,
    "tasks_per_env": 8,
    "heldout": {
        "tasks_per_env": 4,
        "t0_envs": 3,
        "t1_envs": 3,
        "t2_worlds": 3,
        "t2_variants_per_world": 2,
        "validation_worlds": 2,
    },
}
"""toolworld's and webworld's small pool: every tier, family and optional tool shows up."""
PLACEBO = {"placebo_contents": 2, "placebo_tasks_per_env": 4}
"""Small placebo pools, set after validation (the schema ties ``placebo_contents`` to the study's placebo sweep)."""
NO_PLACEBO_SWEEP = {"families": {"pool_construction": {"levels": ["s3"]}}}
"""A study for pools with fewer placebo contents than the default study's placebo sweep needs."""


def synthesize(schema: dict, section: dict, study: dict | None = None) -> dict:
    """``section`` validated as a config's ``synthesize`` (defaults filled in), beside ``study`` if given."""
    config = {"synthesize": section, **({"study": study} if study is not None else {})}
    return validate_config(config, schema)["synthesize"]


def every_spec(*pools) -> dict[str, dict]:
    """Every environment's spec of the pools (training, held-out and placebo), by env id."""
    envs = [env for pool in pools for env in [*pool.envs, *pool.heldout_envs, *pool.placebo_envs]]
    return {env["env_id"]: json.loads(env["spec"]) for env in envs}


def every_task(*pools) -> list[dict]:
    """Every task of the pools: training, placebo, then held-out."""
    return [task for pool in pools for task in [*pool.tasks, *pool.placebo_tasks, *pool.heldout_tasks]]


class Scripted:
    """A chat engine for ``llm_eval.evaluate``: each turn, the next call of the script that ``key`` finds
    for the conversation's user message (the message itself by default), as a hermes tool-call block; with
    ``finish_at_once``, the script's last call on the first turn."""

    def __init__(
        self, scripts: dict[str, list[dict]], key: Callable[[str], str] = str, finish_at_once: bool = False
    ) -> None:
        self.scripts, self.key, self.finish_at_once = scripts, key, finish_at_once

    def chat(self, conversations, tools) -> list[str]:
        texts = []
        for messages in conversations:
            calls = self.scripts[self.key(messages[1]["content"])]
            turn = sum(m["role"] == "assistant" for m in messages)
            call = calls[-1] if self.finish_at_once else calls[turn]
            texts.append(f"<tool_call>\n{json.dumps(call)}\n</tool_call>")
        return texts
