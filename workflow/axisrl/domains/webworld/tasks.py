"""Answer-first tasks in the manner of WebShop, kept only if they pass the filter.

Each draft picks its target first, then writes an instruction that determines it:

* ``buy``: an item and a quantity, named by constraints on its attributes (enum values, integer
  bounds) that no other item of the catalogue meets, plus the checkout form's values;
* ``register``: the registration form's values (sites that have one);
* ``lookup``: one attribute of an item named by constraints, reported with ``finish``;
* ``compare``: among the items meeting one or two constraints (two to four of them, all on one
  results page), the title of the one with the lowest or highest value of an integer attribute.

The reference solution is planned on the live site (search with the task's words, filter, page,
open, fill, submit; the shortest of the ways tried), every call taken from ``candidates()``. Its
goal is path-independent (``Site.check``: the order placed, the form submitted, the answer
reported). A draft is kept only if the reference passes while a no-op episode, every proper prefix
of the reference and a wrong-item solution (another item bought, one form value changed, another
item's value reported) fail, and the reference and its ``finish`` fit the step limit.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from axisrl.domains.canon import canonical_json, derive_seed, short_hash
from axisrl.domains.toolworld.lexicon import make_word
from axisrl.domains.toolworld.model import FINISH
from axisrl.domains.webworld.engine import Attribute, FormField, Item, Site, compile_site
from axisrl.domains.webworld.env import WebworldEnv
from axisrl.domains.webworld.site import FAMILIES, Spec

KIND_WEIGHTS = {"buy": 4.0, "register": 2.0, "lookup": 1.0, "compare": 2.0}
MIN_CONSTRAINTS = 2
COMPARE_SIZES = (2, 4)
MAX_QUANTITY = 4


class _Stuck(Exception):
    """A draft whose plan cannot be carried out on the site (it is dropped)."""


@dataclass(frozen=True, slots=True)
class Constraint:
    """``attribute op value`` on an item: ``eq`` an enum index, ``lt``/``gt`` an integer bound."""

    attribute: str
    op: str
    value: int

    def holds(self, item: Item) -> bool:
        actual = item.values[self.attribute]
        return (
            actual == self.value if self.op == "eq" else actual < self.value if self.op == "lt" else actual > self.value
        )

    def phrase(self, site: Site) -> str:
        a = site.attribute[self.attribute]
        if self.op == "eq":
            return f"{a.name} is {a.words[self.value]}"
        return f"{a.name} is {'under' if self.op == 'lt' else 'over'} {self.value}"


@dataclass(frozen=True)
class Draft:
    """A task before the filter: its instruction, goal and answer, its reference plan (``finish``
    excluded), and the wrong-item solution (``finish`` included) that must fail."""

    kind: str
    instruction: str
    goal: dict[str, Any]
    answer: str | None
    plan: list[dict[str, Any]]
    wrong: list[dict[str, Any]]
    skill: list[Any]
    n_distractors: int


class _Planner:
    """Drives an episode from its start; ``strict`` calls must be among ``candidates()`` and succeed."""

    def __init__(self, env: WebworldEnv, strict: bool = True, calls: list[dict[str, Any]] | None = None) -> None:
        self.env = env
        self.strict = strict
        self.calls = calls or []

    def fork(self) -> _Planner:
        return _Planner(self.env.fork(), self.strict, list(self.calls))

    def do(self, call: dict[str, Any]) -> None:
        if self.env.done:
            if self.strict:
                raise _Stuck
            return
        if self.strict and call not in self.env.candidates():
            raise _Stuck
        observation = self.env.step(call).observation
        if self.strict and "error" in observation:
            raise _Stuck
        self.calls.append(call)


# ------------------------------------------------------------------------------------- planning


def _visible(planner: _Planner, wanted: set[str]) -> bool:
    view = planner.env.view()
    return planner.env.state.page.kind == "results" and wanted <= {link.href for link in view.links}


def _route(planner: _Planner, site: Site, wanted: list[int], queries: list[str], constraints: list[Constraint]) -> None:
    """From the home page to a results page that links every ``wanted`` item: each search of the
    task's (or a category link), then the constraints' filters in order while offered, then further
    result pages for a single item; the shortest way that works is taken."""
    hrefs = {site.items[i].href for i in wanted}
    firsts = [site.call("search", query=q) for q in queries]
    if site.browse is not None:
        firsts += [
            site.call("open", href=link.href)
            for c in constraints
            if c.attribute == site.browse.sym
            for link in planner.env.view().links
            if link.target.filters == ((c.attribute, c.value),)
        ]
    enums = [c for c in constraints if c.op == "eq"]
    best: _Planner | None = None
    for first in firsts:
        trial = planner.fork()
        try:
            trial.do(first)
            applied: set[Constraint] = set()
            while not _visible(trial, hrefs):
                view = trial.env.view()
                offered = {(a.sym, v) for a, v in view.filters}
                step = None
                for c in enums:
                    if c not in applied and (c.attribute, c.value) in offered:
                        applied.add(c)
                        a = site.attribute[c.attribute]
                        step = site.call("filter", attribute=a.name, value=a.words[c.value])
                        break
                if step is None and len(wanted) == 1:
                    more = [link for link in view.links if link.target.kind == "results"]
                    step = site.call("open", href=more[0].href) if more else None
                if step is None:
                    raise _Stuck
                trial.do(step)
        except _Stuck:
            continue
        if best is None or len(trial.calls) < len(best.calls):
            best = trial
    if best is None:
        raise _Stuck
    planner.env, planner.calls = best.env, best.calls


def _fill(planner: _Planner, site: Site, form: str, values: Mapping[str, Any]) -> None:
    for call in site.form_calls(form, values):
        planner.do(call)


def _buy(
    planner: _Planner,
    site: Site,
    target: int,
    quantity: int,
    values: Mapping[str, Any],
    queries: list[str],
    constraints: list[Constraint],
) -> None:
    remove = [
        i
        for i, _ in site.initial_cart
        if (i != target and site.verifier["strict_cart"]) or (i == target and site.semantics["cart_add"] == "increment")
    ]
    if remove:
        planner.do(site.call("open", href=f"/{site.page_name['cart']}"))
        for i in remove:
            planner.do(site.call("click", button=f"{site.button['remove']} {site.items[i].title}"))
        planner.do(site.call("open", href="/"))
    _route(planner, site, [target], queries, constraints)
    planner.do(site.call("open", href=site.items[target].href))
    if quantity != 1:
        planner.do(site.call("type", field=site.quantity.name, text=str(quantity)))
    planner.do(site.call("click", button=site.button["add"]))
    planner.do(site.call("click", button=site.button["checkout"]))
    _fill(planner, site, "checkout", values)
    if site.semantics["review"]:
        planner.do(site.call("click", button=site.button["place"]))


# ------------------------------------------------------------------------------------- drafting


def _constraint_for(site: Site, a: Attribute, item: Item, rng: random.Random) -> Constraint:
    value = item.values[a.sym]
    if a.type == "enum":
        return Constraint(a.sym, "eq", value)
    slack = rng.randint(1, max(1, (a.high - a.low) // 8))
    return Constraint(a.sym, "lt", value + slack) if rng.random() < 0.5 else Constraint(a.sym, "gt", value - slack)


def _identify(site: Site, target: Item, rng: random.Random, exclude: str | None = None) -> list[Constraint] | None:
    """Constraints on ``target``'s attributes (an enum first) that no other item meets together, each
    excluding some item of the catalogue, at least ``MIN_CONSTRAINTS`` of them; or None."""
    attributes = [a for a in site.attributes if a.sym != exclude]
    rng.shuffle(attributes)
    first = next((k for k, a in enumerate(attributes) if a.type == "enum"), None)
    if first is None:
        return None
    attributes.insert(0, attributes.pop(first))
    everyone = list(site.items.values())
    matching = everyone
    constraints: list[Constraint] = []
    for a in attributes:
        c = _constraint_for(site, a, target, rng)
        if all(c.holds(item) for item in everyone):
            continue  # "price is over -4" says nothing
        narrowed = [item for item in matching if c.holds(item)]
        if len(narrowed) < len(matching) or len(constraints) < MIN_CONSTRAINTS:
            constraints.append(c)
            matching = narrowed
        if len(matching) == 1 and len(constraints) >= MIN_CONSTRAINTS:
            return constraints
    return None


def _near_miss(site: Site, target: Item, constraints: list[Constraint], differs: Callable[[Item], bool]) -> Item | None:
    """The other item meeting the most constraints (then the lowest id) for which ``differs``."""
    others = [item for item in site.items.values() if item.id != target.id and differs(item)]
    if not others:
        return None
    return max(others, key=lambda item: (sum(c.holds(item) for c in constraints), -item.id))


def _queries(site: Site, constraints: list[Constraint]) -> list[str]:
    """The searches a task offers: each enum value it states, all of them, and, where the site takes
    ``attribute:value`` terms, each such term and all of them."""
    words = [site.attribute[c.attribute].words[c.value] for c in constraints if c.op == "eq"]
    out = list(words) + ([" ".join(words)] if len(words) > 1 else [])
    if "filter" not in site.tools:
        terms = [
            f"{site.attribute[c.attribute].name}:{site.attribute[c.attribute].words[c.value]}"
            for c in constraints
            if c.op == "eq"
        ]
        out += terms + ([" ".join(terms)] if len(terms) > 1 else [])
    return list(dict.fromkeys(out))


def _text_value(rng: random.Random, pool: str) -> str:
    return f"{make_word(rng, pool).capitalize()} {make_word(rng, pool).capitalize()}"


def _form_values(site: Site, form: str, rng: random.Random) -> dict[str, Any]:
    values: dict[str, Any] = {}
    texts: set[str] = set()
    for fields in site.forms[form]:
        for f in fields:
            if f.type == "text":
                text = _text_value(rng, site.pool)
                while text in texts:
                    text = _text_value(rng, site.pool)
                texts.add(text)
                values[f.sym] = text
            elif f.type == "enum":
                values[f.sym] = rng.randrange(f.size)
            else:
                values[f.sym] = rng.randint(f.low, f.high)
    return values


def _form_phrase(site: Site, values: Mapping[str, Any]) -> str:
    def shown(f: FormField, value: Any) -> str:
        return f.words[value] if f.type == "enum" else str(value)

    return "; ".join(f"{site.form_field[s].name}: {shown(site.form_field[s], v)}" for s, v in values.items())


def _offers(queries: list[str], values: Mapping[str, Any], site: Site, numbers: list[int]) -> dict[str, list]:
    texts = [v for s, v in values.items() if site.form_field[s].type == "text"]
    ints = [v for s, v in values.items() if site.form_field[s].type == "int"]
    return {"queries": queries, "texts": texts, "numbers": sorted(set(numbers + ints))}


def _with(values: Mapping[str, Any], site: Site, rng: random.Random) -> dict[str, Any]:
    """``values`` with one field changed (the wrong solution of a form task)."""
    sym = rng.choice(sorted(values))
    f = site.form_field[sym]
    changed = dict(values)
    if f.type == "text":
        changed[sym] = values[sym] + " " + make_word(rng, site.pool).capitalize()
    elif f.type == "enum":
        changed[sym] = (values[sym] + 1) % f.size
    else:
        changed[sym] = f.low if values[sym] != f.low else f.high
    return changed


def _start(spec: Spec, goal: dict[str, Any], answer: str | None, strict: bool = True) -> _Planner:
    env = WebworldEnv(spec, {"instruction": "", "goal": goal, "answer": answer})
    env.reset()
    return _Planner(env, strict)


def _draft_buy(site: Site, spec: Spec, rng: random.Random) -> Draft | None:
    target = site.items[rng.choice(site.item_ids)]
    constraints = _identify(site, target, rng)
    if constraints is None:
        return None
    quantity = rng.randint(1, MAX_QUANTITY)
    values = _form_values(site, "checkout", rng)
    queries = _queries(site, constraints)
    thresholds = [c.value for c in constraints if c.op != "eq"]
    goal = {
        "kind": "buy",
        "item": target.id,
        "quantity": quantity,
        "fields": values,
        "offers": _offers(queries, values, site, [quantity, *thresholds]),
    }
    planner = _start(spec, goal, None)
    _buy(planner, site, target.id, quantity, values, queries, constraints)
    near = _near_miss(site, target, constraints, lambda item: True)
    wrong = _start(spec, goal, None, strict=False)
    _buy(wrong, site, near.id, quantity, values, [near.title], [])
    wrong.do({"name": FINISH, "arguments": {}})
    profile = FAMILIES[site.family]
    text = f"{profile.verb} {quantity} of the {site.noun['item']} whose {_join([c.phrase(site) for c in constraints])}."
    text += f" At {site.page_name['checkout']}, enter {_form_phrase(site, values)}."
    if site.verifier["strict_cart"]:
        text += f" The {site.noun['order']} must hold nothing else."
    skill = ["buy", sorted([site.attribute[c.attribute].type, c.op] for c in constraints), quantity > 1]
    return Draft("buy", text, goal, None, planner.calls, wrong.calls, skill, _distractors(site, target, constraints))


def _draft_register(site: Site, spec: Spec, rng: random.Random) -> Draft | None:
    values = _form_values(site, "register", rng)
    goal = {"kind": "register", "fields": values, "offers": _offers([], values, site, [])}
    planner = _start(spec, goal, None)
    planner.do(site.call("open", href=f"/{site.page_name['register']}"))
    _fill(planner, site, "register", values)
    wrong = _start(spec, goal, None, strict=False)
    wrong.do(site.call("open", href=f"/{site.page_name['register']}"))
    _fill(wrong, site, "register", _with(values, site, rng))
    wrong.do({"name": FINISH, "arguments": {}})
    text = f"Fill in the {site.page_name['register']} form with {_form_phrase(site, values)}, and submit it."
    skill = ["register", sorted(f.type for fields in site.forms["register"] for f in fields)]
    return Draft("register", text, goal, None, planner.calls, wrong.calls, skill, 0)


def _fact(site: Site, item: Item, attribute: str) -> str:
    if attribute == "title":
        return item.title
    a = site.attribute[attribute]
    return a.words[item.values[a.sym]] if a.type == "enum" else str(item.values[a.sym])


def _draft_lookup(site: Site, spec: Spec, rng: random.Random) -> Draft | None:
    target = site.items[rng.choice(site.item_ids)]
    asked = rng.choice(site.attributes)
    constraints = _identify(site, target, rng, exclude=asked.sym)
    if constraints is None:
        return None
    answer = _fact(site, target, asked.sym)
    near = _near_miss(site, target, constraints, lambda item: _fact(site, item, asked.sym) != answer)
    if near is None:
        return None
    queries = _queries(site, constraints)
    thresholds = [c.value for c in constraints if c.op != "eq"]
    goal = {
        "kind": "lookup",
        "item": target.id,
        "attribute": asked.sym,
        "offers": _offers(queries, {}, site, thresholds),
    }
    planner = _start(spec, goal, answer)
    _route(planner, site, [target.id], queries, constraints)
    planner.do(site.call("open", href=target.href))
    wrong = [*planner.calls, {"name": FINISH, "arguments": {"answer": _fact(site, near, asked.sym)}}]
    text = (
        f"What is the {asked.name} of the {site.noun['item']} whose {_join([c.phrase(site) for c in constraints])}? "
        "Answer with the value only."
    )
    skill = ["lookup", asked.type, sorted([site.attribute[c.attribute].type, c.op] for c in constraints)]
    return Draft("lookup", text, goal, answer, planner.calls, wrong, skill, _distractors(site, target, constraints))


def _draft_compare(site: Site, spec: Spec, rng: random.Random) -> Draft | None:
    ints = [a for a in site.attributes if a.type == "int"]
    if not ints:
        return None
    target = site.items[rng.choice(site.item_ids)]
    asked = rng.choice(ints)
    lowest = rng.random() < 0.5
    enums = list(site.enums)
    rng.shuffle(enums)
    top = min(COMPARE_SIZES[1], site.page_size)
    for n in (1, 2):
        constraints = [Constraint(a.sym, "eq", target.values[a.sym]) for a in enums[:n]]
        group = [item for item in site.items.values() if all(c.holds(item) for c in constraints)]
        if not COMPARE_SIZES[0] <= len(group) <= top:
            continue
        values = sorted(item.values[asked.sym] for item in group)
        best = values[0] if lowest else values[-1]
        if target.values[asked.sym] != best or values.count(best) > 1:
            continue
        break
    else:
        return None
    queries = _queries(site, constraints)
    goal = {"kind": "compare", "item": target.id, "attribute": "title", "offers": _offers(queries, {}, site, [])}
    planner = _start(spec, goal, target.title)
    _route(planner, site, [item.id for item in group], queries, constraints)
    listing = planner.env.state.page
    order = [i for i in site.results(listing.terms, listing.filters) if i != target.id and i in {g.id for g in group}]
    for i in [*order, target.id]:
        if planner.env.state.page.kind == "item":
            planner.do(site.call("open", href=site.results_href(listing)))
        planner.do(site.call("open", href=site.items[i].href))
    other = site.items[order[0]]
    wrong = [*planner.calls, {"name": FINISH, "arguments": {"answer": other.title}}]
    extreme = "lowest" if lowest else "highest"
    text = (
        f"Among the {site.noun['item']} listings whose {_join([c.phrase(site) for c in constraints])}, which has the "
        f"{extreme} {asked.name}? Answer with its {site.noun['title']}."
    )
    skill = ["compare", extreme, len(group), len(constraints)]
    return Draft("compare", text, goal, target.title, planner.calls, wrong, skill, len(group) - 1)


def _join(phrases: list[str]) -> str:
    return phrases[0] if len(phrases) == 1 else ", ".join(phrases[:-1]) + " and " + phrases[-1]


def _distractors(site: Site, target: Item, constraints: list[Constraint]) -> int:
    """Items that meet every constraint but one: the near misses an agent must tell apart."""
    return sum(
        sum(c.holds(item) for c in constraints) == len(constraints) - 1
        for item in site.items.values()
        if item.id != target.id
    )


DRAFTERS: dict[str, Callable[[Site, Spec, random.Random], Draft | None]] = {
    "buy": _draft_buy,
    "register": _draft_register,
    "lookup": _draft_lookup,
    "compare": _draft_compare,
}


# ------------------------------------------------------------------------------------- filter


def _passes(spec: Spec, task: Mapping[str, Any], calls: list[dict[str, Any]]) -> bool:
    env = WebworldEnv(spec, task)
    env.reset()
    for call in calls:
        if env.done:
            break
        env.step(call)
    return env.verify().success


def _accept(spec: Spec, task: Mapping[str, Any], draft: Draft, finish: dict[str, Any]) -> bool:
    """The filter: the reference (every call a candidate, none an error) passes only once complete;
    a no-op episode and the wrong-item solution fail."""
    env = WebworldEnv(spec, task)
    env.reset()
    for k, call in enumerate(draft.plan):
        if env.done or call not in env.candidates() or "error" in env.step(call).observation:
            return False
        if k < len(draft.plan) - 1 and env.verify().success:
            return False
    if env.done or finish not in env.candidates():
        return False
    env.step(finish)
    if not env.verify().success:
        return False
    return not _passes(spec, task, [{"name": FINISH, "arguments": {}}]) and not _passes(spec, task, draft.wrong)


def verifier_shape(site: Site, goal: Mapping[str, Any]) -> list[Any]:
    """The goal's shape without names or values: its kind, the checked field types, strictness."""
    fields = sorted(site.form_field[s].type for s in goal.get("fields", {}))
    strict = goal["kind"] == "buy" and site.verifier["strict_cart"]
    answer = site.verifier["answer_mode"] if goal["kind"] in ("lookup", "compare") else "-"
    return [goal["kind"], fields, strict, answer]


