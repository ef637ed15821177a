"""The agent loop for verl 0.9.1, one for every domain: the environment lives inside the loop.

verl has no environment hook any more (``BaseInteraction`` was removed in 0.8) and a ``BaseTool``
is shared by every trajectory of a worker, so the environment lives in the agent loop: verl
instantiates one loop per trajectory, and this one holds that trajectory's ``AgentEpisode``, in
the domain the row's ``data_source`` names. Everything else is verl's ``ToolAgentLoop``:
token-in/token-out generation, tool calls parsed by the configured parser (``multi_turn.format``,
hermes: ``<tool_call>{"name", "arguments"}</tool_call>``), at most ``max_parallel_calls`` calls per
turn, tool tokens masked out of the loss, the turn and token limits. The episode also ends when
the environment does (``finish`` or ``max_steps``).

The executed calls go to the reward function through ``extra_fields`` (``CALLS_KEY``). With
``episode_dir`` set (an extra key of the agent-loop config entry, passed on by Hydra), each
trajectory appends its verified outcome to a JSONL log there, since verl 0.9.1 logs no per-sample
reward details for training steps, with what the collapse diagnostics (``axisrl.diagnostics``)
count and verl does not report: ``tool_calls`` (executed calls other than ``finish``), ``turns``
(assistant generations), ``parse_failures`` (tool-call blocks the parser dropped:
``ParseFailureCounter``) and ``truncated`` (the trajectory hit ``response_length``).

Differences from ``ToolAgentLoop``: tools come from each row's spec (its full JSON schemas go to
the chat template, so ``pattern``, ``additionalProperties`` and union types that verl's pydantic
tool schema would drop survive), so the parser is handed no schema list (hermes ignores it);
observations are rendered, and cut at ``multi_turn.max_tool_response_length`` characters, by
``observation_text``, the helper the vLLM evaluation uses, so a model is evaluated on the texts
it was trained on (verl's own cut, by ``tool_response_truncate_side``, never runs); and
environment steps and the verification run in a worker thread, one at a time and in call order:
mathcode runs code and scores answers in child processes, which would otherwise stall every
trajectory sharing the worker's event loop.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopOutput, register
from verl.experimental.agent_loop.tool_agent_loop import AgentData, AgentState, ToolAgentLoop
from verl.experimental.agent_loop.tool_parser import FunctionCall, HermesToolParser
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse

from axisrl.backends.verl.episode import AGENT_NAME, CALLS_KEY, AgentEpisode, append_episode_record


class ParseFailureCounter:
    """verl's hermes parser, counting the tool calls it drops: a ``<tool_call>`` block that does not
    decode (bad JSON, no ``name`` or ``arguments``) or is never closed is only logged by verl, so a
    model whose calls stop parsing would look like one that stopped calling. Counted as the LLM
    evaluation counts them: openings that produced no call."""

    def __init__(self, parser: HermesToolParser) -> None:
        self.parser = parser
        self.failures = 0

    @property
    def stop_token_ids(self) -> list[int]:
        return self.parser.stop_token_ids

    async def extract_tool_calls(
        self, responses_ids: list[int], tools: list[OpenAIFunctionToolSchema] | None = None
    ) -> tuple[str, list[FunctionCall]]:
        content, calls = await self.parser.extract_tool_calls(responses_ids, tools)
        text = await asyncio.to_thread(self.parser.tokenizer.decode, responses_ids)
        self.failures += text.count(self.parser.tool_call_start_token) - len(calls)
        return content, calls


@register(AGENT_NAME)
class AgentEpisodeLoop(ToolAgentLoop):
    """``ToolAgentLoop`` stepping one ``AgentEpisode`` built from the row's ``data_source`` and ``extra_info``."""

    def __init__(self, *args: Any, episode_dir: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.episode_dir = episode_dir
        self.episode: AgentEpisode | None = None
        # a turn's calls are gathered concurrently; the lock (FIFO) steps them one at a time, in order
        self.step_lock = asyncio.Lock()
        self.tool_parser = ParseFailureCounter(self.tool_parser)  # multi_turn.format is always hermes
        self.turns = 0
        self.truncated = False

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        extra_info = kwargs["extra_info"]
        self.episode = await asyncio.to_thread(
            AgentEpisode.from_json,
            kwargs["data_source"],
            extra_info["spec"],
            extra_info["task"],
            self.max_tool_response_length,
        )
        self.tools = {}
        self.tool_schemas = self.episode.tools
        output = await super().run(sampling_params, **kwargs)
        output.extra_fields[CALLS_KEY] = self.episode.calls_json()
        if self.episode_dir is not None:
            outcome = await asyncio.to_thread(self.episode.outcome)
            steps = kwargs.get("global_steps")
            append_episode_record(
                self.episode_dir,
                {
                    "global_steps": None if steps is None else int(steps),
                    "uid": str(kwargs.get("uid")),
                    "split": extra_info["split"],
                    "tier": extra_info["tier"],
                    "env_id": extra_info["env_id"],
                    "task_id": extra_info["task_id"],
                    "num_turns": output.num_turns,
                    "response_tokens": len(output.response_ids),
                    "tool_calls": self.episode.tool_calls,
                    "turns": self.turns,
                    "parse_failures": self.tool_parser.failures,
                    "truncated": self.truncated,
                    **asdict(outcome),
                },
            )
        return output

    async def _call_tool(
        self, tool_call: FunctionCall, tools_kwargs: dict[str, Any], agent_data: AgentData
    ) -> tuple[ToolResponse, float, dict]:
        async with self.step_lock:
            text = await asyncio.to_thread(self.episode.step, tool_call.name, tool_call.arguments)
        return ToolResponse(text=text), 0.0, {}

    async def _handle_generating_state(
        self, agent_data: AgentData, sampling_params: dict[str, Any], ignore_termination: bool = False
    ) -> AgentState:
        state = await super()._handle_generating_state(agent_data, sampling_params, ignore_termination)
        self.turns = agent_data.assistant_turns
        self.truncated |= len(agent_data.response_mask) >= self.response_length
        return state

    async def _handle_processing_tools_state(self, agent_data: AgentData) -> AgentState:
        state = await super()._handle_processing_tools_state(agent_data)
        # verl ends a trajectory here for one reason: the tool responses would overrun response_length
        self.truncated |= state == AgentState.TERMINATED
        return AgentState.TERMINATED if self.episode.done else state
