"""Name-free environment signatures, the behavioural probe, and token sets for pool statistics.

Every signature is read off the structure (symbols, types, sizes, flags), never off the lexicon,
the ID format or the catalogue, so a re-skin keeps it and a new content (L0) does too:

* ``sig_api``: the tool set with each tool's parameters, and the page graph's shape (the pages
  that exist, how many steps each form has, whether the home page browses by an attribute,
  whether search takes ``attribute:value`` terms, results per page);
* ``sig_schema``: the catalogue's attribute types and domains (enum sizes, integer ranges) and
  each form's typed fields with their step;
* ``sig_sem``: the trace of a fixed probe script run through the real site on a canonical
  catalogue (what each call led to: the page kind, how many results, the cart's quantities, the
  orders and submissions placed, errors), so it sees the semantics the declared flags claim
  (all- or any-word search, narrowing or replacing filters, adding to or setting a cart line, a
  review step before an order) without trusting them;
* ``sig_ver``: the verifier settings; ``skin``: lexicon + ID format, the only thing a re-skin changes.

Attributes enter in a canonical order (type, domain, then generation index, which a re-skin keeps).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from axisrl.domains.canon import canonical_json, short_hash
from axisrl.domains.webworld.engine import VERB_PARAMS, Site
from axisrl.domains.webworld.env import WebworldEnv
from axisrl.domains.webworld.site import SEMANTICS, Spec, build_spec

STRUCTURE_KEYS = ("attributes", "forms", "api", "semantics", "verifier")
PROBE_ITEMS = 6
PROBE_TEXT = "Probe Value"


def _structure(spec: Spec) -> dict[str, Any]:
    return {key: spec[key] for key in STRUCTURE_KEYS}


def _domain(entry: Mapping[str, Any]) -> list[Any]:
    return [entry["type"], entry.get("size", 0), entry.get("low", 0), entry.get("high", 0)]


def _canonical_attributes(structure: Mapping[str, Any]) -> list[dict[str, Any]]:
    return sorted(structure["attributes"], key=lambda a: (_domain(a), int(a["sym"][1:])))


def _api(structure: Mapping[str, Any]) -> dict[str, Any]:
    api, forms = structure["api"], structure["forms"]
    pages = ["home", "results", "item", "cart", "confirm"] + sorted(
        f"{name}x{form['steps']}" for name, form in forms.items()
    )
    return {
        "tools": sorted([verb, list(VERB_PARAMS[verb])] for verb in api["tools"]),
        "pages": sorted(pages),
        "browse": api["browse"] is not None,
        "query_terms": "filter" not in api["tools"],
        "page_size": api["page_size"],
    }


def _schema(structure: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "attributes": [_domain(a) for a in _canonical_attributes(structure)],
        "forms": {
            name: sorted([*_domain(f), f["step"]] for f in form["fields"]) for name, form in structure["forms"].items()
        },
    }


# ------------------------------------------------------------------------------------- probe


def _probe_content(structure: Mapping[str, Any]) -> dict[str, list]:
    """``PROBE_ITEMS`` items whose values depend on attribute roles only. The first two enum
    attributes (canonical order) take the pattern (0,0), (0,1), (1,0), (1,1), (2,0), (0,2), so a
    two-word search, two filters and their combinations give different counts under each semantics."""
    attributes = _canonical_attributes(structure)
    enums = [a for a in attributes if a["type"] == "enum"]
    pattern = ((0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (0, 2))
    items = []
    for n in range(PROBE_ITEMS):
        row: dict[str, Any] = {"title": f"Probe{chr(ord('a') + n)}"}
        for j, a in enumerate(attributes):
            if a["type"] == "int":
                row[a["sym"]] = a["low"] + (7 * n + j) % (a["high"] - a["low"] + 1)
            else:
                k = enums.index(a)
                row[a["sym"]] = (pattern[n][k] if k < 2 else n) % a["size"]
        items.append([n + 1, row])
    return {"items": items, "cart": []}


def _record(env: WebworldEnv, observation: Mapping[str, Any]) -> list[Any]:
    state = env.state
    page = state.page
    count = len(env.site.results(page.terms, page.filters)) if page.kind == "results" else None
    return [
        page.kind,
        page.step,
        count,
        sorted(q for _, q in state.cart),
        len(state.orders),
        len(state.submissions),
        "error" in observation,
    ]


def _probe_values(site: Site, form: str) -> dict[str, Any]:
    """Canonical form values: a fixed text, the first option, the lowest number."""
    fields = [f for steps in site.forms[form] for f in steps]
    return {f.sym: PROBE_TEXT if f.type == "text" else 0 if f.type == "enum" else f.low for f in fields}


@dataclass(frozen=True)
class ProbeRun:
    """The probe's name-free ``trace`` and the behaviour classes read off it (``transition_tokens``)."""

    trace: list[list[Any]]
    behaviour: tuple[str, ...]


