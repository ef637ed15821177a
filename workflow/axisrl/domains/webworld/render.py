"""The chat rendering of one site for LLMs: messages plus OpenAI function-calling tools.

``tool_schemas`` gives the site's tools as JSON Schema in its own names (plus ``finish``), and
``render_chat`` the opening messages in toolworld's shape: a system message describing the site and
the policy, and a user message with the instruction and the home page as JSON (an agent acts on
what the page shows, so it has to see the first one).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from axisrl.domains.toolworld.model import FINISH
from axisrl.domains.toolworld.render import observation_json
from axisrl.domains.webworld.engine import VERB_PARAMS, Site, compile_site
from axisrl.domains.webworld.pages import page_view
from axisrl.domains.webworld.site import Spec

POLICY = (
    "Policy: act only through what the page shows: follow its links by href, fill its fields, press its "
    "buttons. Values you enter come from the request. Change only what the request asks for. If the request is "
    f"a question, call {FINISH} with the answer (just the value); otherwise call {FINISH} when the task is done."
)


def _describe(site: Site, verb: str) -> str:
    names = site.page_name
    if verb == "open":
        return "Follow a link shown on the current page, by its href."
    if verb == "search":
        text = f"Search the {site.noun['item']} catalogue from the {names['home']} or {names['results']} page."
        if site.semantics["search_match"] == "all":
            text += " Results hold every word of the query."
        else:
            text += " Results hold any word of the query, the best matches first."
        if "filter" not in site.tools:
            text += " A term attribute:value keeps only items with that value."
        return text
    if verb == "filter":
        how = "on top of the active ones" if site.semantics["filter_mode"] == "narrow" else "replacing the active one"
        return f"Keep only the results whose attribute has the value, {how}."
    if verb == "type":
        return "Type a value into a field of the current page (it replaces the field's value)."
    if verb == "select":
        return "Choose an option of a choice field of the current page."
    if verb == "click":
        how = (
            "adds the quantity to a line already there"
            if site.semantics["cart_add"] == "increment"
            else "sets the quantity of a line already there"
        )
        return f"Press a button shown on the current page. {site.button['add']} {how}."
    if verb == "submit":
        return "Submit the form on the current page (its last step)."
    return "Go back to the previous page."


def _param_schema(site: Site, verb: str, param: str) -> dict[str, Any]:
    if verb == "filter" and param == "attribute":
        return {"type": "string", "enum": [a.name for a in site.enums]}
    if verb == "type" and param == "text":
        return {"type": ["string", "integer"], "description": "the value to enter"}
    return {"type": "string", "description": f"the {site.param[param]}"}


def tool_schemas(spec: Spec) -> list[dict[str, Any]]:
    """OpenAI function-calling tool list: the site's tools plus ``finish``."""
    site = compile_site(spec)
    tools = [
        {
            "type": "function",
            "function": {
                "name": site.tool_name[verb],
                "description": _describe(site, verb),
                "parameters": {
                    "type": "object",
                    "properties": {site.param[p]: _param_schema(site, verb, p) for p in VERB_PARAMS[verb]},
                    "required": [site.param[p] for p in VERB_PARAMS[verb]],
                    "additionalProperties": False,
                },
            },
        }
        for verb in site.tools
    ]
    tools.append(
        {
            "type": "function",
            "function": {
                "name": FINISH,
                "description": "End the episode. Give the answer if the request asked a question.",
                "parameters": {
                    "type": "object",
                    "properties": {"answer": {"type": "string"}},
                    "required": [],
                    "additionalProperties": False,
                },
            },
        }
    )
    return tools


def render_chat(spec: Spec, task: Mapping[str, Any]) -> dict[str, Any]:
    """``{"messages": [system, user], "tools": [...]}`` for one task."""
    site = compile_site(spec)
    names = site.page_name
    attributes = "; ".join(
        f"{a.name} (one of {', '.join(a.words)})" if a.type == "enum" else f"{a.name} (number {a.low}-{a.high})"
        for a in site.attributes
    )
    lines = [
        f"You are using a web site. Its {site.noun['item']} pages list a {site.noun['title']} and: {attributes}.",
        f"Pages: {names['home']} (search box), {names['results']} (search results), {site.noun['item']} pages, "
        f"the {names['cart']}, the {names['checkout']} form"
        + (f", and the {names['register']} form" if "register" in site.forms else "")
        + ". Every observation is the page now shown, as JSON.",
        POLICY,
    ]
    home = page_view(site, site.initial_state()).observation
    user = f"{task['instruction']}\n\nThe page now shown:\n{observation_json(home)}"
    return {
        "messages": [{"role": "system", "content": "\n".join(lines)}, {"role": "user", "content": user}],
        "tools": tool_schemas(spec),
    }
