"""webworld's compact view: how its tools, goals and pages read in the shared vocabulary.

``WebLexicon`` is the ``axisrl.domains.callview.Lexicon`` of webworld and ``compact_view`` the
domain's ``ViewFactory`` (``CallView`` over ``WebworldEnv.candidates``). Every site word (a tool,
a page, an attribute, a value, a title, an href) reaches a token only through the episode's
``Namer``, so a re-skinned site renders identically.

Symbols, by the role a string plays (the kind its candidate arguments are named with):

* ``E``: an href (``open``'s argument) and the order number a confirmation shows;
* ``F``: a selector: an attribute (``filter``'s first argument), a form field (``type``/``select``),
  a button label (``click``), the item page's title and quantity nouns;
* ``V``: a value: a search query, an enum word (``filter``/``select``), a typed text, a title, a link
  text, a fact ``finish`` may report; integers are ``#n`` wherever they appear;
* ``T``: a page name (the page an observation shows).

Tools (descriptors ``[access, return kind, semantics]``, parameters by kind):

=========  ====  =========  ===================================================  ==============
verb       acc.  returns    semantics                                            parameters
=========  ====  =========  ===================================================  ==============
open       R     ret:row    sem:-                                                id
back       R     ret:row    sem:-                                                (none)
search     R     ret:list   sem:hard (all words match) / sem:soft (any word)     key
filter     R     ret:list   sem:add (narrows the active filters) / sem:set       sel, enum
type       W     ret:ack    sem:set                                              sel, val
select     W     ret:ack    sem:set                                              sel, enum
click      W     ret:id     sem:add (adding to the cart adds) / sem:set          sel
submit     W     ret:id     sem:guard (a review page follows) / sem:free         (none)
finish     R     ret:-      sem:end                                              answer
=========  ====  =========  ===================================================  ==============

Goal clauses (see ``WebLexicon.goal``): the constraints naming the target item
``["ask_find", F(attribute), "eq"|"lt"|"gt", V(word)|#n]``; each search the task offers that is not
a single constraint word ``["ref", "key"|"sel", V(query)]`` (``sel``: it holds ``attribute:value``
terms); each form value to enter ``["eq", F(field), V(value)|#n]`` (the item's quantity too); and
what to do: ``["exists", "ent"]`` place an order (``["eq", "count", "#1"]``: holding nothing but
the target), ``["exists", "field"]`` submit the registration form, ``["ask", F(attribute)]`` report
an attribute, ``["ask_aggregate", F(attribute), "lt"|"gt", F(title)]`` report the title of the item
with the lowest (``lt``) or highest (``gt``) value, and ``["absent", "W"]`` for a question (no order
or submission may be made). The goal JSON names the target item but neither the constraints the
instruction states nor a compare task's attribute and direction: those are read from the templated
instruction, in the site's own names (``constraints``).

Observation pairs (at most ``MAX_PAIRS``, most useful first; see ``WebLexicon.observation``): the
page ``["ent", T(page)]``; on a results page the total ``["count", #n]``, each result's
``[E(href), V(title)]``, the next page's ``[E(href), #n]``, the enum values all shown results share
``[F(attribute), V(word)]`` and those they differ in ``[E(href), V(word)]``; on an item page
``["id", E(href)]``, ``[F(title), V(title)]`` and ``[F(attribute), V(word)|#n]`` (the facts
``finish`` may report) and its quantity field; on a form page each field ``[F(field), V|#n|"null"]``;
on the cart and the review page each line ``[E(href), #quantity]`` and ``[E(href), V(title)]``, each
remove button ``[F(button), E(href)]``; on the review page the entered details; on a confirmation
``["id", E(order)]``; buttons ``["sel", F(button)]``; then the remaining links ``[E(href), V(text)]``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from axisrl.domains.callview import FINISH_SHAPE, CallView, Namer, ToolShape
from axisrl.domains.webworld.engine import Site, parse_goal

MAX_PAIRS = 16
"""Observation pairs shown per step (the most useful first)."""

_PARAM_KINDS: dict[str, tuple[tuple[str, str], ...]] = {
    "open": (("href", "id"),),
    "search": (("query", "key"),),
    "filter": (("attribute", "sel"), ("value", "enum")),
    "type": (("field", "sel"), ("text", "val")),
    "select": (("field", "sel"), ("option", "enum")),
    "click": (("button", "sel"),),
    "submit": (),
    "back": (),
}
"""Each verb's parameters (``engine.VERB_PARAMS`` order) with the parameter kind its arguments take."""


