"""toolworld: procedural tool-use worlds with name-free signatures, verified tasks and a chat rendering.

Levels: a world (L2, own vocabulary and ID format), a variant (L1, declared edits of API, schema,
semantics or verifier) and a content (L0, the initial state). An environment is one JSON spec;
tasks are filtered answer-first; signatures identify environments up to names. Synthetic sources
(``generate_synthetic``, ``SimulatedEnv``) imitate the LLM synthesis method families with
explicit, measurable defects.
"""

from axisrl.domains.pool import PRETRAIN_TIER, Pool
from axisrl.domains.toolworld.compact import compact_view
from axisrl.domains.toolworld.defects import description_mismatches
from axisrl.domains.toolworld.env import StepResult, ToolworldEnv, VerifyResult
from axisrl.domains.toolworld.methods import METHODS, Method, method_fidelity
from axisrl.domains.toolworld.pool import generate_pool, generate_pretrain_pool
from axisrl.domains.toolworld.render import observation_json, render_chat, tool_schemas
from axisrl.domains.toolworld.signatures import schema_tokens, signatures, tool_tokens, transition_tokens
from axisrl.domains.toolworld.simulated import SimulatedEnv
from axisrl.domains.toolworld.synthetic import generate_synthetic
from axisrl.domains.toolworld.synthetic_common import SyntheticPool
from axisrl.domains.toolworld.tasks import generate_tasks
from axisrl.domains.toolworld.world import env_id, reskin, with_semantics, with_verifier

Env = ToolworldEnv
"""The domain's environment class, as ``axisrl.domains.load`` finds it."""

__all__ = [
    "Env",
    "PRETRAIN_TIER",
    "METHODS",
    "Method",
    "Pool",
    "SimulatedEnv",
    "StepResult",
    "SyntheticPool",
    "ToolworldEnv",
    "VerifyResult",
    "compact_view",
    "description_mismatches",
    "env_id",
    "generate_pool",
    "generate_pretrain_pool",
    "generate_synthetic",
    "generate_tasks",
    "method_fidelity",
    "observation_json",
    "render_chat",
    "reskin",
    "schema_tokens",
    "signatures",
    "tool_schemas",
    "tool_tokens",
    "transition_tokens",
    "with_semantics",
    "with_verifier",
]
