"""The compiled form of a spec: a site's records and state, the calls legal on a page, and what each tool call does.

Two layers, as in toolworld. Internally a page is a small frozen record (its kind, the search terms
and filters behind a results listing, the item shown, the form and step), items are integer ids and
attribute values are indices; the state is the page, the history, the cart, the form drafts and the
orders and submissions placed so far. The surface layer (``View``, rendered by ``pages``) is the
current page as the JSON an agent reads, with the links, fields, buttons and filters it offers in the
world's own names; ``Site.execute`` takes a call against it, so a call may only follow a link, fill a
field or press a button that the current page shows, and ``Site.candidates`` lists those calls.

Verification (``check``) reads only the final state and the answer: the orders and form submissions
placed and what ``finish`` reported, never the path to them.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from axisrl.domains.toolworld.model import FINISH, CallError, answer_matches, normalize_answer
from axisrl.domains.webworld.site import PAGES, PARAMS, QUANTITY_RANGE, VERBS, Spec

FORM_PAGES = frozenset({"checkout", "register"})
MAX_TEXT_CHARS = 80
VERB_PARAMS = {
    "open": ("href",),
    "search": ("query",),
    "filter": ("attribute", "value"),
    "type": ("field", "text"),
    "select": ("field", "option"),
    "click": ("button",),
    "submit": (),
    "back": (),
}
"""Each tool's parameters (all required)."""


@dataclass(frozen=True, slots=True)
class Attribute:
    """A catalogue attribute: an enum (``words`` its domain) or an integer in ``[low, high]``."""

    sym: str
    type: str
    name: str
    size: int = 0
    low: int = 0
    high: int = 0
    words: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class FormField(Attribute):
    """A typed field of a form step (or the item page's quantity field, form ``item``): an attribute's
    type and domain, placed on a form."""

    form: str = ""
    step: int = 0


@dataclass(frozen=True, slots=True)
class Item:
    id: int
    title: str
    values: Mapping[str, int]
    terms: frozenset[str]
    """What a plain search word can match: the title and the item's enum value words (casefolded)."""
    href: str
    label: str
    """The rendered id, in the world's ID format."""


@dataclass(frozen=True, slots=True)
class Page:
    """Where the agent is: ``kind`` (one of ``PAGES``) and what that page shows."""

    kind: str
    terms: tuple[str, ...] = ()
    filters: tuple[tuple[str, int], ...] = ()
    number: int = 1
    item: int | None = None
    form: str | None = None
    step: int = 0


@dataclass(frozen=True, slots=True)
class Link:
    text: str
    href: str
    target: Page


@dataclass(frozen=True, slots=True)
class Button:
    label: str
    action: str
    item: int | None = None


@dataclass(frozen=True, slots=True)
class View:
    """The current page as an agent sees it (``observation``) and the affordances it offers."""

    observation: dict[str, Any]
    links: tuple[Link, ...] = ()
    fields: tuple[FormField, ...] = ()
    buttons: tuple[Button, ...] = ()
    filters: tuple[tuple[Attribute, int], ...] = ()
    searchable: bool = False
    facts: tuple[str, ...] = ()
    """Values the page states about one item (its title and attributes): what ``finish`` may report."""


@dataclass
class State:
    """One episode's mutable state. Orders and submissions are never modified once placed."""

    page: Page
    history: list[Page] = field(default_factory=list)
    last_results: Page | None = None
    cart: list[list[int]] = field(default_factory=list)
    drafts: dict[str, dict[str, Any]] = field(default_factory=dict)
    quantity: int = 1
    orders: list[dict[str, Any]] = field(default_factory=list)
    submissions: list[dict[str, Any]] = field(default_factory=list)

    def copy(self) -> State:
        return State(
            self.page,
            list(self.history),
            self.last_results,
            [list(line) for line in self.cart],
            {form: dict(values) for form, values in self.drafts.items()},
            self.quantity,
            list(self.orders),
            list(self.submissions),
        )


def _typed(kind: type[Attribute], row: Mapping[str, Any], lex: Mapping[str, str], **placed: Any) -> Any:
    """An attribute (or a form field, ``placed`` on its form) from its spec row, in the lexicon's words."""
    size = row.get("size", 0)
    words = tuple(lex[f"{row['sym']}.v{k}"] for k in range(size))
    return kind(row["sym"], row["type"], lex[row["sym"]], size, row.get("low", 0), row.get("high", 0), words, **placed)


