"""The math+code episode API, the same as toolworld's (``reset``, ``step``, ``verify``).

An environment is one reasoning-gym generator under one harness. The harness is the structure an
agent meets besides the problem itself:

* ``tools`` (the API set): ``answer`` (only ``finish``), ``calculator`` (``calculate`` evaluates one
  math expression) or ``python`` (``python`` runs a code cell);
* for ``python``, ``python_state`` (``stateless``: every cell starts a fresh interpreter;
  ``persistent``: variables survive between cells, like a REPL session) and ``python_output``
  (``stdout``: only what the cell prints; ``echo``: also the value of a final expression, like a
  notebook);
* ``grammar`` (how the verifier reads the answer): ``plain`` (the ``finish`` answer as given) or
  ``tagged`` (the last ``<answer>...</answer>`` in it, reasoning-gym's own answer format).

The verifier is the generator's ``score_answer`` on the stored reasoning-gym entry, run in a
child process with a time limit (``verifier.py`` says why); a task succeeds when it scores 1.0.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reasoning_gym.utils import extract_answer

from axisrl.domains.mathcode import sandbox
from axisrl.domains.mathcode.verifier import SCORER
from axisrl.domains.toolworld.env import StepResult, VerifyResult
from axisrl.domains.toolworld.model import FINISH, CallError, parse_arguments

TOOLSETS = ("answer", "calculator", "python")
PYTHON_STATES = ("stateless", "persistent")
PYTHON_OUTPUTS = ("stdout", "echo")
GRAMMARS = ("plain", "tagged")
TOOL_NAMES = {"calculator": "calculate", "python": "python"}
PARAMETER = {"calculate": "expression", "python": "code", FINISH: "answer"}
"""Each tool's one (string) parameter."""


@dataclass(frozen=True, slots=True)
class Harness:
    """The structural part of an environment besides its generator."""

    tools: str
    python_state: str | None = None
    python_output: str | None = None
    grammar: str = "plain"

    def __post_init__(self) -> None:
        if self.tools not in TOOLSETS or self.grammar not in GRAMMARS:
            raise ValueError(f"unknown harness {self}")
        python = self.tools == "python"
        if python != (self.python_state in PYTHON_STATES) or python != (self.python_output in PYTHON_OUTPUTS):
            raise ValueError(f"python_state and python_output go with tools='python' and only with it: {self}")

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> Harness:
        return cls(**spec["harness"])

    def as_dict(self) -> dict[str, Any]:
        return {
            "tools": self.tools,
            "python_state": self.python_state,
            "python_output": self.python_output,
            "grammar": self.grammar,
        }

    def edits(self) -> list[str]:
        """The harness choices as tokens (the ``edits`` column of an environment row)."""
        tokens = [f"tools:{self.tools}"]
        if self.tools == "python":
            tokens += [f"python_state:{self.python_state}", f"python_output:{self.python_output}"]
        return tokens + [f"grammar:{self.grammar}"]

    def wrap(self, answer: str) -> str:
        """``answer`` written the way this harness's verifier reads it (the reference solution)."""
        return f"<answer>{answer}</answer>" if self.grammar == "tagged" else answer

    def read(self, submitted: str | None) -> str | None:
        if submitted is None:
            return None
        return extract_answer(submitted) if self.grammar == "tagged" else submitted.strip()


@dataclass(frozen=True, slots=True)
class ScoredVerifyResult(VerifyResult):
    """``score`` is reasoning-gym's own score in [0, 1] (partial credit for near answers), which a
    dense-reward run may use; ``success`` means a score of 1.0."""

    score: float


def tool_schemas(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """OpenAI function-calling tools of the environment's harness, ``finish`` last."""
    harness = Harness.from_spec(spec)
    tools = []
    if harness.tools == "calculator":
        tools.append(
            _function(
                "calculate",
                "Evaluate one arithmetic expression (Python syntax, math module "
                "functions such as sqrt, log, factorial) and return its value.",
                "the expression, e.g. factorial(10) / 2**5",
            )
        )
    if harness.tools == "python":
        state = (
            "Variables and imports persist between calls."
            if harness.python_state == "persistent"
            else "Each call starts a fresh interpreter: nothing persists between calls."
        )
        output = (
            "The output is what the code prints, followed by the value of a final expression."
            if harness.python_output == "echo"
            else "The output is what the code prints."
        )
        tools.append(
            _function(
                "python",
                f"Run Python 3 code (time limit {spec['python_timeout_s']:g} s). {state} {output}",
                "the Python source to run",
            )
        )
    answer = (
        "the final answer inside <answer></answer> tags, e.g. <answer>42</answer>"
        if harness.grammar == "tagged"
        else "the final answer only, e.g. 42"
    )
    tools.append(_function(FINISH, "Submit the final answer and end the episode.", answer))
    return tools


def _function(name: str, description: str, parameter_description: str) -> dict[str, Any]:
    parameter = PARAMETER[name]
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {parameter: {"type": "string", "description": parameter_description}},
                "required": [parameter],
                "additionalProperties": False,
            },
        },
    }


