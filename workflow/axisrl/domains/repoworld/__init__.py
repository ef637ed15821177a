"""repoworld: procedural small Python repositories with injected bugs, a SWE-like domain.

A world (L2) is a repository family with its own vocabulary (toolworld's lexicon, so a held-out
world's names share no syllable with training's): record types, layered modules of small pure
functions over them (filters, totals, searches, pages, scores; composites that call lower
modules) and one test file per module. A variant (L1) declares edits of the API (whether search
exists, tests per file or only as a suite, reading by file or by definition), of the schema (record
fields and kinds) or of the semantics (a function's contract); a content (L0) is the test data and
module constants. A task is one bug injected by a named mutation operator, written as an issue
report (input, actual, expected) from a test that fails on it; the verifier runs the repository's
own test suite for real, with a time limit. Signatures are name-free (``sig_api``: the tools and
the repository's layout; ``sig_schema``: the record types; ``sig_sem``: a behavioural probe of every
function) and the pool rows have toolworld's shape, so dedup, the datasets and the LLM evaluation
loop read it unchanged.

Where it stops: the code is generated from a closed set of templates, bugs are one-line mutations
and edits are chosen from each line's offered rewrites (a finite action space, not free-form
patches); the test runner executes in process under a line budget and a CPU-time backstop,
which bounds time but is no sandbox (no program outside the generator's and its rewrites runs).
The tiny backend acts through its compact view (``lexicon``) and is cloned on its pretraining pool
(tier P); there is no synthetic source for this domain.
"""

from axisrl.domains.repoworld.env import RepoworldEnv
from axisrl.domains.repoworld.lexicon import compact_view
from axisrl.domains.repoworld.mutations import OPERATORS, Rewrite, rewrites
from axisrl.domains.repoworld.pool import generate_pool, generate_pretrain_pool
from axisrl.domains.repoworld.render import render_chat, tool_schemas
from axisrl.domains.repoworld.runner import Limits, SuiteResult, run_suite
from axisrl.domains.repoworld.signatures import schema_tokens, signatures, tool_tokens, transition_tokens
from axisrl.domains.repoworld.spec import HORIZON_LIMIT, env_id, reskin
from axisrl.domains.repoworld.tasks import generate_tasks

Env = RepoworldEnv
"""The domain's environment class, as ``axisrl.domains.load`` finds it."""

__all__ = [
    "Env",
    "HORIZON_LIMIT",
    "Limits",
    "OPERATORS",
    "RepoworldEnv",
    "Rewrite",
    "SuiteResult",
    "compact_view",
    "env_id",
    "generate_pool",
    "generate_pretrain_pool",
    "generate_tasks",
    "render_chat",
    "reskin",
    "rewrites",
    "run_suite",
    "schema_tokens",
    "signatures",
    "tool_schemas",
    "tool_tokens",
    "transition_tokens",
]
