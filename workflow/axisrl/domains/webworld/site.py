"""Sites (L2), variants (L1), contents (L0) and the environment spec that holds all three.

A *structure* is the name-free part of a site, addressed by symbols: its family, the catalogue's
typed attributes (``a1``, ``a2``, ...: enum attributes with a domain ``size``, integer ones with a
range; every item also has a title), its forms (``checkout`` and, on some sites, ``register``:
typed fields ``g0``, ``g1``, ... laid out over one to three steps), its API (which optional tools
exist, whether the home page browses by an attribute, results per page), its semantics and its
verifier settings. A *spec* adds the skin (lexicon and ID format), the content (catalogue and the
initial cart) and the step limit; it is plain JSON and is the whole environment.

Families differ in what their structures look like (a shop has short checkouts and sometimes an
account form; a travel site has more integer attributes and longer passenger forms; a portal has
long multi-step applications and always a registration form) and in the verb of their instructions.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from axisrl.domains.canon import derive_seed
from axisrl.domains.levels import draw_variant
from axisrl.domains.toolworld.lexicon import assign_words, entity_name, make_id_format

SPEC_FORMAT = "webworld/1"
VERBS = ("open", "search", "filter", "type", "select", "click", "submit", "back")
CORE_TOOLS = ("open", "search", "type", "click")
OPTIONAL_TOOLS = ("filter", "select", "submit", "back")
"""Tools an API edit can add or remove. Without ``filter`` a search query takes ``attribute:value``
terms instead; without ``select`` a choice field is typed; without ``submit`` a form's last step has
a submit button; without ``back`` the agent returns by links."""
PARAMS = ("href", "query", "attribute", "value", "field", "text", "option", "button")
PAGES = ("home", "results", "item", "cart", "checkout", "review", "confirm", "register", "registered")
BUTTONS = ("add", "remove", "checkout", "next", "submit", "place")
NOUNS = ("item", "order", "title", "quantity")
FORMS = ("checkout", "register")
FIELD_TYPES = ("text", "enum", "int")

SEMANTICS = {
    "search_match": ("all", "any"),
    "cart_add": ("increment", "set"),
    "filter_mode": ("narrow", "replace"),
    "review": (True, False),
}
"""``search_match``: a query matches items holding all of its words, or any (ranked by matches);
``cart_add``: adding an item already in the cart adds the typed quantity or sets it; ``filter_mode``:
a filter narrows the active ones or replaces them; ``review``: checkout's last step leads to a review
page whose button places the order, or places it at once."""
VERIFIER = {"answer_mode": ("exact", "normalized"), "strict_cart": (True, False)}
"""``strict_cart``: a bought order must hold nothing but the target (else extra lines are ignored)."""

PAGE_SIZES = (3, 4, 5, 6)
QUANTITY_RANGE = (1, 9)
CATALOGUE_FACTOR = 4
"""Items per catalogue: ``CATALOGUE_FACTOR`` times a draw from ``rows_per_table`` (16-32 by default),
so searches and filters have distractors to cut through."""
MAX_ENUM_SIZE = 7
MAX_STEPS_PER_FORM = 3

Structure = dict[str, Any]
Spec = dict[str, Any]


@dataclass(frozen=True)
class Family:
    """How a family's sites are drawn: attribute and field counts, layout and the instruction verb."""

    verb: str
    int_attributes: tuple[int, int]
    checkout_fields: tuple[int, int]
    checkout_steps: tuple[int, int]
    register_probability: float
    register_fields: tuple[int, int]
    field_weights: tuple[float, float, float]
    """Weights of text, enum and int fields."""
    browse_probability: float


FAMILIES = {
    "shop": Family("Buy", (1, 2), (2, 4), (1, 2), 0.35, (2, 3), (0.5, 0.3, 0.2), 0.6),
    "travel": Family("Book", (2, 3), (3, 5), (2, 3), 0.25, (2, 3), (0.4, 0.3, 0.3), 0.35),
    "portal": Family("Request", (1, 2), (4, 6), (2, 3), 1.0, (3, 5), (0.45, 0.35, 0.2), 0.5),
}


def _copy(obj: Any) -> Any:
    return json.loads(json.dumps(obj))


