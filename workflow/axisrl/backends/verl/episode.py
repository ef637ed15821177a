"""One episode as an LLM plays it, in any domain: the verl-free core the agent loop and the reward share.

The verl agent loop steps the domain's environment through ``AgentEpisode`` and hands the calls it
executed to the reward function, which replays them through a fresh ``AgentEpisode`` and verifies;
both therefore run the same environment code, and neither needs verl to be tested. The domain
comes from ``axisrl.domains.load`` by the row's ``data_source``. The episode log (one JSON record
per trajectory: its ``Outcome``, where it came from and what the collapse diagnostics count) is how
the launcher learns what verl does not log per step: success, environment steps, tool calls, parse
failures and truncation.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from axisrl.domains import Domain, load
from axisrl.domains.toolworld.model import FINISH
from axisrl.domains.toolworld.render import observation_json

AGENT_NAME = "axisrl_agent"
"""The agent loop every exported row names (verl's ``agent_name`` column), whatever its domain."""
CALLS_KEY = "agent_calls"
"""The agent loop's ``extra_fields`` key (merged into the reward's ``extra_info``): a JSON list of
the calls the environment executed, in order."""
TASK_FIELDS = ("task_id", "env_id", "instruction", "goal", "answer", "reference")
"""The task columns an episode needs (and ``reference``, the known-good solution), so every row
serialises the same keys whatever its frame carried; every domain's task rows have them."""
REWARD_DENSITIES = ("sparse", "dense")
TRUNCATED = "...(truncated)"
"""What ends a tool message that ``observation_text`` cut."""


def observation_text(observation: Mapping[str, Any], max_chars: int | None = None) -> str:
    """The tool message an LLM sees for an observation, in verl training and vLLM evaluation alike.

    Every domain's observations are JSON objects (toolworld's records and errors, mathcode's
    ``output``/``error``/``result``), so all render as toolworld's: compact JSON, sorted keys. A
    text over ``max_chars`` keeps its head (which says what the observation is) and ends in
    ``TRUNCATED``; this is the only cut, as the agent loop executes tools itself and so bypasses
    verl's own (``tool_response_truncate_side``)."""
    text = observation_json(observation)
    if max_chars is None or len(text) <= max_chars:
        return text
    return text[:max_chars] + TRUNCATED


@dataclass(frozen=True, slots=True)
class Outcome:
    """The verified end of an episode. ``finished``: the agent called ``finish`` (otherwise it
    stopped calling tools, or ran out of steps, turns or tokens)."""

    success: bool
    subgoals_met: int
    subgoals_total: int
    env_steps: int
    finished: bool

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Outcome:
        """The outcome stored in an episode-log record."""
        return cls(**{f.name: record[f.name] for f in fields(cls)})

    def score(self, reward_density: str) -> float:
        """The trained reward, as the tiny backend defines it: the outcome (sparse) or the share of
        subgoals met (dense; a mathcode task has one subgoal, its answer)."""
        if reward_density not in REWARD_DENSITIES:
            raise ValueError(f"reward_density must be one of {REWARD_DENSITIES}, got {reward_density!r}")
        if reward_density == "sparse" or not self.subgoals_total:
            return float(self.success)
        return self.subgoals_met / self.subgoals_total


class AgentEpisode:
    """One task's environment in ``domain``, stepped with calls as an LLM emits them (``arguments``
    a JSON string or a mapping). Errors come back as observations, never exceptions. Every domain's
    environment has ``done`` and ``steps`` and ends its episode at the shared ``finish`` tool.
    ``max_observation_chars`` cuts the observation texts ``step`` returns (``observation_text``)."""

    def __init__(
        self, domain: Domain, spec: Mapping[str, Any], task: Mapping[str, Any], max_observation_chars: int | None = None
    ) -> None:
        self.env = domain.Env(spec, task)
        self.env.reset()
        self.tools = domain.tool_schemas(spec)
        self.max_observation_chars = max_observation_chars
        self.calls: list[dict[str, Any]] = []
        self.finished = False

    @classmethod
    def from_json(cls, domain: str, spec: str, task: str, max_observation_chars: int | None = None) -> AgentEpisode:
        """From the domain name (``data_source``) and the JSON strings an exported row carries."""
        return cls(load(domain), json.loads(spec), json.loads(task), max_observation_chars)

    @property
    def done(self) -> bool:
        return self.env.done

    def step(self, name: str, arguments: str | Mapping[str, Any] | None) -> str:
        """Execute one call; the observation as the tool message's text."""
        call = {"name": name, "arguments": arguments}
        self.calls.append(call)
        self.finished |= name == FINISH and not self.env.done
        return observation_text(self.env.step(call).observation, self.max_observation_chars)

    def replay(self, calls: list[Mapping[str, Any]]) -> None:
        for call in calls:
            self.step(call["name"], call.get("arguments"))

    @property
    def tool_calls(self) -> int:
        """Calls of the environment's tools, ``finish`` not counted (the collapse diagnostics' count)."""
        return sum(call["name"] != FINISH for call in self.calls)

    def calls_json(self) -> str:
        return json.dumps(self.calls, sort_keys=True)

    def outcome(self) -> Outcome:
        verdict = self.env.verify()
        return Outcome(verdict.success, verdict.subgoals_met, verdict.subgoals_total, self.env.steps, self.finished)


EPISODE_LOG_GLOB = "episodes-*.jsonl"


def append_episode_record(directory: str | Path, record: Mapping[str, Any]) -> None:
    """Append one trajectory's record to this process's file in ``directory``: verl runs agent
    loops in several Ray worker processes, and one file per process needs no locking."""
    path = Path(directory) / EPISODE_LOG_GLOB.replace("*", str(os.getpid()))
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        handle.write(json.dumps(record, sort_keys=True) + "\n")


def read_episode_records(directory: str | Path) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for path in sorted(Path(directory).glob(EPISODE_LOG_GLOB))
        for line in path.read_text().splitlines()
        if line
    ]
