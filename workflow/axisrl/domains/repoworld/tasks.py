"""Answer-first tasks: one injected bug each, written up as an issue report.

Every offered rewrite of every source line is a candidate bug (a named ``mutations`` operator at
one site). Walking them in a seeded uniform order (so the ``n`` tasks of an environment are a
prefix of its ``2n`` and drawn from the same distribution), a bug is kept when the suite fails on
it (without running out of time) and its fix is among the rewrites of the buggy line. Its report
is derived from a failing test, the one whose function is farthest up the call chain from the bug
(what a user of the top-level function sees): the test's input, what came back, what was
expected; never the line or the fix. The reference solution is a developer's: run the tests, list
the files, read the failing test and the record types, follow the call chain from the reported
function down (search, then read), run the buggy function's own tests, edit, read the change
again, run the reported test file, the buggy function's and the suite, finish. A task is kept only
if every reference call is among ``candidates()`` at its step, the reference passes the verifier,
and both a no-op episode and a wrong edit (another rewrite, of the buggy line where it has one)
fail it: the filter toolworld's ``tasks.py`` applies, with the verifier run for real.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from typing import Any

from axisrl.domains.canon import canonical_json, derive_seed, short_hash
from axisrl.domains.repoworld.env import RepoworldEnv, call
from axisrl.domains.repoworld.mutations import Rewrite, inverse_offered
from axisrl.domains.repoworld.repo import Repository, TestCase, compile_repo
from axisrl.domains.repoworld.runner import SuiteResult, TestOutcome, run_suite
from axisrl.domains.repoworld.world import function_template
from axisrl.domains.toolworld.model import FINISH

OPENINGS = (
    "{fn} gives a wrong result.",
    "Unexpected output from {fn}.",
    "Bug report: {fn} does not return what it should.",
    "{fn} misbehaves on the input below.",
    "Wrong answer from {fn}.",
)
CLOSINGS = (
    "",
    "\n\nPlease fix it.",
    "\n\nThis used to work as documented.",
    "\n\nCould you take a look?",
)
_LOCATION = re.compile(r" \([^()]*\.py, line \d+\)$")


def _with_line(files: Mapping[str, str], path: str, number: int, text: str) -> dict[str, str]:
    out = dict(files)
    lines = out[path].split("\n")
    lines[number - 1] = text
    out[path] = "\n".join(lines)
    return out


def report(case: TestCase, outcome: TestOutcome, rng: random.Random) -> str:
    """The issue report of a failing test: its input, what happened and what was expected."""
    setup = "\n".join("    " + line for text in case.setup for line in text.split("\n"))
    if outcome.observed is not None:
        happened = f"Actual: {outcome.observed}"
    else:
        happened = f"Actual: it raises {_LOCATION.sub('', outcome.raised or outcome.message)}"
    steps = (setup + "\n" if setup else "") + f"    {case.call}"
    fn = f"`{case.function}`"
    return (
        rng.choice(OPENINGS).format(fn=fn)
        + f"\n\nTo reproduce:\n\n{steps}\n\nExpected: {case.expected}\n{happened}"
        + rng.choice(CLOSINGS)
    )


def reference_calls(
    repo: Repository, case: TestCase, chain: list[str], bug_path: str, bug_line: int, fix: str, own_test: str | None
) -> list[dict[str, Any]]:
    """A developer's solution (see the module docstring), in the calls the API offers."""
    api = repo.api
    calls = [call("run_tests"), call("list_files")]
    record = next((n for n in sorted(repo.classes) if re.search(rf"\b{n}\(", "\n".join(case.setup))), None)
    if api["read"] == "file":
        calls.append(call("read_file", path=case.path))
        calls.append(call("read_file", path=repo.records_path))
        view = repo.records_path
        for function in chain:
            path = repo.definitions[function].path
            if path != view:
                if api["search"]:
                    calls.append(call("search", name=function))
                calls.append(call("read_file", path=path))
                view = path
    else:
        calls.append(call("read_definition", name=case.name))
        if record is not None:
            calls.append(call("read_definition", name=record))
        for function in chain:
            if api["search"]:
                calls.append(call("search", name=function))
            calls.append(call("read_definition", name=function))
        owner = repo.owner(bug_path, bug_line)
        if owner is not None and owner.kind == "constant":
            calls.append(call("read_definition", name=owner.name))
    if api["tests"] == "file" and own_test is not None and own_test != case.path:
        calls.append(call("run_tests", path=own_test))
    calls.append(call("edit", path=bug_path, line=bug_line, replacement=fix.strip()))
    calls.append(calls[-2] if calls[-2]["name"].startswith("read_") else _review(repo, bug_path, bug_line))
    if api["tests"] == "file":
        calls.append(call("run_tests", path=case.path))
        if own_test is not None and own_test != case.path:
            calls.append(call("run_tests", path=own_test))
    calls.append(call("run_tests"))
    return calls + [call(FINISH)]


def _review(repo: Repository, path: str, line: int) -> dict[str, Any]:
    """Read the edited code again (how a developer checks a change)."""
    if repo.api["read"] == "file":
        return call("read_file", path=path)
    owner = repo.owner(path, line)
    return call("read_definition", name=owner.name)


def _plays(spec: Mapping[str, Any], task: Mapping[str, Any], calls: list[dict[str, Any]]) -> bool:
    """Whether every call is a candidate at its step and the episode verifies."""
    env = RepoworldEnv(spec, task)
    env.reset()
    for c in calls:
        if c not in env.candidates():
            return False
        env.step(c)
    return env.verify().success


