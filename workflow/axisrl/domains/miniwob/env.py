"""The MiniWoB++ episode API, toolworld's (``reset``, ``step``, ``verify``), on a live page in a headless Chromium.

An environment is one MiniWoB task (its spec: ``{"domain", "task", "content_seed", "max_steps"}``); a task
row is one instance of it, the page MiniWoB draws from a seed. The row's ``goal`` holds the seed and the
page as the pool recorded it (``{"seed", "page"}``), and its ``instruction`` is the page's utterance, so
``render_chat`` shows the agent the page without a browser and ``reset`` checks the live page against it.

Tools (``tool_schemas``): ``click`` an element by ref, ``type`` text into a field by ref (it replaces the
field's text, key by key), ``select`` a dropdown option by its text, ``press_key`` one key, and
``finish``. Every observation is JSON: the page after the action (``{"page": [...]}``, the element list of
``browser.compact_elements``), ``{"result": "the task ended"}`` once MiniWoB ends the task (a form was
submitted, a target clicked), ``{"result": "finished"}`` after ``finish``, or ``{"error": ...}`` for a
call the page cannot take, which changes nothing. The episode is done when the task ends, at ``finish``
or at ``max_steps`` calls (``finish`` included); ``verify`` reads MiniWoB's own raw reward (without its
time discount): success when it is positive; finishing or running out of steps before the task ends
fails.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from axisrl.domains.miniwob.browser import (
    TYPE_MAX_CHARS,
    Action,
    PageState,
    borrowed,
    chromium_paths,
    shared_browser,
)
from axisrl.domains.toolworld.env import StepResult, VerifyResult
from axisrl.domains.toolworld.model import FINISH, CallError, parse_arguments

log = logging.getLogger("axisrl")

KEYS = (
    "<Enter>",
    "<Tab>",
    "<Backspace>",
    "<Delete>",
    "<Escape>",
    "<Space>",
    "<ArrowUp>",
    "<ArrowDown>",
    "<ArrowLeft>",
    "<ArrowRight>",
)
"""Keys ``press_key`` takes (WebDriver's names for them)."""
NOT_TYPEABLE = frozenset(
    f"input_{kind}" for kind in ("checkbox", "radio", "button", "submit", "reset", "image", "file", "range", "color")
)
PARAMETERS = {
    "click": ("ref",),
    "type": ("ref", "text"),
    "select": ("ref", "option"),
    "press_key": ("key",),
    FINISH: (),
}
"""Each tool's parameters, all required."""
TASK_ENDED = {"result": "the task ended"}


@dataclass(frozen=True, slots=True)
class MiniwobVerifyResult(VerifyResult):
    """``raw_reward`` is MiniWoB's reward for the instance (in [-1, 1], None if the task never ended) and
    ``reason`` what the page said about it; ``success`` means a positive raw reward."""

    raw_reward: float | None
    reason: str | None


def _function(name: str, description: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": list(PARAMETERS[name]),
                "additionalProperties": False,
            },
        },
    }


REF = {"type": "integer", "description": "the ref of an element of the current page"}


def tool_schemas(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """OpenAI function-calling tools, the same for every MiniWoB task, ``finish`` last."""
    return [
        _function(
            "click",
            "Click an element of the page (a button, link, checkbox, radio button, tab, header, icon, item).",
            {"ref": REF},
        ),
        _function(
            "type",
            "Replace the text of an input field or text area with the given text, typed key by key.",
            {"ref": REF, "text": {"type": "string", "maxLength": TYPE_MAX_CHARS, "description": "the text to type"}},
        ),
        _function(
            "select",
            "Choose an option of a dropdown (select) element by the option's text.",
            {"ref": REF, "option": {"type": "string", "description": "the text of one of the element's options"}},
        ),
        _function(
            "press_key",
            "Press one key on the element that has the focus (the last one clicked or typed into).",
            {"key": {"type": "string", "enum": list(KEYS)}},
        ),
        _function(
            FINISH,
            "End the episode. A task ends by itself once it is done (e.g. its form is submitted); finishing "
            "earlier gives up.",
            {},
        ),
    ]


SYSTEM = (
    "You operate a small web page to carry out the user's request. The page is a JSON list of its elements "
    "in document order: each has a ref (the number the tools take), a tag, and where it has them its text, "
    "value (a checkbox's or radio button's is whether it is checked), id, class and (a dropdown's) options; "
    'an entry with only "ref" and "text" is text inside the element with that ref. Every action returns the '
    "page as it then is. The task ends by itself once it is done (usually by clicking its submit button), "
    f"so do not call {FINISH} after that; call {FINISH} only to give up."
)


def page_text(elements: Any) -> str:
    """The page as the agent reads it: one compact JSON list."""
    return json.dumps(list(elements), separators=(",", ":"), ensure_ascii=False)


def render_chat(spec: Mapping[str, Any], task: Mapping[str, Any]) -> dict[str, Any]:
    """``{"messages": [system, user], "tools": [...]}`` for one instance: the utterance and the page the
    pool recorded for it (the toolworld contract; no browser is needed)."""
    page = json.loads(task["goal"])["page"]
    user = f"{task['instruction']}\n\nThe page:\n{page_text(page)}"
    return {
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}],
        "tools": tool_schemas(spec),
    }


