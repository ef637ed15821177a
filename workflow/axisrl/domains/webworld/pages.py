"""What a page of a site shows: the page as the JSON an agent reads and what it offers (``View``).

``page_view`` renders the page a state is on in the world's own names: its links, the fields of a
form step (or the item page's quantity), its buttons, the filters a results listing offers, and the
facts an item page states (what ``finish`` may report). The engine (``engine``) takes a call only
against the view of the current page: a link, field or button the page does not show is refused.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from axisrl.domains.webworld.engine import FORM_PAGES, Attribute, Button, FormField, Link, Page, Site, State, View


def _field_json(f: FormField, value: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": f.name}
    if f.type == "text":
        out.update(kind="text", value=value)
    elif f.type == "int":
        out.update(kind="number", min=f.low, max=f.high, value=value)
    else:
        out.update(kind="choice", options=list(f.words), value=None if value is None else f.words[value])
    return out


def _lines_json(site: Site, cart: list[list[int]]) -> list[dict[str, Any]]:
    return [{"title": site.items[i].title, "href": site.items[i].href, site.noun["quantity"]: q} for i, q in cart]


def page_view(site: Site, state: State) -> View:
    """The page ``state`` is on: its JSON and what it offers (see the module docstring)."""
    page, names = state.page, site.page_name
    home = Link(names["home"], "/", Page("home"))
    cart = Link(names["cart"], f"/{names['cart']}", Page("cart"))
    obs: dict[str, Any] = {"page": names[page.kind]}
    links: list[Link] = []
    buttons: list[Button] = []
    fields: tuple[FormField, ...] = ()
    filters: list[tuple[Attribute, int]] = []
    facts: tuple[str, ...] = ()
    searchable = page.kind in ("home", "results")
    if page.kind == "home":
        if site.browse is not None:
            b = site.browse
            links += [
                Link(word, f"/{names['results']}?{b.name}={word}", Page("results", filters=((b.sym, k),)))
                for k, word in enumerate(b.words)
            ]
        links.append(cart)
        if "register" in site.forms:
            links.append(Link(names["register"], f"/{names['register']}", Page("register", form="register")))
    elif page.kind == "results":
        ids = site.results(page.terms, page.filters)
        start = (page.number - 1) * site.page_size
        shown = ids[start : start + site.page_size]
        obs.update(
            query=" ".join(page.terms),
            filters={site.attribute[s].name: site.attribute[s].words[v] for s, v in page.filters},
            count=len(ids),
            number=page.number,
            results=[
                {
                    "title": site.items[i].title,
                    "href": site.items[i].href,
                    **{a.name: a.words[site.items[i].values[a.sym]] for a in site.enums},
                }
                for i in shown
            ],
        )
        links += [Link(site.items[i].title, site.items[i].href, Page("item", item=i)) for i in shown]
        links += [home, cart]
        if start + site.page_size < len(ids):
            more = replace(page, number=page.number + 1)
            links.append(Link(str(more.number), site.results_href(more), more))
        if "filter" in site.tools:
            active = set(page.filters)
            for a in site.enums:
                present = sorted({site.items[i].values[a.sym] for i in ids})
                filters += [(a, v) for v in present if (a.sym, v) not in active]
    elif page.kind == "item":
        item = site.items[page.item]
        shown_values = {
            a.name: a.words[item.values[a.sym]] if a.type == "enum" else item.values[a.sym] for a in site.attributes
        }
        obs.update({site.noun["title"]: item.title, "id": item.label, "attributes": shown_values})
        fields = (site.quantity,)
        buttons.append(Button(site.button["add"], "add", item.id))
        links += [home, cart]
        if state.last_results is not None:
            links.append(Link(names["results"], site.results_href(state.last_results), state.last_results))
        facts = (item.title, *(str(v) for v in shown_values.values()))
    elif page.kind == "cart":
        obs["lines"] = _lines_json(site, state.cart)
        links += [Link(site.items[i].title, site.items[i].href, Page("item", item=i)) for i, _ in state.cart]
        links.append(home)
        buttons += [Button(f"{site.button['remove']} {site.items[i].title}", "remove", i) for i, _ in state.cart]
        if state.cart:
            buttons.append(Button(site.button["checkout"], "checkout"))
    elif page.kind in FORM_PAGES:
        steps = site.forms[page.form]
        fields = steps[page.step]
        obs.update(step=page.step + 1, steps=len(steps))
        last = page.step == len(steps) - 1
        if not last:
            buttons.append(Button(site.button["next"], "next"))
        elif "submit" not in site.tools:
            buttons.append(Button(site.button["submit"], "submit"))
        links.append(cart if page.form == "checkout" else home)
    elif page.kind == "review":
        obs["lines"] = _lines_json(site, state.cart)
        draft = state.drafts.get("checkout", {})
        obs["details"] = {
            f.name: _field_json(f, draft.get(f.sym))["value"] for steps in site.forms["checkout"] for f in steps
        }
        buttons.append(Button(site.button["place"], "place"))
        links.append(cart)
    elif page.kind == "confirm":
        obs[site.noun["order"]] = site.render_id("order", 100 + len(state.orders))
        links.append(home)
    else:  # registered
        links.append(home)
    if fields:
        draft = state.drafts.get(page.form or "", {})
        obs["fields"] = [_field_json(f, state.quantity if f.form == "item" else draft.get(f.sym)) for f in fields]
    obs["links"] = [{"text": link.text, "href": link.href} for link in links]
    if buttons:
        obs["buttons"] = [b.label for b in buttons]
    if searchable:
        obs["search"] = True
    if filters:
        obs["filter_options"] = {
            a.name: [a.words[v] for b, v in filters if b is a] for a in site.enums if any(b is a for b, _ in filters)
        }
    return View(obs, tuple(links), fields, tuple(buttons), tuple(filters), searchable, facts)
