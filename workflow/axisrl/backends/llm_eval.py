"""Held-out evaluation of an LLM: batched multi-turn episodes through a chat engine, vLLM's offline
chat API (``axisrl.backends.vllm_eval``) or ``transformers`` generation (``axisrl.backends.hf_eval``).

Every live conversation of the batch is sent to the engine together; each completion is parsed
the way verl's ``hermes`` tool parser parses it in training (``<tool_call>{json}</tool_call>``
blocks, ``{"name", "arguments"}``; a block that does not decode is dropped), the first
``max_parallel_calls`` calls are stepped in the environment (verl executes only those too), and
the assistant message (with ``tool_calls``) and one ``{"role": "tool"}`` message per call are
appended, its text the one verl training shows (``observation_text``, cut alike). An episode ends
when a completion has no call, the environment is done, or at the ``max_turns``-th completion,
whose calls are not executed (verl's ``max_assistant_turns`` ends a trajectory before it parses
that turn's calls); it is then scored by the environment's own verifier, so a run's episode rows
are the tiny evaluator's: task_id, env_id, tier, success, reward, partial, steps, tool_calls,
errors (``errors`` also counts tool-call blocks that did not decode). Every domain comes through
``axisrl.domains.load``.

The loop knows no engine: it runs, and is tested, with a scripted one as with the real ones.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from axisrl.backends.verl.episode import observation_text
from axisrl.domains import load
from axisrl.domains.toolworld.model import FINISH

TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
TOOL_CALL_START, TOOL_CALL_END = "<tool_call>", "</tool_call>"

Message = dict[str, Any]


class Engine(Protocol):
    """Chat completion for a batch: one raw completion text per conversation, each conversation
    with its own tool schemas."""

    def chat(self, conversations: Sequence[list[Message]], tools: Sequence[list[dict[str, Any]]]) -> list[str]: ...


class Episode(Protocol):
    """The episode API every domain's environment implements (``Domain.Env``)."""

    def reset(self) -> dict[str, Any]: ...

    def step(self, call: Mapping[str, Any]) -> Any: ...

    def verify(self) -> Any: ...


@dataclass(frozen=True, slots=True)
class ParsedCompletion:
    content: str
    """The completion without its tool-call blocks (what verl keeps as the message content)."""
    calls: list[dict[str, Any]]
    """``{"name": str, "arguments": str}`` with the arguments re-serialised as JSON, as verl does."""
    malformed: int
    """Tool-call openings that produced no call (bad JSON, missing keys, unclosed block)."""


def parse_tool_calls(text: str) -> ParsedCompletion:
    """verl's hermes parser: no call unless both tags occur; each block must be JSON with ``name``
    and ``arguments``; the content is the text with the blocks removed."""
    openings = text.count(TOOL_CALL_START)
    if TOOL_CALL_START not in text or TOOL_CALL_END not in text:
        return ParsedCompletion(text, [], openings)
    calls = []
    for block in TOOL_CALL.findall(text):
        try:
            decoded = json.loads(block)
            calls.append({"name": decoded["name"], "arguments": json.dumps(decoded["arguments"], ensure_ascii=False)})
        except (json.JSONDecodeError, KeyError, TypeError):
            continue
    return ParsedCompletion(TOOL_CALL.sub("", text), calls, openings - len(calls))


@dataclass
class Conversation:
    """One episode in flight: its environment, the messages so far and its counters."""

    task: Mapping[str, Any]
    env: Episode
    messages: list[Message]
    tools: list[dict[str, Any]]
    done: bool = False
    turns: int = 0
    steps: int = 0
    tool_calls: int = 0
    errors: int = 0

    def advance(
        self, completion: str, max_parallel_calls: int, max_tool_response_chars: int | None, last: bool
    ) -> None:
        """Take one completion: record it, step its calls (none on the ``last`` turn, as verl),
        append the tool results."""
        self.turns += 1
        parsed = parse_tool_calls(completion)
        self.errors += parsed.malformed
        calls = parsed.calls[:max_parallel_calls]
        ids = [f"call_{self.turns}_{k}" for k in range(len(calls))]
        assistant: Message = {"role": "assistant", "content": parsed.content}
        if calls:
            assistant["tool_calls"] = [
                {"id": call_id, "type": "function", "function": call} for call_id, call in zip(ids, calls)
            ]
        self.messages.append(assistant)
        if not calls or last:
            self.done = True
            return
        for call_id, call in zip(ids, calls):
            result = self.env.step(call)
            self.steps += 1
            self.tool_calls += call["name"] != FINISH
            self.errors += "error" in result.observation
            self.messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call_id,
                    "content": observation_text(result.observation, max_tool_response_chars),
                }
            )
            if result.done:
                self.done = True
                return

    def record(self) -> dict[str, Any]:
        verdict = self.env.verify()
        total = verdict.subgoals_total
        return {
            "task_id": self.task["task_id"],
            "env_id": self.task["env_id"],
            "tier": self.task.get("tier"),
            "success": verdict.success,
            "reward": verdict.reward,
            "partial": verdict.subgoals_met / total if total else float(verdict.success),
            "steps": self.steps,
            "tool_calls": self.tool_calls,
            "errors": self.errors,
        }


def start_conversations(
    envs: Sequence[Mapping[str, Any]], tasks: Sequence[Mapping[str, Any]], domain: str
) -> list[Conversation]:
    api = load(domain)
    specs = {env["env_id"]: json.loads(env["spec"]) if isinstance(env["spec"], str) else env["spec"] for env in envs}
    conversations = []
    for task in tasks:
        spec = specs[task["env_id"]]
        env = api.Env(spec, task)
        env.reset()
        chat = api.render_chat(spec, task)
        conversations.append(Conversation(task, env, chat["messages"], chat["tools"]))
    return conversations


def evaluate(
    engine: Engine,
    envs: Sequence[Mapping[str, Any]],
    tasks: Sequence[Mapping[str, Any]],
    domain: str,
    max_turns: int,
    max_parallel_calls: int = 1,
    max_tool_response_chars: int | None = None,
    workers: int | None = None,
) -> list[dict[str, Any]]:
    """One episode per task, all in one batch; the rows the tiny evaluator writes.

    ``max_turns``, ``max_parallel_calls`` and ``max_tool_response_chars`` should be the training
    run's (``VerlJob``: ``multi_turn.max_assistant_turns``, ``max_parallel_calls``,
    ``max_tool_response_length``).
    ``workers`` threads step the environments of a turn (mathcode's Python tool waits on a child
    process, so stepping in parallel keeps the accelerator from idling)."""
    conversations = start_conversations(envs, tasks, domain)
    with ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1) as pool:
        for turn in range(1, max_turns + 1):
            live = [c for c in conversations if not c.done]
            if not live:
                break
            completions = engine.chat([c.messages for c in live], [c.tools for c in live])
            list(
                pool.map(
                    lambda pair, last=turn == max_turns: pair[0].advance(
                        pair[1], max_parallel_calls, max_tool_response_chars, last
                    ),
                    zip(live, completions),
                )
            )
    return [c.record() for c in conversations]