def generate_tasks(
    spec: Spec, env_id: str, n_tasks: int, seed: int, max_attempts: int | None = None
) -> list[dict[str, Any]]:
    """Up to ``n_tasks`` filtered task rows for the environment ``spec`` (id ``env_id``), from ``seed``.

    Stops after ``max_attempts`` drafts (default ``6 * n_tasks + 16``). Nothing here depends on the
    skin except the rendered text, so a re-skinned spec with the same seed yields the same tasks in
    its own names."""
    site = compile_site(spec)
    rng = random.Random(derive_seed(seed, "tasks"))
    kinds = [k for k in KIND_WEIGHTS if k != "register" or "register" in site.forms]
    weights = [KIND_WEIGHTS[k] for k in kinds]
    tasks: list[dict[str, Any]] = []
    seen: set[str] = set()
    attempts = 6 * n_tasks + 16 if max_attempts is None else max_attempts
    for _ in range(attempts):
        if len(tasks) >= n_tasks:
            break
        kind = rng.choices(kinds, weights)[0]
        try:
            draft = DRAFTERS[kind](site, spec, rng)
        except _Stuck:
            continue
        if draft is None or len(draft.plan) + 1 > site.max_steps:
            continue
        goal_json = canonical_json(draft.goal)
        task = {"instruction": draft.instruction, "goal": goal_json, "answer": draft.answer}
        finish = {"name": FINISH, "arguments": {} if draft.answer is None else {"answer": draft.answer}}
        if not _accept(spec, task, draft, finish):
            continue
        reference = canonical_json([*draft.plan, finish])
        task_id = short_hash(["webworld-task", env_id, reference, goal_json])
        if task_id in seen:
            continue
        seen.add(task_id)
        verbs = [site.verb_of[call["name"]] for call in draft.plan]
        tasks.append(
            {
                "task_id": task_id,
                "env_id": env_id,
                "skeleton": ">".join(verbs) + (">answer" if draft.answer is not None else ""),
                "skill_sig": short_hash(["webworld", *draft.skill]),
                "verifier_sig": short_hash(verifier_shape(site, draft.goal)),
                "instruction": draft.instruction,
                "reference": reference,
                "goal": goal_json,
                "answer": draft.answer,
                "n_steps": len(draft.plan),
                "n_distractors": draft.n_distractors,
                "id_depth": verbs.count("open"),
            }
        )
    return tasks
