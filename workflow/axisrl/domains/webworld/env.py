"""The episode API shared with toolworld: ``reset``, ``step``, ``verify``, ``fork``, plus ``candidates``.

``WebworldEnv(spec, task)``: ``reset()`` returns the instruction and the home page; ``step(call)``
runs one tool call ``{"name", "arguments"}`` in the site's own names (arguments may be a JSON
string) and returns the page now shown as JSON, or ``{"error", "page"}`` for a call the page cannot
take, which changes nothing (errors are observations, never exceptions); ``verify()`` scores the
final state path-independently (``VerifyResult``: sparse reward, subgoals met of total). The
episode is ``done`` after ``finish`` or at the spec's step limit (``finish`` included).

``candidates()`` is the discrete action space a uniformly random policy, a memoriser or a small
learner picks from: every call legal on the current page, as the exact dicts ``step`` accepts, in a
fixed order (``Site.candidates``); the values it offers for search boxes and fields are the task's
own (its goal's ``offers``: the queries, texts and numbers its instruction states). ``step``
accepts any well-formed call, not only candidates.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from axisrl.domains.toolworld.env import StepResult, VerifyResult
from axisrl.domains.toolworld.model import FINISH, CallError, parse_arguments
from axisrl.domains.webworld.engine import State, View, compile_site, parse_goal
from axisrl.domains.webworld.pages import page_view
from axisrl.domains.webworld.site import Spec


class WebworldEnv:
    """One episode of one task. The spec and the task row are read, never modified."""

    def __init__(self, spec: Spec, task: Mapping[str, Any]) -> None:
        self.site = compile_site(spec)
        self.task = task
        self.goal = parse_goal(task["goal"]) if isinstance(task["goal"], str) else task["goal"]
        self.offers: Mapping[str, list] = self.goal.get("offers", {})
        self.expected_answer: str | None = task.get("answer")
        self.state: State | None = None
        self.steps = 0
        self.done = False
        self.answer: Any = None
        self._view: View | None = None

    def reset(self) -> dict[str, Any]:
        self.state = self.site.initial_state()
        self.steps = 0
        self.done = False
        self.answer = None
        self._view = None
        return {"instruction": self.task["instruction"], "page": self.view().observation}

    def fork(self) -> WebworldEnv:
        """An independent copy of this episode so far."""
        other = copy.copy(self)
        if self.state is not None:
            other.state = self.state.copy()
        return other

    def view(self) -> View:
        """The page now shown (cached until the state changes)."""
        if self.state is None:
            raise RuntimeError("call reset() before view()")
        if self._view is None:
            self._view = page_view(self.site, self.state)
        return self._view

    def candidates(self) -> list[dict[str, Any]]:
        """Every call legal now (see the module docstring); none once the episode is over."""
        if self.state is None or self.done:
            return []
        return self.site.candidates(self.state, self.view(), self.offers)

    def step(self, call: Mapping[str, Any]) -> StepResult:
        if self.state is None:
            return StepResult({"error": "call reset() before step()"}, False)
        if self.done:
            return StepResult({"error": "the episode is over"}, True)
        self.steps += 1
        try:
            if not isinstance(call, Mapping):
                raise CallError("bad_call", "a call is an object with a name and arguments")
            arguments = parse_arguments(call.get("arguments"))
            if call.get("name") == FINISH:
                self.answer = arguments.get("answer")
                self.done = True
                return StepResult({"result": "finished"}, True)
            self.site.execute(self.state, self.view(), call, arguments)
            self._view = None
            observation = self.view().observation
        except CallError as error:
            observation = {"error": error.message, "page": self.view().observation["page"]}
        self.done = self.steps >= self.site.max_steps
        return StepResult(observation, self.done)

    def verify(self) -> VerifyResult:
        state = self.site.initial_state() if self.state is None else self.state
        met, total = self.site.check(self.goal, self.expected_answer, state, self.answer)
        success = met == total
        return VerifyResult(success, 1.0 if success else 0.0, met, total)