def _int_range(rng: random.Random, lowest: int, span: tuple[int, int]) -> tuple[int, int]:
    low = rng.randint(lowest, lowest + 40)
    return low, low + rng.randint(*span)


def _new_field(rng: random.Random, sym: str, kind: str, step: int) -> dict[str, Any]:
    field: dict[str, Any] = {"sym": sym, "type": kind, "step": step}
    if kind == "enum":
        field["size"] = rng.randint(2, 4)
    elif kind == "int":
        field["low"], field["high"] = _int_range(rng, 1, (10, 80))
    return field


def _next_symbol(items: list[Mapping[str, Any]], letter: str) -> str:
    numbers = [int(x["sym"][1:]) for x in items if x["sym"][1:].isdigit()]
    return f"{letter}{max(numbers, default=-1) + 1}"


def _all_fields(structure: Structure) -> list[dict[str, Any]]:
    return [f for form in structure["forms"].values() for f in form["fields"]]


def _layout(form: dict[str, Any]) -> None:
    """Spread a form's fields over its steps in order, every step holding at least one."""
    n, steps = len(form["fields"]), form["steps"]
    for k, field in enumerate(form["fields"]):
        field["step"] = k * steps // n


# ---------------------------------------------------------------------------------------------- L2


def sample_site(world_seed: int, enum_attributes: tuple[int, int]) -> Structure:
    """The structure of site ``world_seed``: family, attributes, forms, API, semantics, verifier."""
    rng = random.Random(derive_seed(world_seed, "site"))
    family = rng.choice(sorted(FAMILIES))
    profile = FAMILIES[family]
    kinds = ["enum"] * max(2, rng.randint(*enum_attributes)) + ["int"] * rng.randint(*profile.int_attributes)
    rng.shuffle(kinds)
    attributes: list[dict[str, Any]] = []
    for k, kind in enumerate(kinds, start=1):
        attribute: dict[str, Any] = {"sym": f"a{k}", "type": kind}
        if kind == "enum":
            attribute["size"] = rng.randint(3, 6)
        else:
            attribute["low"], attribute["high"] = _int_range(rng, 1, (40, 300))
        attributes.append(attribute)

    forms: dict[str, Any] = {}
    counter = 0
    wanted = [("checkout", profile.checkout_fields, profile.checkout_steps)]
    if rng.random() < profile.register_probability:
        wanted.append(("register", profile.register_fields, (1, 2)))
    for form, n_fields, n_steps in wanted:
        fields = []
        for _ in range(rng.randint(*n_fields)):
            kind = rng.choices(FIELD_TYPES, weights=profile.field_weights)[0]
            fields.append(_new_field(rng, f"g{counter}", kind, 0))
            counter += 1
        if not any(f["type"] == "text" for f in fields):
            fields[0] = _new_field(rng, fields[0]["sym"], "text", 0)
        forms[form] = {"steps": min(rng.randint(*n_steps), len(fields)), "fields": fields}
        _layout(forms[form])

    enums = [a["sym"] for a in attributes if a["type"] == "enum"]
    return {
        "family": family,
        "attributes": attributes,
        "forms": forms,
        "api": {
            "tools": sorted(
                CORE_TOOLS + tuple(t for t, p in zip(OPTIONAL_TOOLS, (0.7, 0.6, 0.5, 0.5)) if rng.random() < p)
            ),
            "browse": rng.choice(enums) if rng.random() < profile.browse_probability else None,
            "page_size": rng.choice(PAGE_SIZES),
        },
        "semantics": {name: rng.choice(values) for name, values in SEMANTICS.items()},
        "verifier": {"answer_mode": rng.choice(VERIFIER["answer_mode"]), "strict_cart": rng.random() < 0.7},
    }


# ---------------------------------------------------------------------------------------------- L1


def _flip(value: Any, options: tuple[Any, Any]) -> Any:
    a, b = options
    return b if value == a else a