def probe(structure: Mapping[str, Any]) -> ProbeRun:
    """Run the fixed probe script on the canonical site of ``structure``."""
    spec = build_spec({**structure, "family": "probe"}, _probe_content(structure), "train", 0, 10_000)
    env = WebworldEnv(spec, {"instruction": "", "goal": {"kind": "lookup", "offers": {}}, "answer": None})
    env.reset()
    site = env.site
    trace: list[list[Any]] = []

    def run(call: dict[str, Any]) -> list[Any]:
        trace.append(_record(env, env.step(call).observation))
        return trace[-1]

    first, second = [site.attribute[a["sym"]] for a in _canonical_attributes(structure) if a["type"] == "enum"][:2]
    searched = run(site.call("search", query=f"{first.words[0]} {second.words[0]}"))
    if "filter" in site.tools:
        run(site.call("search", query=""))
        run(site.call("filter", attribute=first.name, value=first.words[0]))
        filtered = run(site.call("filter", attribute=second.name, value=second.words[0]))
    else:
        filtered = run(site.call("search", query=f"{first.name}:{first.words[0]} {second.name}:{second.words[0]}"))
    item = site.items[1]
    for _ in range(2):
        run(site.call("open", href=item.href))
        run(site.call("type", field=site.quantity.name, text="2"))
        added = run(site.call("click", button=site.button["add"]))
    run(site.call("click", button=site.button["checkout"]))
    for call in site.form_calls("checkout", _probe_values(site, "checkout")):
        run(call)
    reviewed = env.state.page.kind == "review"
    if reviewed:
        run(site.call("click", button=site.button["place"]))
    if "back" in site.tools:
        run(site.call("back"))
    run(site.call("open", href="/"))
    if "register" in site.forms:
        run(site.call("open", href=f"/{site.page_name['register']}"))
        for call in site.form_calls("register", _probe_values(site, "register")):
            run(call)
    run(site.call("open", href="/"))
    run(site.call("search", query=""))
    # The probe catalogue holds one item with both first values (search narrows to 1 only if every
    # word must match; two filters leave 1 only if they narrow) and the cart line gets 2 twice.
    behaviour = (
        f"search:{'all' if searched[2] == 1 else 'any'}",
        f"filter:{'query' if 'filter' not in site.tools else 'narrow' if filtered[2] == 1 else 'replace'}",
        f"cart:{'add' if added[3] == [4] else 'set'}",
        f"checkout:{'review' if reviewed else 'direct'}",
    )
    return ProbeRun(trace, behaviour)


@functools.lru_cache(maxsize=4096)
def _structure_signatures(structure_json: str) -> tuple[str, str, str, str, tuple[str, ...]]:
    structure = json.loads(structure_json)
    run = probe(structure)
    return (
        short_hash(["webworld-api", _api(structure)]),
        short_hash(["webworld-schema", _schema(structure)]),
        short_hash(["webworld-sem", run.trace]),
        short_hash(["webworld-verifier", structure["verifier"]]),
        run.behaviour,
    )


# ------------------------------------------------------------------------------------- public


def signatures(spec: Spec) -> dict[str, str]:
    """``sig_api``, ``sig_schema``, ``sig_sem``, ``sig_ver`` (name-free) and ``skin``."""
    api, schema, sem, ver, _ = _structure_signatures(canonical_json(_structure(spec)))
    return {"sig_api": api, "sig_schema": schema, "sig_sem": sem, "sig_ver": ver, "skin": skin(spec)}


def skin(spec: Spec) -> str:
    return short_hash({"lexicon": spec["lexicon"], "id_format": spec["id_format"]})


def tool_tokens(spec: Spec) -> frozenset[str]:
    """One token per tool (``filter/attribute,value``) and per page-graph feature (``page/checkoutx2``)."""
    api = _api(_structure(spec))
    tokens = {f"tool/{verb}/{','.join(params)}" for verb, params in api["tools"]}
    tokens.update(f"page/{page}" for page in api["pages"])
    tokens.update({f"browse/{api['browse']}", f"query_terms/{api['query_terms']}", f"page_size/{api['page_size']}"})
    return frozenset(tokens)


def _domain_token(entry: Mapping[str, Any]) -> str:
    if entry["type"] == "int":
        return f"int~2^{round(math.log2(entry['high'] - entry['low'] + 1))}"
    return f"{entry['type']}{entry.get('size', '')}"


def schema_tokens(spec: Spec) -> frozenset[str]:
    """Attribute and field tokens by role, e.g. ``attribute/1/enum4``, ``field/checkout.0/text``."""
    structure = _structure(spec)
    tokens = {f"attribute/{k}/{_domain_token(a)}" for k, a in enumerate(_canonical_attributes(structure))}
    tokens.add(f"attributes/{len(structure['attributes'])}")
    for name, form in structure["forms"].items():
        tokens.add(f"fields/{name}/{len(form['fields'])}")
        tokens.update(f"field/{name}.{f['step']}/{_domain_token(f)}" for f in form["fields"])
    return frozenset(tokens)


def transition_tokens(spec: Spec) -> frozenset[str]:
    """Declared semantics plus the probe's behaviour classes, e.g. ``cart:add``."""
    *_, behaviour = _structure_signatures(canonical_json(_structure(spec)))
    tokens = {f"declared/{name}={spec['semantics'][name]}" for name in SEMANTICS}
    tokens.update(behaviour)
    return frozenset(tokens)