def _descriptor(site: Site, verb: str) -> tuple[str, str, str]:
    """``[access, return kind, semantics]`` of a verb on ``site`` (see the module docstring)."""
    semantics = site.semantics
    if verb in ("open", "back"):
        return ("R", "ret:row", "sem:-")
    if verb == "search":
        return ("R", "ret:list", "sem:hard" if semantics["search_match"] == "all" else "sem:soft")
    if verb == "filter":
        return ("R", "ret:list", "sem:add" if semantics["filter_mode"] == "narrow" else "sem:set")
    if verb in ("type", "select"):
        return ("W", "ret:ack", "sem:set")
    if verb == "click":
        return ("W", "ret:id", "sem:add" if semantics["cart_add"] == "increment" else "sem:set")
    return ("W", "ret:id", "sem:guard" if semantics["review"] else "sem:free")  # submit


_LOOKUPS: dict[int, tuple[Site, dict[str, str], dict[str, str]]] = {}


def _lookups(site: Site) -> tuple[dict[str, str], dict[str, str]]:
    """Per site (cached while it lives): page name -> page kind, item label -> item href."""
    hit = _LOOKUPS.get(id(site))
    if hit is None or hit[0] is not site:
        kinds = {name: kind for kind, name in site.page_name.items()}
        hrefs = {item.label: item.href for item in site.items.values()}
        if len(_LOOKUPS) >= 256:
            del _LOOKUPS[next(iter(_LOOKUPS))]
        hit = _LOOKUPS[id(site)] = (site, kinds, hrefs)
    return hit[1], hit[2]


def constraints(site: Site, instruction: str, goal: Mapping[str, Any]) -> list[tuple[str, str, Any]]:
    """The ``(attribute symbol, op, value)`` constraints that name the task's item, in the order the
    instruction states them (``op``: ``eq`` with an enum word, ``lt``/``gt`` with an integer bound).
    Read from the templated instruction (``tasks.Constraint.phrase``) in the site's own names; where
    it states none, the enum constraints behind the task's single-word searches."""
    _, _, clause = instruction.partition(" whose ")
    by_name = {a.name: a for a in site.attributes}
    out: list[tuple[str, str, Any]] = []
    if clause and by_name:
        names = "|".join(re.escape(name) for name in sorted(by_name, key=len, reverse=True))
        pattern = rf"(?<![\w:])({names}) is (?:(under|over) (-?\d+)\b|([^\s,.?:]+)(?=,|\.|\?| and |$))"
        for match in re.finditer(pattern, clause):
            a = by_name[match.group(1)]
            if match.group(2) and a.type == "int":
                out.append((a.sym, "lt" if match.group(2) == "under" else "gt", int(match.group(3))))
            elif match.group(4) and a.type == "enum" and match.group(4) in a.words:
                out.append((a.sym, "eq", match.group(4)))
    if not out:
        for query in goal.get("offers", {}).get("queries", ()):
            a = next((a for a in site.enums if query in a.words), None)
            if a is not None and " " not in query:
                out.append((a.sym, "eq", query))
    return out


def _asked_extreme(site: Site, instruction: str) -> tuple[str, str] | None:
    """A compare task's ``(attribute symbol, lt|gt)``: the lowest or highest value it asks for."""
    by_name = {a.name: a for a in site.attributes if a.type == "int"}
    if not by_name:
        return None
    names = "|".join(re.escape(name) for name in sorted(by_name, key=len, reverse=True))
    match = re.search(rf"which has the (lowest|highest) ({names})\?", instruction)
    if match is None:
        return None
    return by_name[match.group(2)].sym, "lt" if match.group(1) == "lowest" else "gt"


