"""webworld's compact view (``webworld.lexicon``): every reference plays through the view's
candidates, every token is structural or a symbol, a re-skinned site renders identically, views are
deterministic per episode seed, forks are independent, and the tiny policy's features build."""

from __future__ import annotations

import json
import re

import view_checks
from domain_fixtures import PLACEBO, SMALL, synthesize

from axisrl.domains import load
from axisrl.domains import webworld as ww
from axisrl.domains.webworld.lexicon import MAX_PAIRS, constraints

pool, specs, tasks = view_checks.fixtures(lambda schema: ww.generate_pool({**synthesize(schema, SMALL), **PLACEBO}))
"""``test_webworld``'s small pool (``domain_fixtures.SMALL`` with ``PLACEBO``): every family, tier and optional
tool shows up."""


def test_the_domain_loads_the_view():
    assert load("webworld").compact_view is ww.compact_view


def test_every_reference_plays_through_the_view_and_succeeds(specs, tasks):
    view_checks.every_reference_succeeds(ww, specs, tasks)


def test_every_token_is_structural_or_a_symbol(specs, tasks):
    view_checks.every_token_is_structural_or_a_symbol(ww, specs, tasks, MAX_PAIRS)


def test_goal_clauses_state_what_the_instruction_does(specs, tasks):
    """The constraints read from the instruction hold for the target, one per phrase; form values,
    the quantity and the question are clauses."""
    kinds = set()
    for n, task in enumerate(tasks):
        spec = specs[task["env_id"]]
        env, view = view_checks.start(ww, spec, task, n)
        goal, site = json.loads(task["goal"]), env.site
        heads = [clause[0] for clause in view.goal]
        kinds.add(goal["kind"])
        assert heads.count("eq") >= len(goal.get("fields", {}))
        if goal["kind"] == "register":
            assert "exists" in heads and "ask_find" not in heads
            continue
        stated = constraints(site, task["instruction"], goal)
        phrases = re.findall(r" is (?:under |over )?\S+?(?=,|\.|\?| and |$)", task["instruction"].split(" whose ")[1])
        assert len(stated) == len(phrases) == heads.count("ask_find") >= 1, task["instruction"]
        item = site.items[goal["item"]]
        for sym, op, value in stated:
            actual = item.values[sym]
            a = site.attribute[sym]
            assert actual < value if op == "lt" else actual > value if op == "gt" else a.words[actual] == value
        if goal["kind"] == "buy":
            assert ["eq", view.name(site.quantity.name, "F"), f"#{goal['quantity']}"] in view.goal
        else:
            assert heads.count("ask") + heads.count("ask_aggregate") == 1 and "absent" in heads
    assert kinds == {"buy", "register", "lookup", "compare"}


def test_a_reskinned_site_renders_identically(specs, pool):
    """Same structure and content under another skin: the same tasks in other words, and the same
    tokens at every step of their references; no token holds a word of either vocabulary."""
    compared = view_checks.reskin_renders_identically(
        ww, specs, pool.envs[::4], lambda spec: ww.compile_site(spec).vocabulary()
    )
    assert compared >= 8


def test_views_are_deterministic_and_another_seed_draws_other_slots(specs, tasks):
    view_checks.deterministic_per_seed(ww, specs, tasks)


def test_a_forked_view_steps_independently(specs, tasks):
    view_checks.forks_step_independently(ww, specs, tasks, lambda offered: [0, 0, 0])


def test_a_random_policy_builds_the_tiny_features(specs, tasks):
    view_checks.random_policy_builds_features(ww, specs, tasks)
