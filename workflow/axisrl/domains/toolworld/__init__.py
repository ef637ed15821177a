"""toolworld: procedural tool-use worlds with name-free signatures, verified tasks and two renderings.

Levels: a world (L2, own vocabulary and ID format), a variant (L1, declared edits of API, schema,
semantics or verifier) and a content (L0, the initial state). An environment is one JSON spec;
tasks are filtered answer-first; signatures identify environments up to names.
"""

from axisrl.domains.toolworld.env import StepResult, ToolworldEnv, VerifyResult
from axisrl.domains.toolworld.pool import Pool, generate_pool
from axisrl.domains.toolworld.render import observation_json, render_chat, render_compact, tool_schemas
from axisrl.domains.toolworld.signatures import schema_tokens, signatures, tool_tokens, transition_tokens
from axisrl.domains.toolworld.tasks import generate_tasks
from axisrl.domains.toolworld.world import env_id, reskin, with_semantics, with_verifier

__all__ = [
    "Pool", "StepResult", "ToolworldEnv", "VerifyResult", "env_id", "generate_pool", "generate_tasks",
    "observation_json", "render_chat", "render_compact", "reskin", "schema_tokens", "signatures",
    "tool_schemas", "tool_tokens", "transition_tokens", "with_semantics", "with_verifier",
]