class MiniwobEnv:
    """One episode of one MiniWoB instance. Its page lives in a tab of the process's shared browser; the
    episode keeps the actions it took, so a tab lent to another episode meanwhile is rebuilt (and ``fork``
    is a copy that rebuilds its own). Constructing one raises ``ChromiumUnavailable`` where Chromium or
    chromedriver is missing."""

    def __init__(self, spec: Mapping[str, Any], task: Mapping[str, Any]) -> None:
        chromium_paths()
        self.task_name: str = spec["task"]
        self.max_steps: int = spec["max_steps"]
        self.task = task
        goal = json.loads(task["goal"])
        self.seed: int = goal["seed"]
        self.recorded_page: list[dict[str, Any]] = goal["page"]
        self.token = object()
        """This episode's claim on a browser tab (a new one per reset and per fork)."""
        self.actions: list[Action] = []
        self.page: tuple[dict[str, Any], ...] = ()
        self.ended: PageState | None = None
        """The page's final state once MiniWoB ended the task (its raw reward and reason)."""
        self.steps = 0
        self.done = False
        self.started = False

    def reset(self) -> dict[str, Any]:
        """Start the instance in a tab of its own; the utterance and the page (the ones the pool recorded:
        a ``RuntimeError`` says if the live page differs, as another miniwob or Chromium would make it)."""
        self._release()
        self.token, self.actions, self.ended, self.steps, self.done, self.started = object(), [], None, 0, False, True
        with borrowed(self.token) as (browser, _):
            state = browser.load(self.task_name, self.seed)
        if state.done or state.utterance != self.task["instruction"] or list(state.elements) != self.recorded_page:
            raise RuntimeError(
                f"MiniWoB {self.task_name} instance {self.seed} is not the page the pool recorded (utterance "
                f"{state.utterance!r}, recorded {self.task['instruction']!r}); the pool was made with another "
                "miniwob or Chromium: generate it again"
            )
        self.page = state.elements
        return {"instruction": state.utterance, "page": list(state.elements)}

    def fork(self) -> MiniwobEnv:
        """An independent copy of this episode so far: a live page cannot be copied, so the copy rebuilds
        its own (load, seed, replay the actions) on its first step."""
        other = MiniwobEnv.__new__(MiniwobEnv)
        for name, value in vars(self).items():
            setattr(other, name, list(value) if isinstance(value, list) else value)
        other.token = object()
        return other

    def step(self, call: Mapping[str, Any]) -> StepResult:
        if not self.started:
            return StepResult({"error": "call reset() before step()"}, False)
        if self.done:
            return StepResult({"error": "the episode is over"}, True)
        self.steps += 1
        try:
            name, arguments = self._decode(call)
            if name == FINISH:
                self._end()
                return StepResult({"result": "finished"}, True)
            observation = self._act(self._action(name, arguments))
        except CallError as error:
            observation = {"error": error.message}
        if not self.done and self.steps >= self.max_steps:
            self._end()
        return StepResult(observation, self.done)

    def verify(self) -> MiniwobVerifyResult:
        if self.ended is None:
            return MiniwobVerifyResult(False, 0.0, 0, 1, None, None)
        success = self.ended.raw_reward > 0
        return MiniwobVerifyResult(success, float(success), int(success), 1, self.ended.raw_reward, self.ended.reason)

    def close(self) -> None:
        """Give the episode's tab back to the browser (an ended episode has done so already)."""
        self._release()

    def _decode(self, call: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
        if not isinstance(call, Mapping) or not isinstance(call.get("name"), str):
            raise CallError("bad_call", 'a call must be {"name": <tool>, "arguments": {...}}')
        name = call["name"]
        if name not in PARAMETERS:
            raise CallError("unknown_tool", f"unknown tool {name!r}; the tools are {', '.join(PARAMETERS)}")
        arguments = parse_arguments(call.get("arguments"))
        unknown = sorted(set(arguments) - set(PARAMETERS[name]))
        if unknown:
            raise CallError("bad_argument", f"unknown argument {unknown[0]!r} for {name}")
        missing = [p for p in PARAMETERS[name] if p not in arguments]
        if missing:
            raise CallError("bad_argument", f"{name} needs {missing[0]!r}")
        return name, arguments

    def _element(self, ref: Any) -> dict[str, Any]:
        if type(ref) is not int:
            raise CallError("bad_argument", f"ref must be an integer, not {json.dumps(ref)}")
        element = next((e for e in self.page if e.get("ref") == ref and "tag" in e), None)
        if element is None:
            element = next((e for e in self.page if e.get("ref") == ref), None)
        if element is None:
            raise CallError("bad_ref", f"no element with ref {ref} on the page")
        return element

    def _action(self, name: str, arguments: Mapping[str, Any]) -> Action:
        """The browser action of a call, checked against the page the agent last saw."""
        if name == "press_key":
            if arguments["key"] not in KEYS:
                raise CallError("bad_argument", f"unknown key {arguments['key']!r}; the keys are {', '.join(KEYS)}")
            return Action("press_key", text=arguments["key"])
        element = self._element(arguments["ref"])
        tag = element.get("tag", "")
        if name == "click":
            return Action("click", element["ref"])
        if name == "type":
            text = arguments["text"]
            if not isinstance(text, str) or len(text) > TYPE_MAX_CHARS:
                raise CallError("bad_argument", f"text must be a string of at most {TYPE_MAX_CHARS} characters")
            if not (tag == "textarea" or tag.startswith("input_") and tag not in NOT_TYPEABLE):
                raise CallError("bad_ref", f"element {element['ref']} ({tag or 'text'}) is not a text field")
            return Action("type", element["ref"], text)
        if tag != "select":
            raise CallError("bad_ref", f"element {element['ref']} ({tag or 'text'}) is not a dropdown")
        if arguments["option"] not in element["options"]:
            raise CallError("bad_argument", f"element {element['ref']} has no option {arguments['option']!r}")
        return Action("select", element["ref"], arguments["option"])

    def _act(self, action: Action) -> dict[str, Any]:
        """Run ``action`` on this episode's page (rebuilt first if its tab was lent out) and observe."""
        from selenium.common.exceptions import WebDriverException

        with borrowed(self.token) as (browser, kept):
            try:
                if not kept:
                    state = browser.restore(self.task_name, self.seed, self.actions)
                    if state.done or state.elements != self.page:
                        log.warning("MiniWoB %s instance %s did not replay to its page", self.task_name, self.seed)
                        self._end()
                        return {"error": "the page could not be restored; the episode ends"}
                state = browser.perform(action)
            except ValueError as error:
                return {"error": f"the page refused the action: {error}"}
            except WebDriverException as error:
                browser.release(self.token)  # rebuilt on the next step
                browser.recover()
                return {"error": f"the browser failed: {(error.msg or type(error).__name__).splitlines()[0]}"}
        self.actions.append(action)
        if state.done:
            self.ended = state
            self._end()
            return dict(TASK_ENDED)
        self.page = state.elements
        return {"page": list(state.elements)}

    def _end(self) -> None:
        self.done = True
        self._release()

    def _release(self) -> None:
        browser = shared_browser()
        with browser.lock:
            browser.release(self.token)
