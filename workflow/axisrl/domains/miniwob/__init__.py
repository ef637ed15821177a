"""miniwob: MiniWoB++ web tasks in a headless Chromium, the web domain of the LLM backends.

MiniWoB++ (the Farama ``miniwob`` package) ships small web pages, each a task that draws a random
instance from a seed and scores it with its own reward. Here a task is an environment and its
instances are tasks (``tasks.py`` lists the tasks used and why; ``pool.py`` how they fill the training
and held-out tiers). ``MiniwobEnv`` has toolworld's episode API on a live page: the agent reads the
page as a JSON list of elements and acts with ``click``, ``type``, ``select`` and ``press_key`` by
element ref; MiniWoB's raw reward decides success. The pages run in one headless Chromium per process
(Debian's ``chromium`` and ``chromium-driver``), started on first use; where it is missing, constructing
an environment (or making a pool) raises ``ChromiumUnavailable`` saying what to install. The renderings,
signatures and token sets need no browser.

It is a domain of the LLM backends (the vLLM/HF evaluation loop and verl), not of the tiny learner,
which needs procedural worlds.
"""

from axisrl.domains.miniwob.browser import ChromiumUnavailable, chromium_paths
from axisrl.domains.miniwob.env import MiniwobEnv, MiniwobVerifyResult, render_chat, tool_schemas
from axisrl.domains.miniwob.pool import generate_pool, generate_tasks
from axisrl.domains.miniwob.signatures import schema_tokens, signatures, tool_tokens, transition_tokens
from axisrl.domains.miniwob.tasks import HELDOUT_FAMILIES, TASKS, TRAIN_FAMILIES, VALIDATION_FAMILIES

Env = MiniwobEnv
"""The domain's environment class, as ``axisrl.domains.load`` finds it."""

__all__ = [
    "ChromiumUnavailable",
    "Env",
    "HELDOUT_FAMILIES",
    "MiniwobEnv",
    "MiniwobVerifyResult",
    "TASKS",
    "TRAIN_FAMILIES",
    "VALIDATION_FAMILIES",
    "chromium_paths",
    "generate_pool",
    "generate_tasks",
    "render_chat",
    "schema_tokens",
    "signatures",
    "tool_schemas",
    "tool_tokens",
    "transition_tokens",
]
