"""Named mutation operators and the finite set of one-line rewrites an agent may make.

A bug is one operator applied at one site of one source line; an edit replaces a line with one of
its *offered rewrites*: every operator applied at every site of that line. Each operator is its
own inverse up to its family (a flipped comparison flips back, a ``+ 1`` added to a bound is
dropped again, two swapped arguments swap back), so the fix of every injected bug is among the
rewrites of the buggy line, next to its neighbours (the other rewrites of that line), which are
the wrong edits a task must reject. Rewrites are computed from the line's text and two facts
about the repository (which attribute names are record fields of the same type, and which names
are its functions), so they are the same for the generator, the environment and a reskin.

Operators (``OPERATORS``):

* ``flip_comparison``: ``<`` <-> ``>``, ``<=`` <-> ``>=``, ``==`` <-> ``!=``;
* ``boundary``: ``<`` <-> ``<=``, ``>`` <-> ``>=`` (an off-by-one in a comparison);
* ``off_by_one``: a subscript or slice bound ``e`` -> ``e + 1`` / ``e - 1`` and back (an
  integer bound ``n`` -> ``n +- 1``, never below 0);
* ``swap_arguments``: two adjacent arguments of a call to a repository function;
* ``wrong_field``: ``x.f`` -> ``x.g`` for another record field of the same type;
* ``negation``: ``if not c`` <-> ``if c`` (a dropped or added negation);
* ``wrong_constant``: ``NAME = n`` (and ``NAME += n``) -> ``n +- 1``, never below 0;
* ``wrong_operator``: binary ``+`` <-> ``-``, ``+=`` <-> ``-=``.
"""

from __future__ import annotations

import io
import keyword
import tokenize
from collections.abc import Mapping
from dataclasses import dataclass

OPERATORS = (
    "flip_comparison",
    "boundary",
    "off_by_one",
    "swap_arguments",
    "wrong_field",
    "negation",
    "wrong_constant",
    "wrong_operator",
)
FLIP = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "==": "!=", "!=": "=="}
BOUNDARY = {"<": "<=", "<=": "<", ">": ">=", ">=": ">"}
ARITHMETIC = {"+": "-", "-": "+", "+=": "-=", "-=": "+="}
INERT_PREFIXES = ("def ", "class ", "from ", "import ", "@", "#", '"""', "'''")
"""Lines that offer no rewrite: headers, imports, decorators, comments and docstrings."""


@dataclass(frozen=True, slots=True)
class Rewrite:
    """One offered rewrite of a line: the operator that makes it and the whole new line."""

    operator: str
    text: str


@dataclass(frozen=True, slots=True)
class Context:
    """What rewrites need to know of the repository: for each record field name, the other fields
    of its record with the same type (``wrong_field``), and the repository's function names
    (``swap_arguments``)."""

    field_alternatives: Mapping[str, tuple[str, ...]]
    functions: frozenset[str]


@dataclass(frozen=True, slots=True)
class _Token:
    type: int
    string: str
    start: int
    end: int


