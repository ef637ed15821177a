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
Body = Callable[[Names, str], list[str]]
"""A template's renderer: its source lines from the slots' names and a contract."""


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

    @classmethod
    def parse(cls, text: str) -> Kind:
        """The kind written ``params->returns``, parameters comma-separated: ``items,int->item?``."""
        params, returns = text.split("->")
        return cls(tuple(params.split(",")), returns)


INT3_TO_INT = Kind.parse("int,int,int->int")
"""The one untyped kind (``clamp``'s): callee slots of this kind take an untyped function."""


@dataclass(frozen=True, slots=True)
class Template:
    """``params``: the variable roles of the parameters (named from the world's lexicon);
    ``fields``: record-field slots and their types; ``callees``: callee slots and the kinds they
    need; ``contracts``: semantic options (the first ``len > 1`` of them are L1 edits);
    ``constant``: the slot of a module-level constant the function reads (its value is L0 content)."""

    name: str
    params: tuple[str, ...]
    kind: Kind
    fields: tuple[tuple[str, str], ...]
    callees: tuple[tuple[str, Kind], ...]
    contracts: tuple[str, ...]
    constant: str | None
    body: Body

    @property
    def leaf(self) -> bool:
        return not self.callees

    @property
    def typed(self) -> bool:
        """Whether it works on a record type (takes records)."""
        return any(p.startswith("item") for p in self.kind.params)


COMPARISON_WORDS = {">": "above", ">=": "at least", "<": "below", "<=": "at most", "==": "equal to"}

# The bodies: each template's source, a line an item. They are alike in shape only, each writing its own code.


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


TABLE = (
    # name, parameter roles, return kind, field slots, callee slots (their kinds), contracts, constant slot, body
    ("select", "items limit", "items", "a:int", "", "> >= < <=", None, _select),
    ("between", "items low high", "items", "a:int", "", "<= <", None, _between),
    ("total", "items", "int", "a:int flag:bool", "", "skip only", None, _total),
    ("count", "items limit", "int", "a:int", "", ">= > ==", None, _count),
    ("find", "items value", "item?", "a:int", "", "first last", None, _find),
    ("best", "items", "item", "a:int", "", "max min", None, _best),
    ("window", "items page", "items", "", "", "base0 base1", "K", _window),
    ("locate", "items limit", "int", "a:int", "", "<= <", None, _locate),
    ("score", "item", "int", "a:int b:int", "", "plus minus", "K", _score),
    ("clamp", "value low high", "int", "", "", "saturate", None, _clamp),
    ("pipe", "items limit", "int", "", "G:items,int->items H:items->int", "compose", None, _pipe),
    ("range_total", "items low high", "int", "", "G:items,int,int->items H:items->int", "compose", None, _range_total),
    ("spread", "items low high", "int", "", "G:items,int->int", "difference", None, _spread),
    ("bounded", "items low high", "int", "", "G:items->int C:int,int,int->int", "compose", None, _bounded),
    ("top_score", "items", "int", "", "G:items->item H:item->int", "compose", None, _top_score),
    ("score_sum", "items", "int", "", "H:item->int", "sum", None, _score_sum),
    ("lookup_score", "items value", "int", "", "G:items,int->item? H:item->int", "zero minus_one", None, _lookup_score),
)
"""One row a template, space-separated lists: a parameter of role ``items`` or ``item`` takes records, any other an
int; a field slot is ``slot:type``, a callee slot ``slot:kind`` (``Kind.parse``)."""


def _template(
    name: str, roles: str, returns: str, fields: str, callees: str, contracts: str, constant: str | None, body: Body
) -> Template:
    params = tuple(roles.split())
    kind = Kind(tuple(p if p in ("items", "item") else "int" for p in params), returns)
    slots = [tuple(pair.split(":")) for pair in fields.split()]
    called = [(slot, Kind.parse(text)) for slot, text in (pair.split(":") for pair in callees.split())]
    return Template(name, params, kind, tuple(slots), tuple(called), tuple(contracts.split()), constant, body)


TEMPLATES: dict[str, Template] = {row[0]: _template(*row) for row in TABLE}
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