def _wrong_edit(
    repo: Repository, buggy: Mapping[str, str], path: str, number: int, original: str, rng: random.Random
) -> str | None:
    """A neighbour of the fix that still fails the suite: another rewrite of the buggy line, else of
    a line of the same definition."""
    owner = repo.owner(path, number)
    lines = buggy[path].split("\n")
    order = [number] + ([n for n in range(owner.start, owner.end + 1) if n != number] if owner else [])
    for n in order:
        options = [r for r in repo.rewrites(lines[n - 1]) if not (n == number and r.text == original)]
        for rewrite in rng.sample(options, len(options)):
            if not run_suite(_with_line(buggy, path, n, rewrite.text), repo.test_paths).success:
                return f"{path}:{n}:{rewrite.text.strip()}"
    return None


def _skill(repo: Repository, rewrite: Rewrite, functions: tuple[str, ...], depth: int, constant: bool) -> str:
    """The mutation operator, the kind of code it sits in and how far the symptom is from it."""
    spec_functions = {repo.names.function(f["sym"]): f for f in repo.spec["structure"]["functions"]}
    templates = sorted(function_template(spec_functions[f]).name for f in functions if f in spec_functions)
    return short_hash(
        ["repoworld-skill", rewrite.operator, templates, "constant" if constant else "code", min(depth, 3)]
    )


def _draft(
    spec: Mapping[str, Any], repo: Repository, env_id: str, path: str, number: int, rewrite: Rewrite, rng: random.Random
) -> dict[str, Any] | None:
    original = repo.lines[path][number - 1]
    buggy = _with_line(repo.files, path, number, rewrite.text)
    result: SuiteResult = run_suite(buggy, repo.test_paths)
    if result.success or result.timed_out or not inverse_offered(original, rewrite.text, repo.context):
        return None
    targets = repo.functions_at(path, number)
    if not targets:
        return None
    reachable = []
    for outcome in result.failing():
        case = repo.tests[outcome.test_id]
        chain = repo.call_path(case.function, targets)
        if chain is not None:
            reachable.append((len(chain) - 1, outcome.test_id, chain))
    if not reachable:
        return None
    depth = max(d for d, _, _ in reachable)
    deepest = sorted(
        (t for t in reachable if t[0] == depth),
        key=lambda t: (repo.rank[repo.tests[t[1]].path], repo.definitions[repo.tests[t[1]].name].start),
    )
    _, test_id, chain = rng.choice(deepest)
    case = repo.tests[test_id]
    outcome = next(o for o in result.outcomes if o.test_id == test_id)
    own = next((o for o in result.failing() if repo.tests[o.test_id].function == chain[-1]), None)
    own_test = repo.tests[own.test_id].path if own is not None else None
    instruction = report(case, outcome, rng)
    calls = reference_calls(repo, case, chain, path, number, original, own_test)
    if len(calls) > repo.max_steps:
        return None
    wrong = _wrong_edit(repo, buggy, path, number, original, rng)
    if wrong is None:
        return None
    goal = {
        "bug": {"path": path, "line": number, "text": rewrite.text, "original": original},
        "operator": rewrite.operator,
        "reported": test_id,
        "failing": [o.test_id for o in result.failing()],
        "tests": result.total,
        "wrong_edit": wrong,
    }
    reference = canonical_json(calls)
    goal_json = canonical_json(goal)
    task = {
        "task_id": short_hash(["repoworld-task", env_id, reference, goal_json]),
        "env_id": env_id,
        "skeleton": ">".join(c["name"] for c in calls[:-1]),
        "skill_sig": _skill(repo, rewrite, targets, depth, repo.owner(path, number).kind == "constant"),
        "verifier_sig": short_hash(["repoworld-suite", result.total, len(result.failing())]),
        "instruction": instruction,
        "reference": reference,
        "goal": goal_json,
        "answer": None,
        "n_steps": len(calls) - 1,
        "n_distractors": len(repo.functions) - len(chain),
        "id_depth": depth,
    }
    if not _plays(spec, task, calls):
        return None
    return task


def mutation_sites(repo: Repository) -> list[tuple[str, int, Rewrite]]:
    """Every (source file, line, offered rewrite) of the clean repository, files in their name-free order."""
    return [
        (path, number, rewrite)
        for path in sorted(repo.source_paths, key=repo.rank.__getitem__)
        for number, line in enumerate(repo.lines[path], start=1)
        for rewrite in repo.rewrites(line)
    ]


def generate_tasks(spec: Mapping[str, Any], env_id: str, n_tasks: int, seed: int) -> list[dict[str, Any]]:
    """Up to ``n_tasks`` filtered task rows for the environment ``spec`` (id ``env_id``), from ``seed``.

    Candidate bugs are tried in a seeded order until ``n_tasks`` are kept or none is left, so a
    small repository yields fewer tasks rather than looping. A reskin with the same seed gets the
    same bugs in its own names (sites, and the tests a report may come from, are ordered by their
    name-free position, not by file name)."""
    repo = compile_repo(spec)
    clean = run_suite(repo.files, repo.test_paths)
    if not clean.success:
        failing = [o.message for o in clean.failing()][:3]
        raise ValueError(f"a generated repository fails its own tests: {failing}")
    sites = mutation_sites(repo)
    rng = random.Random(derive_seed(seed, "tasks"))
    tasks: list[dict[str, Any]] = []
    for index in rng.sample(range(len(sites)), len(sites)):
        if len(tasks) >= n_tasks:
            break
        path, number, rewrite = sites[index]
        task = _draft(spec, repo, env_id, path, number, rewrite, rng)
        if task is not None:
            tasks.append(task)
    return tasks