def edit_options(structure: Structure) -> dict[str, list[str]]:
    """Every edit applicable to ``structure``, by category (api, schema, semantics, verifier); each
    is a string ``apply_edit`` understands."""
    api, attributes, forms = structure["api"], structure["attributes"], structure["forms"]
    enums = [a for a in attributes if a["type"] == "enum"]
    ints = [a for a in attributes if a["type"] == "int"]
    edits_api = [f"api:tool:{t}={t not in api['tools']}" for t in OPTIONAL_TOOLS]
    if api["browse"] is None:
        edits_api += [f"api:browse={a['sym']}" for a in enums]
    else:
        edits_api.append("api:browse=none")
    edits_api += [f"api:page_size={n}" for n in PAGE_SIZES if n != api["page_size"]]
    for name, form in sorted(forms.items()):
        top = min(MAX_STEPS_PER_FORM, len(form["fields"]))
        edits_api += [f"api:steps:{name}={k}" for k in range(1, top + 1) if k != form["steps"]]

    schema = [f"schema:add_attribute:{kind}" for kind in ("enum", "int")]
    schema += [
        f"schema:drop_attribute:{a['sym']}"
        for a in attributes
        if a["sym"] != api["browse"] and (len(enums) > 2 if a["type"] == "enum" else len(ints) > 1)
    ]
    schema += [f"schema:extend_enum:{a['sym']}" for a in enums if a["size"] < MAX_ENUM_SIZE]
    for name, form in sorted(forms.items()):
        schema += [f"schema:add_field:{name}:{kind}" for kind in FIELD_TYPES]
        per_step = [sum(f["step"] == s for f in form["fields"]) for s in range(form["steps"])]
        texts = sum(f["type"] == "text" for f in form["fields"])
        schema += [
            f"schema:drop_field:{name}:{f['sym']}"
            for f in form["fields"]
            if per_step[f["step"]] > 1 and (f["type"] != "text" or texts > 1)
        ]

    sem = structure["semantics"]
    semantics = [
        f"semantics:{name}={_flip(sem[name], values)}"
        for name, values in SEMANTICS.items()
        if name != "filter_mode" or "filter" in api["tools"]
    ]
    ver = structure["verifier"]
    verifier = [f"verifier:{name}={_flip(ver[name], values)}" for name, values in VERIFIER.items()]
    return {"api": edits_api, "schema": schema, "semantics": semantics, "verifier": verifier}


def _parse_setting(text: str) -> Any:
    return {"True": True, "False": False, "none": None}.get(text, int(text) if text.isdigit() else text)


def apply_edit(structure: Structure, edit: str, rng: random.Random) -> None:
    """Apply one declared edit in place (``rng`` draws the new attribute's or field's domain)."""
    category, rest = edit.split(":", 1)
    if category == "api":
        api = structure["api"]
        if rest.startswith("tool:"):
            tool, value = rest[len("tool:") :].split("=")
            tools = set(api["tools"]) - {tool}
            api["tools"] = sorted(tools | ({tool} if _parse_setting(value) else set()))
        elif rest.startswith("steps:"):
            form, value = rest[len("steps:") :].split("=")
            structure["forms"][form]["steps"] = int(value)
            _layout(structure["forms"][form])
        else:
            name, value = rest.split("=")
            api[name] = _parse_setting(value)
    elif category == "schema":
        action, target = rest.split(":", 1)
        attributes = structure["attributes"]
        if action == "add_attribute":
            attribute: dict[str, Any] = {"sym": _next_symbol(attributes, "a"), "type": target}
            if target == "enum":
                attribute["size"] = rng.randint(3, 6)
            else:
                attribute["low"], attribute["high"] = _int_range(rng, 1, (40, 300))
            attributes.append(attribute)
        elif action == "drop_attribute":
            attributes[:] = [a for a in attributes if a["sym"] != target]
        elif action == "extend_enum":
            next(a for a in attributes if a["sym"] == target)["size"] += 1
        elif action == "add_field":
            form_name, kind = target.split(":")
            form = structure["forms"][form_name]
            form["fields"].append(_new_field(rng, _next_symbol(_all_fields(structure), "g"), kind, form["steps"] - 1))
        else:  # drop_field
            form_name, sym = target.split(":")
            form = structure["forms"][form_name]
            form["fields"] = [f for f in form["fields"] if f["sym"] != sym]
    else:
        name, value = rest.split("=")
        structure["semantics" if category == "semantics" else "verifier"][name] = _parse_setting(value)


