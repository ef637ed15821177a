"""The documentation stays true to the tree: links resolve, nothing points outside the repository,
and config/README.md's key tables say what config/schema.yaml says.

What the key-table check reads (config/README.md's own conventions):

* A *key table* is a table whose header is ``| key | default | meaning | invalidates |``. Other
  tables (the stage-key table, the family table, the training-budget table) are prose and are not
  checked here.
* Its *section* is the backticked name that opens the nearest heading above it (``## `dedup`: ...``
  -> ``dedup``, ``### `study.families``` -> ``study.families``); a heading without one (``###
  Training budgets``) keeps the section of the heading it sits under. A key is a path below that
  section (``heldout.seed`` under ``synthesize`` is ``synthesize.heldout.seed``); a top-level key
  documented by one row (``domain``, ``domains``) is its own section.
* The key cell lists backticked keys separated by commas. A key that starts with ``.`` replaces
  the last part of the key before it (``rows_per_table.min``, ``.max``); ``a/b`` in a part stands
  for each of ``a`` and ``b`` (``methods.awm/genenv.unverifiable_goal``), and ``<domain>`` or
  ``<m>`` for every property the schema has there.
* The default cell holds one YAML value per key (commas inside brackets and braces do not split),
  or one value for all of them; a key that stands for several (``a/b``) takes one value per
  alternative, separated by ``/``. A parenthesised remark after a value is ignored. A default is
  compared with the schema's by type and value (``1e9`` reads as a number, ``true`` is not ``1``).

Besides each row naming a real key with the schema's default, every key of the schema is
documented by some row (itself or an ancestor: ``mixtures.bases.d_env`` documents its three
sub-keys through its default), and a row says ``nothing`` in its invalidates column exactly when
its keys are not hashed (``x-hashed: false`` on the key or an ancestor).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
LINKED_DOCS = sorted(
    {ROOT / "README.md", ROOT / "config" / "README.md", ROOT / "bench" / "README.md", *(ROOT / "docs").glob("*.md")}
)
"""Markdown files whose relative links must resolve."""
CONTAINED_DOCS = sorted({*LINKED_DOCS, *(ROOT / "workflow" / "report").glob("*.rst")})
"""Files that must not point outside the repository."""
OUTSIDE = re.compile(r"\.\./shared|/work/|shared/reference|\bDESIGN\.md\b|seed-paper")
"""Paths outside the repository: the shared design notes and reference documents, absolute paths of
this machine."""
NAMED_DOC = re.compile(r"`([\w./-]+\.(?:md|txt|rst))`")
"""A backticked document name: it must be a file of the repository."""
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
KEY_HEADER = ["key", "default", "meaning", "invalidates"]


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, markup and punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found, seen = set(), {}
    for line in outside_code(path.read_text()):
        match = HEADING.match(line)
        if match:
            base = slug(match.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def outside_code(text: str) -> list[str]:
    """The lines of a Markdown text outside fenced code blocks."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


@pytest.mark.parametrize("doc", LINKED_DOCS, ids=rel)
def test_every_relative_link_resolves(doc):
    broken = []
    for target in LINK.findall("\n".join(outside_code(doc.read_text()))):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
            continue
        path, _, anchor = target.partition("#")
        file = (doc.parent / path).resolve() if path else doc
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif ROOT not in file.parents and file != ROOT:
            broken.append(f"{target}: outside the repository")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no heading #{anchor} in {rel(file)}")
    assert not broken, f"{rel(doc)}: " + "; ".join(broken)


CITED_SECTION = re.compile(r'See ([\w./-]+\.md), "([^"]+)"')
"""A comment's pointer to a section of a document: ``See docs/guarantees.md, "Reruns after a change of logic"``."""
COMMENTED = sorted(
    {
        *(ROOT / "profiles").rglob("*.yaml"),
        *(ROOT / "workflow" / "profiles").rglob("*.yaml"),
        *(ROOT / "config").rglob("*.yaml"),
        *(ROOT / "workflow").rglob("*.smk"),
        *(ROOT / "workflow" / "axisrl").rglob("*.py"),
        ROOT / "Snakefile",
    }
)


def test_every_section_a_comment_cites_exists():
    """A ``See FILE.md, "Section"`` in a profile, config, rule or module names a heading that FILE has."""
    broken = []
    for path in COMMENTED:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for name, section in CITED_SECTION.findall(line):
                doc = ROOT / name
                if not doc.exists() or slug(section) not in anchors(doc):
                    broken.append(f"{rel(path)}:{number}: {name} has no section {section!r}")
    assert not broken, "\n".join(broken)