def render_chat(spec: Mapping[str, Any], task: Mapping[str, Any]) -> dict[str, Any]:
    """``{"messages": [system, user], "tools": [...]}`` for one task (the toolworld contract)."""
    harness = Harness.from_spec(spec)
    helper = {
        "answer": "",
        "calculator": " You may use the calculate tool.",
        "python": " You may run Python with the python tool.",
    }[harness.tools]
    answer = "wrapped in <answer></answer> tags" if harness.grammar == "tagged" else "and nothing else"
    system = f"Solve the problem.{helper} When you are done, call {FINISH} with the final answer {answer}."
    return {
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": task["instruction"]}],
        "tools": tool_schemas(spec),
    }


class MathcodeEnv:
    """One episode of one reasoning-gym problem under one harness; errors are observations."""

    def __init__(self, spec: Mapping[str, Any], task: Mapping[str, Any]) -> None:
        self.generator: str = spec["generator"]
        self.harness = Harness.from_spec(spec)
        self.max_steps: int = spec["max_steps"]
        self.timeout_s: float = spec["python_timeout_s"]
        self.task = task
        self.entry: dict[str, Any] = json.loads(task["goal"])
        self.cells: list[str] = []
        """Cells a persistent interpreter replays (those that did not time out)."""
        self.steps = 0
        self.done = False
        self.started = False
        self.answer: str | None = None

    def reset(self) -> dict[str, Any]:
        self.cells, self.steps, self.done, self.started, self.answer = [], 0, False, True, None
        return {"instruction": self.task["instruction"]}

    def step(self, call: Mapping[str, Any]) -> StepResult:
        if not self.started:
            return StepResult({"error": "call reset() before step()"}, False)
        if self.done:
            return StepResult({"error": "the episode is over"}, True)
        self.steps += 1
        try:
            name, arguments = self._decode(call)
            if name == FINISH:
                answer = arguments.get("answer")
                self.answer = None if answer is None else answer if isinstance(answer, str) else json.dumps(answer)
                self.done = True
                return StepResult({"result": "finished"}, True)
            observation = self._run(name, arguments)
        except CallError as error:
            observation = {"error": error.message}
        self.done = self.steps >= self.max_steps
        return StepResult(observation, self.done)

    def _decode(self, call: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
        if not isinstance(call, Mapping) or not isinstance(call.get("name"), str):
            raise CallError("bad_call", 'a call must be {"name": <tool>, "arguments": {...}}')
        name = call["name"]
        if name != FINISH and name != TOOL_NAMES.get(self.harness.tools):
            raise CallError("unknown_tool", f"unknown tool {name!r}")
        arguments = parse_arguments(call.get("arguments"))
        parameter = PARAMETER[name]
        unknown = sorted(set(arguments) - {parameter})
        if unknown:
            raise CallError("bad_argument", f"unknown argument {unknown[0]!r} for {name}")
        if name != FINISH and not isinstance(arguments.get(parameter), str):
            raise CallError("bad_argument", f"{name} needs a string {parameter!r}")
        return name, arguments

    def _run(self, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        if name == "calculate":
            return sandbox.run(arguments["expression"], mode="expression", timeout_s=self.timeout_s)
        persistent = self.harness.python_state == "persistent"
        observation = sandbox.run(
            arguments["code"],
            mode="exec",
            timeout_s=self.timeout_s,
            history=self.cells if persistent else (),
            echo=self.harness.python_output == "echo",
        )
        if persistent and not observation.get("error", "").startswith("timed out"):
            self.cells.append(arguments["code"])
        return observation

    def verify(self) -> ScoredVerifyResult:
        value = SCORER.score(self.generator, self.harness.read(self.answer), self.entry)
        success = value >= 1.0
        return ScoredVerifyResult(success, 1.0 if success else 0.0, int(success), 1, value)