def sample_variant(structure: Structure, variant_seed: int | None) -> tuple[Structure, list[str]]:
    """Apply 1-3 declared edits drawn from ``variant_seed``; ``None`` is the unedited site."""
    return draw_variant(structure, variant_seed, _copy, edit_options, apply_edit)


# ---------------------------------------------------------------------------------------------- L0


def sample_content(structure: Structure, content_seed: int, pool: str, rows: tuple[int, int]) -> dict[str, list]:
    """The catalogue ``[[id, {"title", attr: value}], ...]`` (ids ascending) and the initial cart
    ``[[id, quantity], ...]``. Each attribute draws from its own stream, so two variants with the
    same content seed share the values of the attributes they have in common."""
    rng = random.Random(derive_seed(content_seed, "catalogue"))
    n = CATALOGUE_FACTOR * rng.randint(*rows)
    ids = sorted(rng.sample(range(1, max(4096, 16 * n)), n))
    key_rng = random.Random(derive_seed(content_seed, "titles"))
    taken: set[str] = set()
    titles = [entity_name(key_rng, pool, taken) for _ in range(n)]
    columns: dict[str, list[Any]] = {}
    for attribute in structure["attributes"]:
        arng = random.Random(derive_seed(content_seed, "values", attribute["sym"]))
        if attribute["type"] == "enum":
            columns[attribute["sym"]] = [arng.randrange(attribute["size"]) for _ in range(n)]
        else:
            columns[attribute["sym"]] = [arng.randint(attribute["low"], attribute["high"]) for _ in range(n)]
    items = [
        [i, {"title": titles[k], **{sym: values[k] for sym, values in columns.items()}}] for k, i in enumerate(ids)
    ]
    cart_rng = random.Random(derive_seed(content_seed, "cart"))
    lines = sorted(cart_rng.sample(ids, cart_rng.choice((0, 0, 1, 1, 2))))
    return {"items": items, "cart": [[i, cart_rng.randint(1, 2)] for i in lines]}


# ---------------------------------------------------------------------------------------------- spec


def lexicon_symbols(structure: Structure) -> list[str]:
    """Every symbol that needs a surface word: tools, parameters, pages, buttons, nouns, attributes,
    their values, form fields and their options."""
    symbols = [f"verb:{v}" for v in VERBS] + [f"param:{p}" for p in PARAMS]
    symbols += [f"page:{p}" for p in PAGES] + [f"button:{b}" for b in BUTTONS] + [f"noun:{n}" for n in NOUNS]
    for attribute in structure["attributes"]:
        symbols.append(attribute["sym"])
        symbols += [f"{attribute['sym']}.v{k}" for k in range(attribute.get("size", 0))]
    for field in _all_fields(structure):
        symbols.append(field["sym"])
        symbols += [f"{field['sym']}.v{k}" for k in range(field.get("size", 0))]
    return symbols


def build_spec(structure: Structure, content: dict[str, list], pool: str, skin_seed: int, max_steps: int) -> Spec:
    """Assemble the environment spec; the skin (names, ID format) comes from ``skin_seed``."""
    lexicon = assign_words(lexicon_symbols(structure), pool, skin_seed)
    id_format = make_id_format(skin_seed, {"item": lexicon["noun:item"], "order": lexicon["noun:order"]})
    return {
        "format": SPEC_FORMAT,
        "pool": pool,
        **_copy(structure),
        "max_steps": max_steps,
        "lexicon": lexicon,
        "id_format": id_format,
        **_copy(content),
    }


def reskin(spec: Spec, seed: int) -> Spec:
    """The same environment under a fresh lexicon and ID format (names only)."""
    skin_seed = derive_seed(seed, "reskin")
    out = _copy(spec)
    out["lexicon"] = assign_words(spec["lexicon"], spec["pool"], skin_seed)
    out["id_format"] = make_id_format(
        skin_seed, {"item": out["lexicon"]["noun:item"], "order": out["lexicon"]["noun:order"]}
    )
    return out


def with_semantics(spec: Spec, **changes: Any) -> Spec:
    """A copy of ``spec`` that differs only in the named semantics."""
    for name, value in changes.items():
        if name not in SEMANTICS or value not in SEMANTICS[name]:
            raise ValueError(f"unknown semantics {name}={value!r}; choose from {SEMANTICS}")
    out = _copy(spec)
    out["semantics"].update(changes)
    return out
