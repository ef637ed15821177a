"""webworld: procedural web sites (shops, travel booking, application portals) with WebShop-like tasks.

The paper's web domain is five real sites (WebShop-like shopping among them); this domain draws
procedural sites from three families instead, so that the study's levels can be varied one at a
time. A site (L2) has a page graph (home with a search box and, on some sites, category links;
search results with filters and further pages; item pages with a quantity field; a cart; a one- to
three-step checkout form, on some sites a review page; a confirmation; on some sites a
registration form), a catalogue of items with typed attributes (enum and integer, plus a title),
its own vocabulary and ID format (toolworld's lexicon, so held-out sites share no word with
training). A variant (L1) applies declared edits to its API (which optional tools exist: filter,
select, submit, back; whether search takes ``attribute:value`` terms instead of a filter tool;
category browsing; results per page; form steps), its schema (attributes and form fields added,
dropped or widened), its semantics (all- or any-word search, narrowing or replacing filters, adding
to or setting a cart line, a review step) or its verifier; a content (L0) is a new catalogue and
initial cart. An environment is one JSON spec.

Tasks are answer-first and filtered (``tasks``): buy an item named by constraints and fill the
checkout, fill the registration form, report an attribute of an item, or name the item of a group
with the lowest or highest value. ``WebworldEnv`` has toolworld's episode API plus ``candidates()``,
the finite action space of the current page. Signatures are name-free and the chat rendering is
toolworld's shape, so dedup, the LLM evaluation loop and verl serve this domain unchanged.

Where it stops: pages are JSON, not HTML (no layout, scrolling or free-form URLs: only links a page
shows can be followed); search is exact word matching, with no ranking model, typos or synonyms;
there is one user, no login, payment or stock, and an order is final; instructions are templated
English around the site's pseudo-words. The tiny backend acts through its compact view (``lexicon``)
and is cloned on its pretraining pool (tier P); no learned simulator or synthetic source is provided.
"""

from axisrl.domains.webworld.engine import Site, compile_site
from axisrl.domains.webworld.env import WebworldEnv
from axisrl.domains.webworld.lexicon import compact_view
from axisrl.domains.webworld.pool import STEP_LIMIT_FACTOR, env_id, generate_pool, generate_pretrain_pool
from axisrl.domains.webworld.render import render_chat, tool_schemas
from axisrl.domains.webworld.signatures import schema_tokens, signatures, tool_tokens, transition_tokens
from axisrl.domains.webworld.site import FAMILIES, reskin, with_semantics
from axisrl.domains.webworld.tasks import generate_tasks

Env = WebworldEnv
"""The domain's environment class, as ``axisrl.domains.load`` finds it."""

__all__ = [
    "Env",
    "FAMILIES",
    "STEP_LIMIT_FACTOR",
    "Site",
    "WebworldEnv",
    "compact_view",
    "compile_site",
    "env_id",
    "generate_pool",
    "generate_pretrain_pool",
    "generate_tasks",
    "render_chat",
    "reskin",
    "schema_tokens",
    "signatures",
    "tool_schemas",
    "tool_tokens",
    "transition_tokens",
    "with_semantics",
]
