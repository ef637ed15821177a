"""repoworld's compact view (``repoworld.lexicon``): every reference plays through the view's
candidates and succeeds, every token is structural or a symbol, a re-skinned repository renders
identically, views are deterministic per episode seed, forks are independent, and the tiny policy's
features build."""

from __future__ import annotations

import json

import view_checks
from domain_fixtures import NO_PLACEBO_SWEEP, synthesize

from axisrl.backends.tiny.rollout import call_key
from axisrl.domains import load
from axisrl.domains import repoworld as rw
from axisrl.domains.repoworld.env import MAX_FAILURES
from axisrl.domains.repoworld.lexicon import MAX_PAIRS, report
from axisrl.domains.repoworld.repo import compile_repo
from axisrl.domains.repoworld.spec import names_of

SMALL = {
    "n_worlds": 3,
    "variants_per_world": 2,
    "contents_per_variant": 2,
    "reskins_per_world": 1,
    "tasks_per_env": 4,
    "placebo_contents": 2,
    "placebo_tasks_per_env": 3,
    "heldout": {
        "tasks_per_env": 4,
        "t0_envs": 2,
        "t1_envs": 2,
        "t2_worlds": 4,
        "t2_variants_per_world": 2,
        "validation_worlds": 1,
    },
}
"""A smaller pool than ``test_repoworld``'s, in its style (every API variant shows up)."""

pool, specs, tasks = view_checks.fixtures(lambda schema: rw.generate_pool(synthesize(schema, SMALL, NO_PLACEBO_SWEEP)))


def test_the_domain_loads_the_view():
    assert load("repoworld").compact_view is rw.compact_view


def test_every_reference_plays_through_the_view_and_succeeds(specs, tasks):
    apis = {tuple(sorted(spec["structure"]["api"].items())) for spec in specs.values()}
    assert {dict(api)["read"] for api in apis} == {"file", "definition"}
    assert {dict(api)["tests"] for api in apis} == {"file", "suite"}
    assert {dict(api)["search"] for api in apis} == {True, False}
    view_checks.every_reference_succeeds(rw, specs, tasks)


def test_every_token_is_structural_or_a_symbol(specs, tasks):
    view_checks.every_token_is_structural_or_a_symbol(rw, specs, tasks, MAX_PAIRS)


def test_goal_clauses_state_the_report(specs, tasks):
    """The reported function is the symbol ``read_definition``/``search`` would pass; the expected and
    the actual value are its ``eq`` and ``absent`` clauses; the bug's place is never stated."""
    for n, task in enumerate(tasks):
        spec = specs[task["env_id"]]
        env, view = view_checks.start(rw, spec, task, n)
        fn, expected, actual = report(task["instruction"])
        assert fn in compile_repo(spec).functions
        subject = view.name(fn, "E")
        heads = {clause[0]: clause for clause in view.goal}
        assert heads["eq"][1] == heads["absent"][1] == subject == heads.get("ref", [None, subject])[1]
        if actual is None:
            assert heads["absent"][2] == "err"
        if expected.lstrip("-").isdigit():
            assert heads["eq"][2] == f"#{int(expected)}"
        bug = json.loads(task["goal"])["bug"]
        named = {key[1] for key in view.name.names}
        assert bug["path"] not in named and bug["text"] not in named and bug["original"].strip() not in named
        if spec["structure"]["api"]["read"] == "definition":  # a candidate reads it, passing the same token
            k = view_checks.keys(view).index(call_key({"name": "read_definition", "arguments": {"name": fn}}))
            position, pointer = view.candidates()[k]
            assert view.current().values[pointer][0] == subject


def _corresponding(spec: dict, skinned: dict, task: dict, other: dict) -> bool:
    """Whether two tasks of a repository and its reskin are the same bug reported from the same test
    (the generator keeps this but for rare seeds), and their outputs show every failure (the
    environment truncates a long failure list in name order)."""
    a, b = json.loads(task["goal"]), json.loads(other["goal"])
    ra, rb = compile_repo(spec), compile_repo(skinned)

    def place(repo, goal):
        path, test = goal["reported"].split("::")
        bug = goal["bug"]
        return repo.rank[path], repo.definitions[test].start, repo.rank[bug["path"]], bug["line"], goal["operator"]

    return place(ra, a) == place(rb, b) and len(a["failing"]) <= MAX_FAILURES


def test_a_reskinned_repository_renders_identically(specs, pool):
    """Same structure and content under another skin: the same tasks in other names, and the same
    tokens at every step of their references; no token holds a word of either vocabulary."""
    compared = view_checks.reskin_renders_identically(
        rw, specs, pool.envs[::3], lambda spec: names_of(spec).vocabulary(), _corresponding
    )
    assert compared >= 8


def test_views_are_deterministic_and_another_seed_draws_other_slots(specs, tasks):
    view_checks.deterministic_per_seed(rw, specs, tasks)


def _an_edit_first(offered: list[str]) -> list[int]:
    """An edit, where one is offered (it changes the fork's files only), then the first candidates."""
    return [*[k for k, key in enumerate(offered) if '"edit"' in key][:1], 0, 0]


def test_a_forked_view_steps_independently(specs, tasks):
    view_checks.forks_step_independently(rw, specs, tasks, _an_edit_first)


def test_a_random_policy_builds_the_tiny_features(specs, tasks):
    view_checks.random_policy_builds_features(rw, specs, tasks)