class WebLexicon:
    """webworld's ``Lexicon`` (stateless: one instance serves every episode)."""

    def tools(self, env: Any) -> Sequence[ToolShape]:
        site: Site = env.site
        shapes = [
            ToolShape(
                site.tool_name[verb],
                _descriptor(site, verb),
                tuple((site.param[param], kind) for param, kind in _PARAM_KINDS[verb]),
                verb,
            )
            for verb in site.tools
        ]
        return [*shapes, FINISH_SHAPE]

    def goal(self, env: Any, task: Mapping[str, Any], name: Namer) -> list[list[str]]:
        site: Site = env.site
        goal = parse_goal(task["goal"]) if isinstance(task["goal"], str) else task["goal"]
        instruction = task.get("instruction", "")
        kind = goal["kind"]
        clauses: list[list[str]] = []
        if kind in ("buy", "lookup", "compare"):
            stated = constraints(site, instruction, goal)
            for sym, op, value in stated:
                clauses.append(["ask_find", name(site.attribute[sym].name, "F"), op, name(value, "V")])
            words = {value for _, op, value in stated if op == "eq"}  # their searches: the clauses above
            for query in goal.get("offers", {}).get("queries", ()):
                if query not in words:
                    clauses.append(["ref", "sel" if ":" in query else "key", name(query, "V")])
        if kind == "buy":
            clauses.append(["eq", name(site.quantity.name, "F"), name(goal["quantity"], "V")])
        values = goal.get("fields", {})
        for f in site.form_field.values():  # in the order the form asks for them
            if f.sym in values:
                shown = f.words[values[f.sym]] if f.type == "enum" else values[f.sym]
                clauses.append(["eq", name(f.name, "F"), name(shown, "V")])
        if kind == "buy":
            clauses.append(["exists", "ent"])
            if site.verifier["strict_cart"]:
                clauses.append(["eq", "count", name(1, "V")])
        elif kind == "register":
            clauses.append(["exists", "field"])
        elif kind == "lookup":
            asked = goal["attribute"]
            noun = site.noun["title"] if asked == "title" else site.attribute[asked].name
            clauses += [["ask", name(noun, "F")], ["absent", "W"]]
        else:  # compare: the title of the item with the lowest or highest value
            extreme = _asked_extreme(site, instruction)
            title = name(site.noun["title"], "F")
            if extreme is None:
                clauses.append(["ask", title])
            else:
                clauses.append(["ask_aggregate", name(site.attribute[extreme[0]].name, "F"), extreme[1], title])
            clauses.append(["absent", "W"])
        return clauses

    def observation(
        self, env: Any, call: Mapping[str, Any], observation: Mapping[str, Any], name: Namer
    ) -> list[list[str]]:
        site: Site = env.site
        kinds, hrefs = _lookups(site)
        page = observation.get("page")
        if not isinstance(page, str):
            return [["err", "-"]]
        kind = kinds.get(page)
        links = [link for link in observation.get("links", ()) if isinstance(link, Mapping) and "href" in link]
        buttons = [b for b in observation.get("buttons", ()) if isinstance(b, str)]
        # parts: a structural word, or (text, symbol kind); a value (kind "V") of None reads "null"
        pairs: list[tuple[Any, Any]] = [("ent", (page, "T"))]
        shown: set[str] = set()  # hrefs already paired with their text, button labels already shown
        if kind == "results":
            pairs.append(("count", (observation.get("count", 0), "V")))
            results = [r for r in observation.get("results", ()) if isinstance(r, Mapping) and "href" in r]
            for r in results:
                pairs.append(((r["href"], "E"), (r.get("title"), "V")))
                shown.add(r["href"])
            for link in links:
                if str(link.get("text", "")).isdigit():  # the next page
                    pairs.append(((link["href"], "E"), (link["text"], "V")))
                    shown.add(link["href"])
            varying = []
            for a in site.enums:
                values = [r.get(a.name) for r in results]
                if not values or values[0] is None:
                    continue
                if len(set(values)) == 1:
                    pairs.append(((a.name, "F"), (values[0], "V")))
                else:
                    varying.append(a.name)
            pairs += [((r["href"], "E"), (r.get(attribute), "V")) for r in results for attribute in varying]
        elif kind == "item":
            label = observation.get("id")
            if label in hrefs:
                pairs.append(("id", (hrefs[label], "E")))
            title = site.noun["title"]
            pairs.append(((title, "F"), (observation.get(title), "V")))
            attributes = observation.get("attributes", {})
            pairs += [((k, "F"), (v, "V")) for k, v in attributes.items()]
        elif kind in ("cart", "review"):
            quantity = site.noun["quantity"]
            lines = [line for line in observation.get("lines", ()) if isinstance(line, Mapping) and "href" in line]
            for line in lines:
                pairs.append(((line["href"], "E"), (line.get(quantity), "V")))
                pairs.append(((line["href"], "E"), (line.get("title"), "V")))
                shown.add(line["href"])
            by_title = {line.get("title"): line["href"] for line in lines}
            prefix = site.button["remove"] + " "
            for label in buttons:
                if label.startswith(prefix) and label[len(prefix) :] in by_title:
                    pairs.append(((label, "F"), (by_title[label[len(prefix) :]], "E")))
                    shown.add(label)
            pairs += [((k, "F"), (v, "V")) for k, v in observation.get("details", {}).items()]
        elif kind == "confirm":
            order = observation.get(site.noun["order"])
            if order is not None:
                pairs.append(("id", (order, "E")))
        pairs += [((f["name"], "F"), (f.get("value"), "V")) for f in observation.get("fields", ()) if "name" in f]
        pairs += [("sel", (label, "F")) for label in buttons if label not in shown]
        pairs += [((link["href"], "E"), (link.get("text"), "V")) for link in links if link["href"] not in shown]

        def token(part: Any) -> str:
            if isinstance(part, str):
                return part
            text, symbol = part
            return "null" if text is None else name(text, symbol)

        return [[token(key), token(value)] for key, value in pairs[:MAX_PAIRS]]


LEXICON = WebLexicon()
compact_view = CallView.factory(LEXICON)
"""The domain's ``ViewFactory``: ``compact_view(spec, task, episode_seed, env)``."""

__all__ = ["LEXICON", "MAX_PAIRS", "WebLexicon", "compact_view", "constraints"]