class Site:
    """A spec compiled for execution. Treat it (and the spec it came from) as immutable."""

    def __init__(self, spec: Spec) -> None:
        lex = spec["lexicon"]
        self.spec = spec
        self.family: str = spec["family"]
        self.pool: str = spec["pool"]
        self.max_steps: int = spec["max_steps"]
        self.semantics: Mapping[str, Any] = spec["semantics"]
        self.verifier: Mapping[str, Any] = spec["verifier"]
        api = spec["api"]
        self.tools: tuple[str, ...] = tuple(v for v in VERBS if v in api["tools"])
        self.tool_name = {v: lex[f"verb:{v}"] for v in self.tools}
        self.verb_of = {name: v for v, name in self.tool_name.items()}
        self.param = {p: lex[f"param:{p}"] for p in PARAMS}
        self.page_name = {p: lex[f"page:{p}"] for p in PAGES}
        self.button = {b: lex[f"button:{b}"] for b in ("add", "remove", "checkout", "next", "submit", "place")}
        self.noun = {n: lex[f"noun:{n}"] for n in ("item", "order", "title", "quantity")}
        self.page_size: int = api["page_size"]

        self.attributes = tuple(_typed(Attribute, a, lex) for a in spec["attributes"])
        self.attribute = {a.sym: a for a in self.attributes}
        self.enums = tuple(a for a in self.attributes if a.type == "enum")
        self.enum_by_name = {a.name: a for a in self.enums}
        self.browse: Attribute | None = self.attribute[api["browse"]] if api["browse"] else None

        self.forms: dict[str, tuple[tuple[FormField, ...], ...]] = {}
        for name, form in spec["forms"].items():
            fields = [_typed(FormField, f, lex, form=name, step=f["step"]) for f in form["fields"]]
            self.forms[name] = tuple(tuple(f for f in fields if f.step == s) for s in range(form["steps"]))
        self.form_field = {f.sym: f for steps in self.forms.values() for fields in steps for f in fields}
        self.quantity = FormField("qty", "int", self.noun["quantity"], 0, *QUANTITY_RANGE, form="item")

        fmt = spec["id_format"]
        self._id_digits = f"0{fmt['width']}{'d' if fmt['radix'] == 10 else ('X' if fmt['upper'] else 'x')}"
        self._id_prefix = {kind: fmt["prefix"][kind] + fmt["separator"] for kind in ("item", "order")}
        self.items: dict[int, Item] = {}
        for ident, row in spec["items"]:
            values = {a.sym: row[a.sym] for a in self.attributes}
            terms = frozenset({row["title"].casefold()} | {a.words[values[a.sym]] for a in self.enums})
            label = self.render_id("item", ident)
            self.items[ident] = Item(ident, row["title"], values, terms, f"/{self.noun['item']}/{label}", label)
        self.item_ids = tuple(sorted(self.items))
        self.initial_cart = tuple((ident, quantity) for ident, quantity in spec["cart"])
        self._results: dict[tuple, tuple[int, ...]] = {}

    # ------------------------------------------------------------------------------- surface

    def render_id(self, kind: str, number: int) -> str:
        return f"{self._id_prefix[kind]}{number:{self._id_digits}}"

    def call(self, verb: str, **arguments: Any) -> dict[str, Any]:
        """A tool call in the world's names, e.g. ``call("open", href="/")``."""
        return {"name": self.tool_name[verb], "arguments": {self.param[p]: v for p, v in arguments.items()}}

    def entry(self, f: FormField, value: Any) -> dict[str, Any]:
        """The call that enters ``value`` (an option index for a choice) into field ``f``: a choice
        is selected where the site has ``select``, else typed; anything else is typed as text."""
        if f.type != "enum":
            return self.call("type", field=f.name, text=str(value))
        if "select" in self.tools:
            return self.call("select", field=f.name, option=f.words[value])
        return self.call("type", field=f.name, text=f.words[value])

    def form_calls(self, form: str, values: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The calls that fill every step of ``form`` with ``values`` (by field symbol) and submit it."""
        calls = []
        steps = self.forms[form]
        for s, fields in enumerate(steps):
            calls += [self.entry(f, values[f.sym]) for f in fields]
            if s < len(steps) - 1:
                calls.append(self.call("click", button=self.button["next"]))
            elif "submit" in self.tools:
                calls.append(self.call("submit"))
            else:
                calls.append(self.call("click", button=self.button["submit"]))
        return calls

    def vocabulary(self) -> list[str]:
        """Every surface word an agent sees: the lexicon and the catalogue's titles."""
        return sorted(set(self.spec["lexicon"].values()) | {item.title for item in self.items.values()})

    def initial_state(self) -> State:
        return State(Page("home"), cart=[list(line) for line in self.initial_cart])

    def results(self, terms: tuple[str, ...], filters: tuple[tuple[str, int], ...]) -> tuple[int, ...]:
        """Item ids a listing shows, in order: filters hold; with ``all`` every term matches (id
        order), with ``any`` at least one (most matches first, then id)."""
        key = (terms, filters)
        hit = self._results.get(key)
        if hit is not None:
            return hit
        ids = [i for i in self.item_ids if all(self.items[i].values[s] == v for s, v in filters)]
        if terms:
            if self.semantics["search_match"] == "all":
                ids = [i for i in ids if all(t in self.items[i].terms for t in terms)]
            else:
                scored = [(-sum(t in self.items[i].terms for t in terms), i) for i in ids]
                ids = [i for score, i in sorted(scored) if score < 0]
        out = tuple(ids)
        self._results[key] = out
        return out

    def results_href(self, page: Page) -> str:
        return f"/{self.page_name['results']}/{page.number}"

    # ------------------------------------------------------------------------------- candidates

    def is_last_step(self, page: Page) -> bool:
        return page.kind in FORM_PAGES and page.step == len(self.forms[page.form]) - 1

    def candidates(self, state: State, view: View, offers: Mapping[str, list]) -> list[dict[str, Any]]:
        """Every call legal on the current page, in a fixed order: links, the task's searches,
        filters, a value for each field (the task's texts and numbers, a choice's options),
        buttons, submit, back, then ``finish`` (plain, and reporting each fact the page states)."""
        out = [self.call("open", href=link.href) for link in view.links]
        if view.searchable:
            out += [self.call("search", query=q) for q in offers.get("queries", ())]
        out += [self.call("filter", attribute=a.name, value=a.words[v]) for a, v in view.filters]
        for f in view.fields:
            if f.type == "enum":
                out += [self.entry(f, k) for k in range(f.size)]
            elif f.type == "text":
                out += [self.call("type", field=f.name, text=text) for text in offers.get("texts", ())]
            else:
                out += [
                    self.call("type", field=f.name, text=str(n))
                    for n in offers.get("numbers", ())
                    if f.low <= n <= f.high
                ]
        out += [self.call("click", button=b.label) for b in view.buttons]
        if "submit" in self.tools and self.is_last_step(state.page):
            out.append(self.call("submit"))
        if "back" in self.tools and state.history:
            out.append(self.call("back"))
        out.append({"name": FINISH, "arguments": {}})
        out += [{"name": FINISH, "arguments": {"answer": fact}} for fact in dict.fromkeys(view.facts)]
        return out

    # ------------------------------------------------------------------------------- execution

    def _argument(self, verb: str, arguments: Mapping[str, Any], param: str) -> Any:
        name = self.param[param]
        if name not in arguments:
            raise CallError("missing_argument", f"{self.tool_name[verb]} needs {name}")
        return arguments[name]

    def _text(self, verb: str, arguments: Mapping[str, Any], param: str) -> str:
        value = self._argument(verb, arguments, param)
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise CallError("bad_value", f"{self.param[param]} must be text")
        return str(value).strip()

    def execute(self, state: State, view: View, call: Mapping[str, Any], arguments: Mapping[str, Any]) -> None:
        """Apply one call (arguments already parsed) to ``state``; a rejected call raises
        ``CallError`` and changes nothing."""
        verb = self.verb_of.get(call.get("name")) if isinstance(call.get("name"), str) else None
        if verb is None:
            raise CallError("unknown_tool", f"unknown tool {call.get('name')!r}")
        allowed = {self.param[p] for p in VERB_PARAMS[verb]}
        unknown = sorted(set(arguments) - allowed)
        if unknown:
            raise CallError("unknown_argument", f"{self.tool_name[verb]} takes no argument {unknown[0]!r}")
        getattr(self, f"_do_{verb}")(state, view, arguments)

    def _go(self, state: State, page: Page) -> None:
        state.history.append(state.page)
        if page.kind == "item" and page != state.page:
            state.quantity = 1
        if page.kind == "results":
            state.last_results = page
        state.page = page

    def _do_open(self, state: State, view: View, arguments: Mapping[str, Any]) -> None:
        href = self._text("open", arguments, "href")
        link = next((link for link in view.links if link.href == href), None)
        if link is None:
            raise CallError("no_link", f"this page has no link {href!r}")
        self._go(state, link.target)

    def parse_query(self, query: str) -> tuple[tuple[str, ...], tuple[tuple[str, int], ...]]:
        """Plain words, and ``attribute:value`` terms where the site has no filter tool."""
        terms: list[str] = []
        filters: dict[str, int] = {}
        for word in query.split():
            if "filter" not in self.tools and ":" in word:
                name, _, value = word.partition(":")
                attribute = self.enum_by_name.get(name.casefold())
                if attribute is None:
                    raise CallError("bad_query", f"no attribute {name!r} to search by")
                if value.casefold() not in attribute.words:
                    raise CallError("bad_query", f"{attribute.name} has no value {value!r}")
                filters[attribute.sym] = attribute.words.index(value.casefold())
            elif word.casefold() not in terms:
                terms.append(word.casefold())
        order = [a.sym for a in self.attributes]
        return tuple(terms), tuple(sorted(filters.items(), key=lambda sv: order.index(sv[0])))

    def _do_search(self, state: State, view: View, arguments: Mapping[str, Any]) -> None:
        if not view.searchable:
            raise CallError("no_search", "this page has no search box")
        terms, filters = self.parse_query(self._text("search", arguments, "query"))
        self._go(state, Page("results", terms, filters))

    def _do_filter(self, state: State, view: View, arguments: Mapping[str, Any]) -> None:
        page = state.page
        if page.kind != "results":
            raise CallError("no_filter", "only a results page can be filtered")
        name = self._text("filter", arguments, "attribute")
        attribute = self.enum_by_name.get(name.casefold())
        if attribute is None:
            raise CallError("bad_filter", f"no attribute {name!r} to filter by")
        value = self._text("filter", arguments, "value").casefold()
        if value not in attribute.words:
            raise CallError("bad_filter", f"{attribute.name} has no value {value!r}")
        chosen = (attribute.sym, attribute.words.index(value))
        if self.semantics["filter_mode"] == "narrow":
            order = [a.sym for a in self.attributes]
            merged = dict(page.filters) | {chosen[0]: chosen[1]}
            filters = tuple(sorted(merged.items(), key=lambda sv: order.index(sv[0])))
        else:
            filters = (chosen,)
        self._go(state, Page("results", page.terms, filters))

    def _field(self, verb: str, view: View, arguments: Mapping[str, Any]) -> FormField:
        name = self._text(verb, arguments, "field")
        f = next((f for f in view.fields if f.name == name), None)
        if f is None:
            raise CallError("no_field", f"this page has no field {name!r}")
        return f

    def _store(self, state: State, f: FormField, value: Any) -> None:
        if f.form == "item":
            state.quantity = value
        else:
            state.drafts.setdefault(f.form, {})[f.sym] = value

    def _do_type(self, state: State, view: View, arguments: Mapping[str, Any]) -> None:
        f = self._field("type", view, arguments)
        text = self._text("type", arguments, "text")
        if f.type == "enum":
            if "select" in self.tools:
                raise CallError("use_select", f"choose {f.name} with {self.tool_name['select']}")
            if text.casefold() not in f.words:
                raise CallError("bad_value", f"{f.name} must be one of {', '.join(f.words)}")
            value: Any = f.words.index(text.casefold())
        elif f.type == "int":
            try:
                value = int(text)
            except ValueError:
                raise CallError("bad_value", f"{f.name} must be a whole number") from None
            if not f.low <= value <= f.high:
                raise CallError("bad_value", f"{f.name} must lie between {f.low} and {f.high}")
        else:
            if not text or len(text) > MAX_TEXT_CHARS:
                raise CallError("bad_value", f"{f.name} must be 1 to {MAX_TEXT_CHARS} characters")
            value = text
        self._store(state, f, value)

    def _do_select(self, state: State, view: View, arguments: Mapping[str, Any]) -> None:
        f = self._field("select", view, arguments)
        if f.type != "enum":
            raise CallError("not_a_choice", f"{f.name} is not a choice; type it")
        option = self._text("select", arguments, "option").casefold()
        if option not in f.words:
            raise CallError("bad_value", f"{f.name} has no option {option!r}")
        self._store(state, f, f.words.index(option))

    def _do_click(self, state: State, view: View, arguments: Mapping[str, Any]) -> None:
        label = self._text("click", arguments, "button")
        button = next((b for b in view.buttons if b.label == label), None)
        if button is None:
            raise CallError("no_button", f"this page has no button {label!r}")
        if button.action == "add":
            line = next((line for line in state.cart if line[0] == button.item), None)
            if line is None:
                state.cart.append([button.item, state.quantity])
            elif self.semantics["cart_add"] == "increment":
                line[1] += state.quantity
            else:
                line[1] = state.quantity
            self._go(state, Page("cart"))
        elif button.action == "remove":
            state.cart[:] = [line for line in state.cart if line[0] != button.item]
        elif button.action == "checkout":
            self._go(state, Page("checkout", form="checkout"))
        elif button.action == "next":
            self._require_filled(state, state.page.form, (state.page.step,))
            self._go(state, replace(state.page, step=state.page.step + 1))
        elif button.action == "submit":
            self._submit(state)
        else:
            self._place(state)

    def _do_submit(self, state: State, view: View, arguments: Mapping[str, Any]) -> None:
        if not self.is_last_step(state.page):
            raise CallError("no_form", "only the last step of a form can be submitted")
        self._submit(state)

    def _do_back(self, state: State, view: View, arguments: Mapping[str, Any]) -> None:
        if not state.history:
            raise CallError("no_history", "there is no page to go back to")
        state.page = state.history.pop()

    def _require_filled(self, state: State, form: str, steps: tuple[int, ...]) -> None:
        draft = state.drafts.get(form, {})
        for s in steps:
            for f in self.forms[form][s]:
                if f.sym not in draft:
                    raise CallError("missing_field", f"{f.name} is required")

    def _submit(self, state: State) -> None:
        form = state.page.form
        self._require_filled(state, form, tuple(range(len(self.forms[form]))))
        if form == "register":
            state.submissions.append(dict(state.drafts.pop("register")))
            self._go(state, Page("registered"))
        elif self.semantics["review"]:
            self._go(state, Page("review"))
        else:
            self._place(state)

    def _place(self, state: State) -> None:
        if not state.cart:
            raise CallError("empty_cart", f"the {self.page_name['cart']} is empty")
        state.orders.append({"lines": [tuple(line) for line in state.cart], "fields": state.drafts.pop("checkout", {})})
        state.cart.clear()
        self._go(state, Page("confirm"))

    # ------------------------------------------------------------------------------- verification

    def _field_matches(self, sym: str, given: Any, expected: Any) -> bool:
        if given is None:
            return False
        if self.form_field[sym].type == "text":
            return normalize_answer(str(given)) == normalize_answer(str(expected))
        return given == expected

    def check(self, goal: Mapping[str, Any], expected: str | None, state: State, answer: Any) -> tuple[int, int]:
        """Subgoals met and total for ``goal`` on the final ``state`` (see ``tasks`` for the goal kinds)."""
        checks: list[bool] = []
        if goal["kind"] == "buy":
            orders = state.orders
            last = orders[-1] if orders else {"lines": [], "fields": {}}
            lines = dict(last["lines"])
            target = goal["item"]
            checks += [len(orders) == 1, target in lines, lines.get(target) == goal["quantity"]]
            if self.verifier["strict_cart"]:
                checks.append(set(lines) == {target})
            checks += [self._field_matches(s, last["fields"].get(s), v) for s, v in goal["fields"].items()]
        elif goal["kind"] == "register":
            submissions = state.submissions
            last = submissions[-1] if submissions else {}
            checks += [len(submissions) == 1, not state.orders]
            checks += [self._field_matches(s, last.get(s), v) for s, v in goal["fields"].items()]
        else:
            checks += [
                answer_matches(answer, expected or "", self.verifier["answer_mode"]),
                not state.orders and not state.submissions,
            ]
        return sum(checks), len(checks)


_CACHE: dict[int, tuple[Spec, Site]] = {}
_CACHE_SIZE = 1024


def compile_site(spec: Spec) -> Site:
    """A (cached) Site for ``spec``. The cache holds the spec object, so its id stays unique."""
    hit = _CACHE.get(id(spec))
    if hit is not None and hit[0] is spec:
        return hit[1]
    site = Site(spec)
    if len(_CACHE) >= _CACHE_SIZE:
        del _CACHE[next(iter(_CACHE))]
    _CACHE[id(spec)] = (spec, site)
    return site


@functools.lru_cache(maxsize=16384)
def parse_goal(text: str) -> Mapping[str, Any]:
    """A goal JSON text parsed once per process (read, never modified)."""
    return json.loads(text)