def test_the_plan_counts_config_readme_states_are_the_plans():
    """config/README.md's sentence on the default plan's size is the plan's (points, runs, seeds)."""
    import collections

    from axisrl.config import load_config
    from axisrl.plan import plan_designs, plan_rows

    text = " ".join((ROOT / "config" / "README.md").read_text().split())
    stated = re.search(
        r"The defaults give (\d+) grid points and (\d+) runs \((\d+) of the points only the `mixtures` family asks "
        r"for; the axis sweeps' (\d+) points have (\d+) seeds, the others (\d+)",
        text,
    )
    assert stated, "config/README.md no longer states the default plan's size in the sentence this test reads"
    study = load_config(ROOT / "config" / "config.yaml", schema_path=ROOT / "config" / "schema.yaml")["study"]
    designs = plan_designs(study)
    seeds = collections.Counter(row["point_key"] for row in plan_rows(designs, study, "toolworld"))
    swept = [key for key, planned in designs.items() if "axis_sweeps" in planned.families]
    others = {seeds[key] for key in designs if key not in swept}
    assert len(others) == 1 and len({seeds[key] for key in swept}) == 1
    actual = (
        len(designs),
        sum(seeds.values()),
        sum(planned.families == ["mixtures"] for planned in designs.values()),
        len(swept),
        seeds[swept[0]],
        others.pop(),
    )
    assert tuple(int(n) for n in stated.groups()) == actual


def test_the_docs_the_readme_promises_exist():
    assert {p.name for p in (ROOT / "docs").glob("*.md")} >= {
        "cluster.md",
        "guarantees.md",
        "methods.md",
        "tiny-backend.md",
    }


