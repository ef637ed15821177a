"""Environment signatures of the MiniWoB++ domain, with the keys toolworld's have.

A MiniWoB task is one environment identity: its page structure, its transitions (what the page does on
a click, what ends the task) and its reward function come together from its HTML, which no name
separates. So every signature is a hash of the task's name under its own prefix, and S3 = S2 = S1 (the
API, schema and semantics levels) partition the environments alike: two environments are the same at
every level exactly when they run the same task (content, the instances' seed root, enters none, as L0
in toolworld). The held-out tiers T2 and V use tasks no training environment runs, so they share no
signature and no ``skin`` with training.

The token sets (Table 6's diversity) are the declared parts: the tools (the same browser tools for
every task, so the tools' diversity is 0), the task and its family (schema), and the skills an episode
takes (transitions; ``tasks.SKILLS``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from axisrl.domains.canon import short_hash
from axisrl.domains.miniwob.tasks import TASKS

TOOL_TOKENS = frozenset({"click(ref)", "type(ref,string)", "select(ref,string)", "press_key(key)", "finish()"})


def signatures(spec: Mapping[str, Any]) -> dict[str, str]:
    """``sig_api``, ``sig_schema``, ``sig_sem``, ``sig_ver`` and ``skin`` of one environment spec."""
    task = spec["task"]
    return {
        axis: short_hash([f"miniwob-{axis}", task]) for axis in ("sig_api", "sig_schema", "sig_sem", "sig_ver", "skin")
    }


def tool_tokens(spec: Mapping[str, Any]) -> frozenset[str]:
    return TOOL_TOKENS


def schema_tokens(spec: Mapping[str, Any]) -> frozenset[str]:
    info = TASKS[spec["task"]]
    return frozenset({f"task/{info.name}", f"family/{info.family}"})


def transition_tokens(spec: Mapping[str, Any]) -> frozenset[str]:
    return frozenset(f"skill/{skill}" for skill in TASKS[spec["task"]].skills)
