"""Environment signatures of the math+code domain, with the keys toolworld's have.

* ``sig_api``: the harness's tool surface (S3): answer-only, calculator or python;
* ``sig_schema``: the generator, the problem family whose instances fill the episode (S2);
* ``sig_sem``: a behavioural fingerprint of the tools, the observations of a fixed probe run
  through the real sandbox (S1): it separates stateless from persistent interpreters and
  stdout-only from echoing ones without trusting the declared options;
* ``sig_ver``: generator and answer grammar. As in toolworld, a verifier-only change is not a new
  environment: two grammars of one (generator, tools, semantics) share their S1 identity;
* ``skin``: the generator's surface (its question templates). The domain has no re-skins and no
  separable world axis, so a held-out generator is the only way to an unseen skin.

The content seed (which problems an environment's tasks are) enters none of them: content is L0.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from reasoning_gym.factory import DATASETS

from axisrl.domains.canon import short_hash
from axisrl.domains.mathcode.env import Harness, MathcodeEnv

PROBE = {
    "calculator": [{"name": "calculate", "arguments": {"expression": "6 * 7"}}],
    "python": [
        {"name": "python", "arguments": {"code": "x = 6 * 7"}},
        {"name": "python", "arguments": {"code": "6 * 7"}},
        {"name": "python", "arguments": {"code": "print(x)"}},
    ],
}
PROBE_TIMEOUT_S = 30.0
"""Generous: a probe that timed out on a loaded machine would change a signature."""


def _api(harness: Harness) -> list[str]:
    """Tool entries without names: (parameter types, what comes back)."""
    returns = {"answer": [], "calculator": ["eval(string)->value"], "python": ["exec(string)->output"]}
    return sorted(returns[harness.tools] + ["finish(string)->end"])


@functools.cache
def _behaviour(tools: str, python_state: str | None, python_output: str | None) -> str:
    """Hash of the probe's observations under this tool semantics (run once per process)."""
    harness = Harness(tools, python_state, python_output)
    env = MathcodeEnv(
        {
            "generator": "",
            "harness": harness.as_dict(),
            "max_steps": len(PROBE.get(tools, ())) + 1,
            "python_timeout_s": PROBE_TIMEOUT_S,
        },
        {"instruction": "", "goal": "{}"},
    )
    env.reset()
    return short_hash([env.step(call).observation for call in PROBE.get(tools, [])])


def signatures(spec: Mapping[str, Any]) -> dict[str, str]:
    """``sig_api``, ``sig_schema``, ``sig_sem``, ``sig_ver`` and ``skin`` of one environment spec."""
    harness = Harness.from_spec(spec)
    generator = spec["generator"]
    return {
        "sig_api": short_hash(_api(harness)),
        "sig_schema": short_hash(["generator", generator]),
        "sig_sem": _behaviour(harness.tools, harness.python_state, harness.python_output),
        "sig_ver": short_hash(["verifier", generator, harness.grammar]),
        "skin": short_hash(["skin", generator]),
    }


def tool_tokens(spec: Mapping[str, Any]) -> frozenset[str]:
    return frozenset(_api(Harness.from_spec(spec)))


def schema_tokens(spec: Mapping[str, Any]) -> frozenset[str]:
    """The generator and its reasoning-gym category (arithmetic, algorithmic, ...)."""
    generator = spec["generator"]
    return frozenset({f"generator/{generator}", f"category/{DATASETS[generator][0].__module__.split('.')[1]}"})


def transition_tokens(spec: Mapping[str, Any]) -> frozenset[str]:
    harness = Harness.from_spec(spec)
    if harness.tools != "python":
        return frozenset({f"tools/{harness.tools}"})
    return frozenset({f"python/{harness.python_state}", f"python/{harness.python_output}"})