@pytest.mark.parametrize("doc", CONTAINED_DOCS, ids=rel)
def test_no_doc_points_outside_the_repository(doc):
    hits = [
        f"{rel(doc)}:{n}: {line.strip()[:100]}"
        for n, line in enumerate(doc.read_text().splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert not hits, "\n".join(hits)


@pytest.mark.parametrize("doc", CONTAINED_DOCS, ids=rel)
def test_every_document_a_doc_names_is_in_the_repository(doc):
    """A backticked ``*.md``/``*.txt``/``*.rst`` name resolves from the doc's folder or the root
    (outputs under ``results/`` excepted: they are generated)."""
    missing = [
        name
        for name in NAMED_DOC.findall(doc.read_text())
        if not name.startswith("results/") and not ((doc.parent / name).exists() or (ROOT / name).exists())
    ]
    assert not missing, f"{rel(doc)} names documents that are not in the repository: {missing}"


# ---- config/README.md against config/schema.yaml --------------------------------------------------


def split_top(text: str, sep: str = ",") -> list[str]:
    """``text`` split on ``sep`` outside brackets and braces."""
    parts, depth, current = [], 0, ""
    for char in text:
        depth += char in "[{"
        depth -= char in "]}"
        if char == sep and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    return [*parts, current]


def parse_value(text: str):
    text = re.sub(r"\s*\([^()]*\)\s*$", "", text.strip()).replace("`", "").strip()
    value = yaml.safe_load(text)
    return to_number(value)


def to_number(value):
    """YAML 1.1 reads ``1e9`` as a string; the README means a number."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    if isinstance(value, list):
        return [to_number(v) for v in value]
    if isinstance(value, dict):
        return {k: to_number(v) for k, v in value.items()}
    return value


def same(a, b) -> bool:
    """Equal in value and kind: a bool is not a number, an int equals the float of the same value."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return float(a) == float(b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def schema_node(schema: dict, path: list[str]) -> dict | None:
    node = schema
    for part in path:
        node = node.get("properties", {}).get(part)
        if node is None:
            return None
    return node


def not_hashed(schema: dict, path: list[str]) -> bool:
    node = schema
    for part in path:
        node = node["properties"][part]
        if node.get("x-hashed") is False:
            return True
    return False


def expand(schema: dict, section: list[str], parts: list[str]) -> list[tuple[str, ...]] | None:
    """Every concrete key path one key spec stands for (``a/b`` and ``<placeholder>`` expanded)."""
    paths: list[list[str]] = [[]]
    for part in parts:
        grown = []
        for path in paths:
            if part.startswith("<") and part.endswith(">"):
                node = schema_node(schema, section + path)
                names = list((node or {}).get("properties", {})) or [part]
            else:
                names = part.split("/")
            grown += [path + [name] for name in names]
        paths = grown
    return [tuple(p) for p in paths]


def key_rows(readme: str):
    """(line number, section, key cell, default cell, invalidates cell) of every key-table row."""
    section: list[str] | None = None
    top: list[str] | None = None
    in_table = False
    for n, line in enumerate(readme.splitlines(), 1):
        heading = HEADING.match(line)
        if heading:
            named = re.match(r"`([\w.]+)`", heading.group(2))
            if len(heading.group(1)) <= 2:
                top = named.group(1).split(".") if named else None
                section = top
            else:
                section = named.group(1).split(".") if named else top
            in_table = False
            continue
        if not line.startswith("|"):
            in_table = False
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells == KEY_HEADER:
            in_table = True
            continue
        if in_table and not set(line) <= set("|- "):
            yield n, section, cells[0], cells[1], cells[-1]


SCHEMA = yaml.safe_load((ROOT / "config" / "schema.yaml").read_text())
README = (ROOT / "config" / "README.md").read_text()
ROWS = list(key_rows(README))


def documented_keys(row) -> list[tuple[tuple[str, ...], object]]:
    """The (key path, README default) pairs one row documents; raises AssertionError on a bad row."""
    n, section, key_cell, default_cell, _ = row
    assert section is not None, f"config/README.md:{n}: a key table under a heading that names no section"
    specs = re.findall(r"`([^`]+)`", key_cell)
    assert specs, f"config/README.md:{n}: no backticked key in {key_cell!r}"
    full: list[list[str]] = []
    for spec in specs:
        if spec.startswith("."):
            assert full, f"config/README.md:{n}: {spec!r} continues no key"
            full.append(full[-1][:-1] + spec[1:].split("."))
        else:
            full.append(spec.split("."))
    if len(section) == 1 and full == [section]:  # a top-level key that is its own section
        base = []
    else:
        base = section
    defaults = split_top(default_cell)
    if len(defaults) == 1 and len(full) > 1:
        defaults = defaults * len(full)
    assert len(defaults) == len(full), (
        f"config/README.md:{n}: {len(full)} keys but {len(defaults)} defaults in {default_cell!r}"
    )
    pairs = []
    for parts, default in zip(full, defaults, strict=True):
        paths = expand(SCHEMA, base, parts)
        alternatives = split_top(default, "/") if len(paths) > 1 else [default]
        if len(alternatives) == 1:
            alternatives = alternatives * len(paths)
        assert len(alternatives) == len(paths), (
            f"config/README.md:{n}: {'.'.join(parts)} stands for {len(paths)} keys but {default!r} has "
            f"{len(alternatives)} values"
        )
        for path, value in zip(paths, alternatives, strict=True):
            pairs.append((tuple(base) + path, parse_value(value)))
    return pairs


def test_the_readme_has_key_tables_for_every_section():
    sections = {tuple(section) for _, section, *_ in ROWS if section}
    assert sections >= {(name,) for name in SCHEMA["properties"]}, "a schema section without a key table"


@pytest.mark.parametrize("row", ROWS, ids=lambda row: f"line{row[0]}")
def test_a_key_row_names_schema_keys_with_the_schema_default(row):
    n = row[0]
    for path, readme_default in documented_keys(row):
        node = schema_node(SCHEMA, list(path))
        assert node is not None, f"config/README.md:{n}: {'.'.join(path)} is not a key of config/schema.yaml"
        assert "default" in node, f"config/README.md:{n}: {'.'.join(path)} has no default in the schema"
        assert same(readme_default, to_number(node["default"])), (
            f"config/README.md:{n}: {'.'.join(path)} defaults to {node['default']!r} in the schema, "
            f"the README says {readme_default!r}"
        )


@pytest.mark.parametrize("row", ROWS, ids=lambda row: f"line{row[0]}")
def test_a_key_row_says_nothing_is_invalidated_exactly_when_its_keys_are_not_hashed(row):
    n, invalidates = row[0], row[-1]
    hashed = {not_hashed(SCHEMA, list(path)) for path, _ in documented_keys(row)}
    assert len(hashed) == 1, f"config/README.md:{n}: one row mixes hashed and unhashed keys"
    says_nothing = invalidates.startswith("nothing")
    assert says_nothing == hashed.pop(), (
        f"config/README.md:{n}: invalidates {invalidates!r}, but the schema "
        f"{'does not hash' if not says_nothing else 'hashes'} these keys"
    )


def schema_leaves(node: dict, path: tuple[str, ...] = ()):
    properties = node.get("properties")
    if not properties:
        yield path
        return
    for name, child in properties.items():
        yield from schema_leaves(child, (*path, name))


def test_every_schema_key_has_a_row():
    documented = {path for row in ROWS for path, _ in documented_keys(row)}
    missing = [
        ".".join(leaf)
        for leaf in schema_leaves(SCHEMA)
        if not any(leaf[:k] in documented for k in range(1, len(leaf) + 1))
    ]
    assert not missing, f"schema keys config/README.md does not document: {missing}"


def test_the_key_check_catches_a_misspelled_key_and_a_drifted_default():
    """The check itself: a row with a typo in its key, or a default that drifted, fails."""
    good = (1, ["synthesize"], "`tables.min`, `.max`", "2, 4", "everything but `plan`")
    assert [(p, v) for p, v in documented_keys(good)] == [
        (("synthesize", "tables", "min"), 2),
        (("synthesize", "tables", "max"), 4),
    ]
    typo = (1, ["synthesize"], "`n_wrolds`", "24", "everything")
    drift = (1, ["recipe"], "`budgets.low`, `.high`, `.n`", "0.25, 16, 16", "recipe")
    for row in (typo, drift):
        with pytest.raises(AssertionError):
            test_a_key_row_names_schema_keys_with_the_schema_default(row)
    slashed = (1, ["sources"], "`methods.awm/genenv.unverifiable_goal`", "0.10 / 0.15", "sources")
    test_a_key_row_names_schema_keys_with_the_schema_default(slashed)
    with pytest.raises(AssertionError):
        test_a_key_row_names_schema_keys_with_the_schema_default(
            (1, ["sources"], "`methods.awm/genenv.unverifiable_goal`", "0.15 / 0.10", "sources")
        )
