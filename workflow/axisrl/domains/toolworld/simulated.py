"""DreamGym-style environment + trajectory synthesis: a learned experience model steps rollouts.

``SimulatedEnv`` has ``ToolworldEnv``'s API (it is one, so every consumer takes it) and imitates
a model that predicts the next observation and state instead of executing the call: with
probability ``transition_error`` a step goes wrong (a spurious "not found" error, an empty
result, another row's observation, or the state update silently dropped), and with probability
``reward_error`` the final verdict is flipped. Every draw is a pure function of the seed and
the calls taken so far (a hash chain over the episode's path): a fork that takes the same calls
sees the same simulation, and forks that part draw independently from then on.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from typing import Any

from axisrl.domains.canon import derive_seed
from axisrl.domains.toolworld.env import StepResult, ToolworldEnv, VerifyResult
from axisrl.domains.toolworld.methods import method_fidelity
from axisrl.domains.toolworld.model import FINISH, copy_state
from axisrl.domains.toolworld.world import FLAG_FIELD, Spec


def _call_text(call: Any) -> str:
    """A call as text for the path hash; anything an agent may send (even malformed) has one."""
    return json.dumps(call, sort_keys=True, separators=(",", ":"), default=repr)


class SimulatedEnv(ToolworldEnv):
    """One episode of one task stepped by a simulated (imperfect) transition and reward model.
    ``fidelity``: ``transition_error`` and ``reward_error`` (missing ones take DreamGym's defaults)."""

    def __init__(self, spec: Spec, task: Mapping[str, Any], fidelity: Mapping[str, float], seed: int) -> None:
        super().__init__(spec, task)
        fid = method_fidelity("dreamgym", fidelity)
        self.transition_error: float = fid["transition_error"]
        self.reward_error: float = fid["reward_error"]
        self.seed = seed
        self.path = derive_seed(seed, "simulated")

    def reset(self) -> dict[str, Any]:
        self.path = derive_seed(self.seed, "simulated")
        return super().reset()

    def step(self, call: Mapping[str, Any]) -> StepResult:
        if self.state is None or self.done:
            return super().step(call)
        self.path = derive_seed(self.path, _call_text(call))
        rng = random.Random(self.path)
        if rng.random() >= self.transition_error or (isinstance(call, Mapping) and call.get("name") == FINISH):
            return super().step(call)
        before = copy_state(self.state)
        result = super().step(call)
        return StepResult(self._mispredict(rng, call, before, result.observation), result.done)

    def _mispredict(self, rng: random.Random, call: Any, before: dict, observation: dict[str, Any]) -> dict[str, Any]:
        """A wrong observation and/or state for a step the model got wrong. A spurious error or a
        dropped update leaves the state as it was; an empty result or another row's observation
        keeps the real update."""
        rt = self.runtime
        tool = rt.tool_by_name.get(call.get("name")) if isinstance(call, Mapping) else None
        result = observation.get("result")
        kinds = ["empty", "not_found"]
        if tool is not None and tool.writes and "error" not in observation:
            kinds.append("dropped_update")
        others = []
        if tool is not None and isinstance(result, Mapping) and rt.id_name in result and "deleted" not in result:
            current = rt.parse_id(tool.table, result[rt.id_name])
            others = [i for i, row in self.state[tool.table].items() if i != current and not row.get(FLAG_FIELD)]
            if others:
                kinds.append("other_row")
        kind = rng.choice(kinds)
        if kind in ("not_found", "dropped_update"):
            self.state = before
        if kind == "dropped_update":
            return observation
        if kind == "not_found":
            what = rt.tables[tool.table].name if tool is not None else "record"
            return {"error": f"no {what} found"}
        if kind == "empty":
            return {"result": [] if isinstance(result, list) else {}}
        other = rng.choice(others)
        if len(result) > 1:  # a row result: show the other row as it is now
            return {"result": rt.surface_row(tool.table, other, self.state[tool.table][other])}
        return {"result": {rt.id_name: rt.render_id(tool.table, other)}}

    def verify(self) -> VerifyResult:
        verdict = super().verify()
        if random.Random(derive_seed(self.path, "reward")).random() >= self.reward_error:
            return verdict
        success = not verdict.success
        total = verdict.subgoals_total
        return VerifyResult(success, 1.0 if success else 0.0, total if success else max(total - 1, 0), total)
