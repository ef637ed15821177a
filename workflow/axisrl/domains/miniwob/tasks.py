"""The MiniWoB++ tasks this domain uses, grouped into families, and which tier each family serves.

Chosen from the tasks of miniwob 1.1, those an LLM can do with tool calls on the element list (click an
element, type text into a field, pick a dropdown option, press a key) and whose instance is fixed by its
seed. Left out: tasks played with coordinates or drags (``drag-*``, ``draw-*``, ``click-pie``,
``bisect-angle``, ``use-colorwheel``, sliders) or with more clicks than an episode has steps
(``use-spinner``, whose field takes no typing: up to ten clicks of an arrow); tasks judged on colours or
shapes in SVG or canvas (``click-color``, ``click-shades``, ``count-shape``, ``identify-shape``,
``visual-addition``); tasks that miniwob registers as nondeterministic for animations, clocks or widget
state (``book-flight``, ``choose-date``, ``click-dialog``, ``terminal``, ``stock-market``, the FlightWoB
sites); jQuery widgets that open on hover or after a delay (``click-menu``, ``use-autocomplete``,
``click-collapsible``, whose ``-nodelay`` twin is used); tasks whose instances look alike while their
answers differ (``guess-number``: the number is hidden) or that have only a few instances
(``click-test``, ``click-button-sequence``, ``focus-text``, ``focus-text-2``); and the ``-transfer`` and
``-turk`` copies of tasks already here. ``search-engine`` and ``social-media`` are kept: what makes them
nondeterministic in miniwob (pagination and scroll state left over from the previous episode) cannot
happen here, where every episode loads its page afresh.

A family is a task and its harder or reworded siblings (``enter-text`` and ``enter-text-2``): the first
task of a training family is trained on and the others are its T1 (a seen family under an unseen variant);
held-out and validation families are never trained on (T2 and V).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TaskInfo:
    """One MiniWoB task: its family and the skills an episode of it takes (the transition tokens)."""

    name: str
    family: str
    skills: tuple[str, ...]


SKILLS = ("click", "type", "select", "read", "reveal", "several")
"""``click`` elements; ``type`` text; ``select`` a dropdown option; ``read`` a value off the page to
use (a table cell, a sum); ``reveal`` what is hidden behind tabs, sections, folders, pages or an
opened email; ``several`` targets or fields in one instance."""

_TASKS = (
    # training families: the first task is trained on, the others are T1
    ("click-button", "click-button", ("click",)),
    ("click-link", "click-link", ("click",)),
    ("choose-list", "choose-list", ("select", "click")),
    ("click-checkboxes", "click-checkboxes", ("click", "several")),
    ("click-checkboxes-large", "click-checkboxes", ("click", "several")),
    ("enter-text", "enter-text", ("type", "click")),
    ("enter-text-2", "enter-text", ("type", "click")),
    ("login-user", "credentials", ("type", "click", "several")),
    ("enter-password", "credentials", ("type", "click", "several")),
    ("click-tab", "click-tab", ("click", "reveal")),
    ("click-tab-2", "click-tab", ("click", "reveal")),
    ("click-collapsible-nodelay", "click-collapsible", ("click", "reveal")),
    ("click-collapsible-2-nodelay", "click-collapsible", ("click", "reveal")),
    ("read-table", "read-table", ("read", "type", "click")),
    ("read-table-2", "read-table", ("read", "type", "click", "several")),
    ("simple-arithmetic", "arithmetic", ("read", "type", "click")),
    ("simple-algebra", "arithmetic", ("read", "type", "click")),
    ("multi-orderings", "movie-search", ("type", "click", "several")),
    ("multi-layouts", "movie-search", ("type", "click", "several")),
    ("email-inbox", "email-inbox", ("click", "type", "reveal")),
    ("email-inbox-forward-nl", "email-inbox", ("click", "type", "reveal")),
    # held-out families (T2)
    ("click-option", "click-option", ("click",)),
    ("click-widget", "click-widget", ("click",)),
    ("find-word", "find-word", ("read", "type", "click")),
    ("navigate-tree", "navigate-tree", ("click", "reveal")),
    ("search-engine", "search-engine", ("type", "click", "reveal")),
    ("social-media", "social-media", ("click",)),
    ("social-media-some", "social-media", ("click", "several")),
    ("social-media-all", "social-media", ("click", "several")),
    # validation families (V)
    ("buy-ticket", "buy-ticket", ("read", "click")),
    ("odd-or-even", "odd-or-even", ("read", "click", "several")),
    ("text-transform", "text-transform", ("read", "type", "click")),
)
TASKS = {name: TaskInfo(name, family, skills) for name, family, skills in _TASKS}
TRAIN_FAMILIES = (
    "click-button",
    "click-link",
    "choose-list",
    "click-checkboxes",
    "enter-text",
    "credentials",
    "click-tab",
    "click-collapsible",
    "read-table",
    "arithmetic",
    "movie-search",
    "email-inbox",
)
"""Families trained on (their first task); their other tasks are the T1 tier."""
HELDOUT_FAMILIES = ("click-option", "click-widget", "find-word", "navigate-tree", "search-engine", "social-media")
"""Families only T2 uses."""
VALIDATION_FAMILIES = ("buy-ticket", "odd-or-even", "text-transform")
"""Families only the validation tier V uses."""


def family_tasks(family: str) -> tuple[str, ...]:
    """A family's tasks, its trained (or first) task first."""
    return tuple(name for name, info in TASKS.items() if info.family == family)
