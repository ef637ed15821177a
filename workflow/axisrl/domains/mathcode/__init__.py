"""mathcode: reasoning-gym generators under tool harnesses, the math+code domain of the seed paper.

Each generator under each harness (answer-only, calculator, or a Python tool that is stateless or
persistent and prints or echoes; answers read plain or from ``<answer>`` tags) is a structure-level
environment, and its problems are tasks. There is no separable world axis. The episode API,
renderings, signatures and pool rows match toolworld's, so the same stages, datasets and
evaluation loop serve both. Problems are procedural and need no network.
"""

from axisrl.domains.mathcode.env import Harness, MathcodeEnv, ScoredVerifyResult, render_chat, tool_schemas
from axisrl.domains.mathcode.pool import GENERATORS, HELDOUT_GENERATORS, generate_pool, generate_tasks
from axisrl.domains.mathcode.signatures import schema_tokens, signatures, tool_tokens, transition_tokens

Env = MathcodeEnv
"""The domain's environment class, as ``axisrl.domains.load`` finds it."""

__all__ = [
    "Env",
    "GENERATORS",
    "HELDOUT_GENERATORS",
    "Harness",
    "MathcodeEnv",
    "ScoredVerifyResult",
    "generate_pool",
    "generate_tasks",
    "render_chat",
    "schema_tokens",
    "signatures",
    "tool_schemas",
    "tool_tokens",
    "transition_tokens",
]
