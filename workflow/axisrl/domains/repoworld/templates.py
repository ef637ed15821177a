"""Function templates: the small pure functions a repository is made of, and their contracts.

A template is a typed function shape (``Kind``: parameter kinds and return kind over one record
type), the record fields and callees it needs, and its *contracts*: the semantic options one
declared L1 edit switches between (a filter's comparison, a total's guard polarity, first or last
match, max or min, 0- or 1-based pages, plus or minus). Leaves work on records; composites call
functions of lower modules whose kinds fit their slots, which is what makes a bug's symptom appear
far from its line. Each template renders to source lines in a world's names, with a docstring
that states the contract (so a reader can tell the code from the intent, as in real code).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

Names = Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Kind:
    """A function's type over one record type: parameter kinds (``items``: a list of records,
    ``item``: one record, ``int``) and the return kind (also ``item?``: a record or None)."""

    params: tuple[str, ...]
    returns: str

    def token(self, record: str) -> str:
        """Name-free text of the kind, with ``record`` the role of its record type."""
        params = ",".join(f"{p}:{record}" if p.startswith("item") else p for p in self.params)
        returns = f"{self.returns}:{record}" if self.returns.startswith("item") else self.returns
        return f"({params})->{returns}"


ITEMS_INT_TO_ITEMS = Kind(("items", "int"), "items")
ITEMS_INT_INT_TO_ITEMS = Kind(("items", "int", "int"), "items")
ITEMS_TO_INT = Kind(("items",), "int")
ITEMS_INT_TO_INT = Kind(("items", "int"), "int")
ITEMS_INT_TO_MAYBE = Kind(("items", "int"), "item?")
ITEMS_TO_ITEM = Kind(("items",), "item")
ITEM_TO_INT = Kind(("item",), "int")
INT3_TO_INT = Kind(("int", "int", "int"), "int")
ITEMS_INT_INT_TO_INT = Kind(("items", "int", "int"), "int")


@dataclass(frozen=True, slots=True)
class Template:
    """``params``: the variable roles of the parameters (named from the world's lexicon);
    ``fields``: record-field slots and their types; ``callees``: callee slots and the kinds they
    need; ``contracts``: semantic options (the first ``len > 1`` of them are L1 edits);
    ``constant``: the slot of a module-level constant the function reads (its value is L0 content);
    ``typed``: whether it works on a record type."""

    name: str
    params: tuple[str, ...]
    kind: Kind
    fields: tuple[tuple[str, str], ...]
    callees: tuple[tuple[str, Kind], ...]
    contracts: tuple[str, ...]
    constant: str | None
    body: Callable[[Names, str], list[str]]
    typed: bool = True

    @property
    def leaf(self) -> bool:
        return not self.callees


COMPARISON_WORDS = {">": "above", ">=": "at least", "<": "below", "<=": "at most", "==": "equal to"}


def _select(n: Names, op: str) -> list[str]:
    return [
        f"def {n['fn']}({n['items']}, {n['limit']}):",
        f'    """The {n["items"]} whose {n["a"]} is {COMPARISON_WORDS[op]} {n["limit"]}, in order."""',
        f"    {n['kept']} = []",
        f"    for {n['item']} in {n['items']}:",
        f"        if {n['item']}.{n['a']} {op} {n['limit']}:",
        f"            {n['kept']}.append({n['item']})",
        f"    return {n['kept']}",
    ]


def _between(n: Names, op: str) -> list[str]:
    bounds = "both included" if op == "<=" else "both excluded"
    return [
        f"def {n['fn']}({n['items']}, {n['low']}, {n['high']}):",
        f'    """The {n["items"]} whose {n["a"]} lies between {n["low"]} and {n["high"]} ({bounds})."""',
        f"    return [{n['item']} for {n['item']} in {n['items']} "
        f"if {n['low']} {op} {n['item']}.{n['a']} {op} {n['high']}]",
    ]


def _total(n: Names, guard: str) -> list[str]:
    which = {"skip": f" that are not {n.get('flag')}", "only": f" that are {n.get('flag')}", "all": ""}[guard]
    lines = [
        f"def {n['fn']}({n['items']}):",
        f'    """The sum of {n["a"]} over the {n["items"]}{which}."""',
        f"    {n['total']} = 0",
        f"    for {n['item']} in {n['items']}:",
    ]
    if guard == "all":
        lines.append(f"        {n['total']} += {n['item']}.{n['a']}")
    else:
        negation = "not " if guard == "skip" else ""
        lines += [
            f"        if {negation}{n['item']}.{n['flag']}:",
            f"            {n['total']} += {n['item']}.{n['a']}",
        ]
    return lines + [f"    return {n['total']}"]


def _count(n: Names, op: str) -> list[str]:
    return [
        f"def {n['fn']}({n['items']}, {n['limit']}):",
        f'    """How many {n["items"]} have a {n["a"]} {COMPARISON_WORDS[op]} {n["limit"]}."""',
        f"    {n['count']} = 0",
        f"    for {n['item']} in {n['items']}:",
        f"        if {n['item']}.{n['a']} {op} {n['limit']}:",
        f"            {n['count']} += 1",
        f"    return {n['count']}",
    ]


def _find(n: Names, which: str) -> list[str]:
    source = n["items"] if which == "first" else f"reversed({n['items']})"
    return [
        f"def {n['fn']}({n['items']}, {n['value']}):",
        f'    """The {which} of the {n["items"]} whose {n["a"]} equals {n["value"]}, or None."""',
        f"    for {n['item']} in {source}:",
        f"        if {n['item']}.{n['a']} == {n['value']}:",
        f"            return {n['item']}",
        "    return None",
    ]


def _best(n: Names, which: str) -> list[str]:
    op, word = (">", "largest") if which == "max" else ("<", "smallest")
    return [
        f"def {n['fn']}({n['items']}):",
        f'    """The first of the {n["items"]} with the {word} {n["a"]}."""',
        f"    {n['best']} = {n['items']}[0]",
        f"    for {n['item']} in {n['items']}[1:]:",
        f"        if {n['item']}.{n['a']} {op} {n['best']}.{n['a']}:",
        f"            {n['best']} = {n['item']}",
        f"    return {n['best']}",
    ]


def _window(n: Names, base: str) -> list[str]:
    first = f"{n['page']} * {n['K']}" if base == "base0" else f"({n['page']} - 1) * {n['K']}"
    origin = "0" if base == "base0" else "1"
    return [
        f"def {n['fn']}({n['items']}, {n['page']}):",
        f'    """Page {n["page"]} of the {n["items"]}, {n["K"]} per page; the first page is {origin}."""',
        f"    {n['start']} = {first}",
        f"    return {n['items']}[{n['start']}:{n['start']} + {n['K']}]",
    ]


def _locate(n: Names, op: str) -> list[str]:
    return [
        f"def {n['fn']}({n['items']}, {n['limit']}):",
        f'    """How many leading {n["items"]} have a {n["a"]} {COMPARISON_WORDS[op]} {n["limit"]}."""',
        f"    {n['index']} = 0",
        f"    while {n['index']} < len({n['items']}) and {n['items']}[{n['index']}].{n['a']} {op} {n['limit']}:",
        f"        {n['index']} += 1",
        f"    return {n['index']}",
    ]


def _score(n: Names, sign: str) -> list[str]:
    op, word = ("+", "plus") if sign == "plus" else ("-", "minus")
    return [
        f"def {n['fn']}({n['item']}):",
        f'    """{n["K"]} times the {n["a"]} of the {n["item"]}, {word} its {n["b"]}."""',
        f"    return {n['item']}.{n['a']} * {n['K']} {op} {n['item']}.{n['b']}",
    ]


def _clamp(n: Names, contract: str) -> list[str]:
    return [
        f"def {n['fn']}({n['value']}, {n['low']}, {n['high']}):",
        f'    """{n["value"]} limited to the range from {n["low"]} to {n["high"]}."""',
        f"    if {n['value']} < {n['low']}:",
        f"        return {n['low']}",
        f"    if {n['value']} > {n['high']}:",
        f"        return {n['high']}",
        f"    return {n['value']}",
    ]


def _pipe(n: Names, contract: str) -> list[str]:
    return [
        f"def {n['fn']}({n['items']}, {n['limit']}):",
        f'    """{n["H"]} of what {n["G"]} keeps of the {n["items"]} at {n["limit"]}."""',
        f"    {n['kept']} = {n['G']}({n['items']}, {n['limit']})",
        f"    return {n['H']}({n['kept']})",
    ]


def _range_total(n: Names, contract: str) -> list[str]:
    return [
        f"def {n['fn']}({n['items']}, {n['low']}, {n['high']}):",
        f'    """{n["H"]} of what {n["G"]} keeps of the {n["items"]} between {n["low"]} and {n["high"]}."""',
        f"    {n['kept']} = {n['G']}({n['items']}, {n['low']}, {n['high']})",
        f"    return {n['H']}({n['kept']})",
    ]


def _spread(n: Names, contract: str) -> list[str]:
    return [
        f"def {n['fn']}({n['items']}, {n['low']}, {n['high']}):",
        f'    """{n["G"]} of the {n["items"]} at {n["high"]} minus {n["G"]} at {n["low"]}."""',
        f"    {n['upper']} = {n['G']}({n['items']}, {n['high']})",
        f"    {n['lower']} = {n['G']}({n['items']}, {n['low']})",
        f"    return {n['upper']} - {n['lower']}",
    ]


def _bounded(n: Names, contract: str) -> list[str]:
    return [
        f"def {n['fn']}({n['items']}, {n['low']}, {n['high']}):",
        f'    """{n["G"]} of the {n["items"]}, limited by {n["C"]} to the range {n["low"]} to {n["high"]}."""',
        f"    {n['value']} = {n['G']}({n['items']})",
        f"    return {n['C']}({n['value']}, {n['low']}, {n['high']})",
    ]


def _top_score(n: Names, contract: str) -> list[str]:
    return [
        f"def {n['fn']}({n['items']}):",
        f'    """{n["H"]} of the one of the {n["items"]} that {n["G"]} picks, or 0 when there are none."""',
        f"    if not {n['items']}:",
        "        return 0",
        f"    {n['top']} = {n['G']}({n['items']})",
        f"    return {n['H']}({n['top']})",
    ]


def _score_sum(n: Names, contract: str) -> list[str]:
    return [
        f"def {n['fn']}({n['items']}):",
        f'    """The sum of {n["H"]} over the {n["items"]}."""',
        f"    {n['total']} = 0",
        f"    for {n['item']} in {n['items']}:",
        f"        {n['total']} += {n['H']}({n['item']})",
        f"    return {n['total']}",
    ]


def _lookup_score(n: Names, missing: str) -> list[str]:
    default = "0" if missing == "zero" else "-1"
    return [
        f"def {n['fn']}({n['items']}, {n['value']}):",
        f'    """{n["H"]} of the one of the {n["items"]} that {n["G"]} finds for {n["value"]}, or {default}."""',
        f"    {n['found']} = {n['G']}({n['items']}, {n['value']})",
        f"    if {n['found']} is None:",
        f"        return {default}",
        f"    return {n['H']}({n['found']})",
    ]


TEMPLATES: dict[str, Template] = {
    t.name: t
    for t in (
        Template(
            "select", ("items", "limit"), ITEMS_INT_TO_ITEMS, (("a", "int"),), (), (">", ">=", "<", "<="), None, _select
        ),
        Template(
            "between",
            ("items", "low", "high"),
            ITEMS_INT_INT_TO_ITEMS,
            (("a", "int"),),
            (),
            ("<=", "<"),
            None,
            _between,
        ),
        Template(
            "total", ("items",), ITEMS_TO_INT, (("a", "int"), ("flag", "bool")), (), ("skip", "only"), None, _total
        ),
        Template("count", ("items", "limit"), ITEMS_INT_TO_INT, (("a", "int"),), (), (">=", ">", "=="), None, _count),
        Template("find", ("items", "value"), ITEMS_INT_TO_MAYBE, (("a", "int"),), (), ("first", "last"), None, _find),
        Template("best", ("items",), ITEMS_TO_ITEM, (("a", "int"),), (), ("max", "min"), None, _best),
        Template("window", ("items", "page"), ITEMS_INT_TO_ITEMS, (), (), ("base0", "base1"), "K", _window),
        Template("locate", ("items", "limit"), ITEMS_INT_TO_INT, (("a", "int"),), (), ("<=", "<"), None, _locate),
        Template("score", ("item",), ITEM_TO_INT, (("a", "int"), ("b", "int")), (), ("plus", "minus"), "K", _score),
        Template("clamp", ("value", "low", "high"), INT3_TO_INT, (), (), ("saturate",), None, _clamp, typed=False),
        Template(
            "pipe",
            ("items", "limit"),
            ITEMS_INT_TO_INT,
            (),
            (("G", ITEMS_INT_TO_ITEMS), ("H", ITEMS_TO_INT)),
            ("compose",),
            None,
            _pipe,
        ),
        Template(
            "range_total",
            ("items", "low", "high"),
            ITEMS_INT_INT_TO_INT,
            (),
            (("G", ITEMS_INT_INT_TO_ITEMS), ("H", ITEMS_TO_INT)),
            ("compose",),
            None,
            _range_total,
        ),
        Template(
            "spread",
            ("items", "low", "high"),
            ITEMS_INT_INT_TO_INT,
            (),
            (("G", ITEMS_INT_TO_INT),),
            ("difference",),
            None,
            _spread,
        ),
        Template(
            "bounded",
            ("items", "low", "high"),
            ITEMS_INT_INT_TO_INT,
            (),
            (("G", ITEMS_TO_INT), ("C", INT3_TO_INT)),
            ("compose",),
            None,
            _bounded,
        ),
        Template(
            "top_score",
            ("items",),
            ITEMS_TO_INT,
            (),
            (("G", ITEMS_TO_ITEM), ("H", ITEM_TO_INT)),
            ("compose",),
            None,
            _top_score,
        ),
        Template("score_sum", ("items",), ITEMS_TO_INT, (), (("H", ITEM_TO_INT),), ("sum",), None, _score_sum),
        Template(
            "lookup_score",
            ("items", "value"),
            ITEMS_INT_TO_INT,
            (),
            (("G", ITEMS_INT_TO_MAYBE), ("H", ITEM_TO_INT)),
            ("zero", "minus_one"),
            None,
            _lookup_score,
        ),
    )
}
LEAVES = tuple(name for name, t in TEMPLATES.items() if t.leaf)
COMPOSITES = tuple(name for name, t in TEMPLATES.items() if not t.leaf)
ROLES = (
    "items",
    "item",
    "limit",
    "low",
    "high",
    "kept",
    "total",
    "count",
    "best",
    "page",
    "start",
    "index",
    "value",
    "found",
    "top",
    "upper",
    "lower",
    "result",
)
"""Variable roles; each world names them from its own lexicon (``result`` is the tests' local)."""
WIDE_RANGE_TEMPLATES = frozenset({"clamp", "bounded"})
"""Templates whose int arguments are a range for a total rather than a bound on one field."""


def contracts(template: Template, record_fields: Mapping[str, list[str]]) -> tuple[str, ...]:
    """The contracts a template can take on a record with these fields by type: a total without a
    flag field to guard on sums every record."""
    if template.name == "total" and not record_fields.get("bool"):
        return ("all",)
    return template.contracts


def needed_fields(template: Template, record_fields: Mapping[str, list[str]]) -> tuple[tuple[str, str], ...]:
    """The field slots a template fills on this record (``total`` drops its flag when there is none)."""
    if template.name == "total" and not record_fields.get("bool"):
        return (("a", "int"),)
    return template.fields
