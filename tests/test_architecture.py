"""The package's imports point one way, down its floors (docs/architecture.md): no module of ``workflow/axisrl``
imports one on a floor above its own, nothing imports the command line, no module imports Snakemake, and none
reaches itself through its imports. Every import counts, those inside functions and ``TYPE_CHECKING`` blocks
included: a lazy import is still a dependency, and a circle there is still two modules that each need the other.
Shared types live below both users (``backends/tiny/settings.py``, ``registry.py``)."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT

PACKAGE = ROOT / "workflow" / "axisrl"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path, modules: set[str]) -> set[str]:
    """The package's modules that ``path`` imports anywhere in its text: ``from a.b import c`` names ``a.b.c``
    where that is a module, else ``a.b``."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            found.update(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names)
    nearest = set()
    for target in found:
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target and target != name:
            nearest.add(target)
    return nearest


def import_graph() -> dict[str, set[str]]:
    paths = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    return {name: imported(path, set(paths)) for name, path in paths.items()}


FLOORS = (
    ("the command line", ("cli", "cli_inputs", "model_command")),
    ("the jobs", ("stages", "scripting", "warm")),
    (
        "the analysis and report",
        ("targets", "report", "planner", "recipe", "pricing", "laws", "adaptive", "cluster_cost"),
    ),
    ("the study's logic", ("config", "plan", "budget", "datasets", "dedup", "embedding", "artifacts")),
    ("the backends", ("backends",)),
    ("the domains", ("domains",)),
    ("the leaves", ("__init__", "synthesis", "threads", "diagnostics", "schema")),
)
"""The package's floors, top first, by the module or subpackage of ``axisrl`` each part is (``__init__``: the
package's own): a module may import its own floor and those below it, never one above. The leaves import
nothing of the package, so every floor may read them."""

FLOOR = {part: (level, name) for level, (name, parts) in enumerate(FLOORS) for part in parts}


def part(module: str) -> str:
    """The module or subpackage of ``axisrl`` that ``module`` is or lies in (``axisrl.stages.train``: stages)."""
    return module.split(".")[1] if "." in module else "__init__"


def upward(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a module on a floor above the importer's, as ``importer -> imported`` and their floors."""
    return sorted(
        f"{module} -> {target} (from {FLOOR[part(module)][1]} up to {FLOOR[part(target)][1]})"
        for module, targets in graph.items()
        for target in targets
        if part(module) in FLOOR and part(target) in FLOOR and FLOOR[part(target)][0] < FLOOR[part(module)][0]
    )


def test_every_module_of_the_package_is_on_a_floor():
    """A new module or subpackage is placed in ``FLOORS`` (and docs/architecture.md), so its imports are checked."""
    unplaced = sorted(module for module in import_graph() if part(module) not in FLOOR)
    assert not unplaced, "on no floor: " + ", ".join(unplaced)


def test_imports_point_down_the_floors():
    wrong_way = upward(import_graph())
    assert not wrong_way, "\n".join(wrong_way)


def test_the_direction_check_names_an_upward_import():
    graph = {"axisrl.domains.pool": {"axisrl.stages.registry", "axisrl.synthesis"}, "axisrl.stages": {"axisrl.plan"}}
    assert upward(graph) == ["axisrl.domains.pool -> axisrl.stages.registry (from the domains up to the jobs)"]


def test_nothing_imports_the_command_line():
    importers = [module for module, targets in import_graph().items() if "axisrl.cli" in targets]
    assert not importers, "\n".join(f"{module} -> axisrl.cli" for module in sorted(importers))


def test_no_module_of_the_package_imports_snakemake():
    """The stages, domains and backends know nothing of Snakemake; ``scripting`` reads its job by duck typing."""
    found = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            if any(name.split(".")[0] == "snakemake" for name in names):
                found.append(f"{module_name(path)} -> snakemake")
    assert not found, "\n".join(sorted(found))


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_no_module_of_the_package_imports_itself_through_others():
    assert circles(import_graph()) == []


def test_the_circle_check_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]


MOST_LINES = 600
"""A module a newcomer can read whole; a longer one splits along a seam it already has (docs/architecture.md)."""


def test_no_module_of_the_package_is_over_600_lines():
    long = {
        str(path.relative_to(PACKAGE)): lines
        for path in PACKAGE.rglob("*.py")
        if (lines := len(path.read_text().splitlines())) > MOST_LINES
    }
    assert long == {}


def test_every_procedural_domain_assembles_its_tiers_through_levels():
    """toolworld, webworld and repoworld build their pools through ``domains.levels.assemble_pool`` (one tier
    machinery: a fix to tier assembly is made once): each ``generate_pool`` returns its call."""
    for domain in ("toolworld", "webworld", "repoworld"):
        tree = ast.parse((PACKAGE / "domains" / domain / "pool.py").read_text())
        generate = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "generate_pool")
        calls = {node.func.id for node in ast.walk(generate) if isinstance(node, ast.Call) and hasattr(node.func, "id")}
        assert "assemble_pool" in calls, f"{domain}'s generate_pool does not call levels.assemble_pool"