def _tokens(body: str) -> list[_Token] | None:
    try:
        raw = list(tokenize.generate_tokens(io.StringIO(body).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    skip = (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER, tokenize.INDENT, tokenize.DEDENT, tokenize.COMMENT)
    return [_Token(t.type, t.string, t.start[1], t.end[1]) for t in raw if t.type not in skip and t.start[0] == 1]


def _compiles(body: str) -> bool:
    """Whether the line is valid Python as a statement inside a function body."""
    suite = "def _():\n    " + body + ("\n        pass" if body.endswith(":") else "")
    try:
        compile(suite, "<rewrite>", "exec", dont_inherit=True)
    except SyntaxError:
        return False
    return True


def _closing(tokens: list[_Token], opening: int) -> int | None:
    """Index of the bracket closing ``tokens[opening]``."""
    depth = 0
    for k in range(opening, len(tokens)):
        if tokens[k].type == tokenize.OP and tokens[k].string in "([{":
            depth += 1
        elif tokens[k].type == tokenize.OP and tokens[k].string in ")]}":
            depth -= 1
            if depth == 0:
                return k
    return None


def _split(tokens: list[_Token], first: int, last: int, separator: str) -> list[tuple[int, int]]:
    """Top-level segments ``[i, j)`` of ``tokens[first:last]`` between ``separator`` tokens."""
    segments, depth, begin = [], 0, first
    for k in range(first, last):
        token = tokens[k]
        if token.type == tokenize.OP and token.string in "([{":
            depth += 1
        elif token.type == tokenize.OP and token.string in ")]}":
            depth -= 1
        elif depth == 0 and token.type == tokenize.OP and token.string == separator:
            segments.append((begin, k))
            begin = k + 1
    segments.append((begin, last))
    return segments


def _is_operand_end(token: _Token) -> bool:
    if token.type == tokenize.NAME:
        return not keyword.iskeyword(token.string) or token.string in ("None", "True", "False")
    return token.type in (tokenize.NUMBER, tokenize.STRING) or token.string in (")", "]")


def _replace(body: str, start: int, end: int, text: str) -> str:
    return body[:start] + text + body[end:]


def rewrites(line: str, context: Context) -> tuple[Rewrite, ...]:
    """Every offered rewrite of ``line`` (indentation kept), in a fixed order, without duplicates."""
    body = line.strip()
    if not body or body.startswith(INERT_PREFIXES):
        return ()
    tokens = _tokens(body)
    if not tokens:
        return ()
    indent = line[: len(line) - len(line.lstrip())]
    found: list[tuple[str, str]] = []

    def add(operator: str, new_body: str) -> None:
        found.append((operator, new_body))

    literal_line = (
        len(tokens) == 3
        and tokens[0].type == tokenize.NAME
        and tokens[1].string in ("=", "+=", "-=")
        and tokens[2].type == tokenize.NUMBER
        and tokens[2].string.isdigit()
    )
    for k, token in enumerate(tokens):
        previous = tokens[k - 1] if k else None
        if token.type == tokenize.OP:
            if token.string in BOUNDARY:
                add("boundary", _replace(body, token.start, token.end, BOUNDARY[token.string]))
            if token.string in FLIP:
                add("flip_comparison", _replace(body, token.start, token.end, FLIP[token.string]))
            if token.string in ("+=", "-=") or (
                token.string in ("+", "-") and previous is not None and _is_operand_end(previous)
            ):
                add("wrong_operator", _replace(body, token.start, token.end, ARITHMETIC[token.string]))
        elif token.type == tokenize.NAME:
            if token.string == "not" and k + 1 < len(tokens):
                add("negation", _replace(body, token.start, tokens[k + 1].start, ""))
            elif previous is not None and previous.string == "." and token.string in context.field_alternatives:
                for other in context.field_alternatives[token.string]:
                    add("wrong_field", _replace(body, token.start, token.end, other))
        elif token.type == tokenize.NUMBER and literal_line and k == 2:
            value = int(token.string)
            for new in (value + 1, value - 1):
                if new >= 0:  # a negative literal is two tokens, whose rewrites would not lead back
                    add("wrong_constant", _replace(body, token.start, token.end, str(new)))

    if body.startswith("if ") and not body.startswith("if not "):
        add("negation", "if not " + body[len("if ") :])

    for k, token in enumerate(tokens):
        if token.type != tokenize.OP or token.string != "[" or k == 0 or not _is_operand_end(tokens[k - 1]):
            continue
        if tokens[k - 1].type == tokenize.NAME and keyword.iskeyword(tokens[k - 1].string):
            continue
        close = _closing(tokens, k)
        if close is None:
            continue
        for first, last in _split(tokens, k + 1, close, ":"):
            if first >= last:
                continue
            segment = tokens[first:last]
            start, end = segment[0].start, segment[-1].end
            if len(segment) == 1 and segment[0].type == tokenize.NUMBER and segment[0].string.isdigit():
                value = int(segment[0].string)
                for new in (value + 1, value - 1):
                    if new >= 0:
                        add("off_by_one", _replace(body, start, end, str(new)))
            elif len(segment) > 2 and segment[-2].string in ("+", "-") and segment[-1].string == "1":
                add("off_by_one", _replace(body, segment[-3].end, end, ""))
            else:
                for suffix in (" + 1", " - 1"):
                    add("off_by_one", _replace(body, end, end, suffix))

    for k, token in enumerate(tokens):
        if token.type != tokenize.NAME or token.string not in context.functions or k + 1 >= len(tokens):
            continue
        if tokens[k + 1].string != "(" or (k and tokens[k - 1].string in ("def", ".")):
            continue
        close = _closing(tokens, k + 1)
        if close is None:
            continue
        arguments = [(first, last) for first, last in _split(tokens, k + 2, close, ",") if first < last]
        for (a_first, a_last), (b_first, b_last) in zip(arguments, arguments[1:]):
            a = body[tokens[a_first].start : tokens[a_last - 1].end]
            b = body[tokens[b_first].start : tokens[b_last - 1].end]
            middle = body[tokens[a_last - 1].end : tokens[b_first].start]
            swapped = b + middle + a
            add("swap_arguments", _replace(body, tokens[a_first].start, tokens[b_last - 1].end, swapped))

    out: list[Rewrite] = []
    seen = {body}
    for operator, new_body in found:
        if new_body in seen or not _compiles(new_body):
            continue
        seen.add(new_body)
        out.append(Rewrite(operator, indent + new_body))
    return tuple(out)


def normalise(text: str) -> str:
    """A line compared up to indentation and spacing between tokens (how an agent's replacement is
    matched against the offered rewrites)."""
    tokens = _tokens(text.strip())
    if tokens is None:
        return " ".join(text.split())
    return " ".join(token.string for token in tokens)


def inverse_offered(original: str, mutated: str, context: Context) -> bool:
    """Whether ``original`` is among the rewrites of ``mutated`` (every injected bug must be fixable)."""
    return any(r.text == original for r in rewrites(mutated, context))
