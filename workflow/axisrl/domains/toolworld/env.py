"""The episode API shared by every consumer (tiny policy, verl agent loops, vLLM evaluation).

``ToolworldEnv(spec, task)``: ``reset()`` returns the instruction, ``step(call)`` runs one tool call
in the world's own names and returns a JSON observation (errors are observations, never
exceptions), ``verify()`` scores the final state path-independently against the task's goal.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from axisrl.domains.toolworld.model import FINISH, CallError, Goal, State, copy_state, parse_arguments
from axisrl.domains.toolworld.runtime import compile_spec
from axisrl.domains.toolworld.world import Spec


@dataclass(frozen=True, slots=True)
class StepResult:
    observation: dict[str, Any]
    done: bool


@dataclass(frozen=True, slots=True)
class VerifyResult:
    """``reward`` is the sparse outcome (1.0 or 0.0); ``subgoals_met / subgoals_total`` is the
    partial credit a dense-reward run may use instead."""

    success: bool
    reward: float
    subgoals_met: int
    subgoals_total: int


class ToolworldEnv:
    """One episode of one task. The spec and the task row are read, never modified."""

    def __init__(self, spec: Spec, task: Mapping[str, Any]) -> None:
        self.runtime = compile_spec(spec)
        self.task = task
        self.goal = Goal.parse(task["goal"])
        self.expected_answer: str | None = task.get("answer")
        self.state: State | None = None
        self.steps = 0
        self.done = False
        self.answer: Any = None

    def reset(self) -> dict[str, Any]:
        self.state = copy_state(self.runtime.initial)
        self.steps = 0
        self.done = False
        self.answer = None
        return {"instruction": self.task["instruction"]}

    def fork(self) -> ToolworldEnv:
        """An independent copy of this episode so far (rows are replaced, never modified, so
        copying the tables is enough)."""
        other = copy.copy(self)
        if self.state is not None:
            other.state = copy_state(self.state)
        return other

    def step(self, call: Mapping[str, Any]) -> StepResult:
        if self.state is None:
            return StepResult({"error": "call reset() before step()"}, False)
        if self.done:
            return StepResult({"error": "the episode is over"}, True)
        self.steps += 1
        try:
            if isinstance(call, Mapping) and call.get("name") == FINISH:
                self.answer = parse_arguments(call.get("arguments")).get("answer")
                self.done = True
                return StepResult({"result": "finished"}, True)
            tool, args = self.runtime.decode_call(call)
            observation = self.runtime.encode_result(self.runtime.execute(self.state, tool, args))
        except CallError as error:
            observation = {"error": error.message}
        self.done = self.steps >= self.runtime.max_steps
        return StepResult(observation, self.done)

    def verify(self) -> VerifyResult:
        final = self.runtime.initial if self.state is None else self.state
        met, total = self.runtime.check(self.goal, self.expected_answer, self.runtime.initial, final, self.answer)
        success = met == total
        return VerifyResult(success, 1.0 if success else 0.0, met, total)
