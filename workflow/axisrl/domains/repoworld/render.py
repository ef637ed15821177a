"""The chat rendering for LLMs: messages plus OpenAI function-calling tools, in toolworld's shape.

``render_chat`` gives the system message (what the repository is, how edits work, when the task is
done) and the issue report as the user message; ``tool_schemas`` the tools the spec's API has,
``finish`` last. Observations are the JSON objects ``step`` returns, rendered as every domain's are.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from axisrl.domains.repoworld.env import tool_names
from axisrl.domains.repoworld.repo import TESTS_DIR
from axisrl.domains.repoworld.spec import names_of

EDIT_RULE = (
    "An edit replaces one whole line of a source file with a small change of that line: a comparison "
    "operator, a + or -, a record field, the order of two arguments of a call, a `not`, an integer "
    "constant, or a + 1 / - 1 on an index or slice bound. Other replacements are refused, with the list "
    "of those the line admits."
)


def _string(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def _function(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            },
        },
    }


def tool_schemas(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """OpenAI function-calling tools of the spec's API, ``finish`` last."""
    api = spec["structure"]["api"]
    path = _string("a file path as list_files shows it, e.g. tests/test_x.py")
    schemas = {
        "list_files": _function("list_files", "List every file of the repository.", {}, []),
        "read_file": _function("read_file", "Show a file with its line numbers.", {"path": path}, ["path"]),
        "read_definition": _function(
            "read_definition",
            "Show one top-level function, class or constant (test functions too) with its file and line numbers.",
            {"name": _string("the name of the function, class or constant")},
            ["name"],
        ),
        "search": _function(
            "search",
            "Every line of every file where a name occurs as a whole word, as path:line: text.",
            {"name": _string("an identifier")},
            ["name"],
        ),
        "run_tests": (
            _function(
                "run_tests",
                "Run the tests of one test file, or the whole suite when no path is given; returns how many "
                "passed and failed, with each failure.",
                {"path": _string("a test file under tests/ (optional)")},
                [],
            )
            if api["tests"] == "file"
            else _function(
                "run_tests", "Run the whole test suite; returns how many passed and failed, with each failure.", {}, []
            )
        ),
        "edit": _function(
            "edit",
            "Replace one line of a source file. " + EDIT_RULE,
            {
                "path": _string("a source file (the tests are read-only)"),
                "line": {"type": "integer", "description": "the line number, as read_file shows it", "minimum": 1},
                "replacement": _string("the whole new text of the line (indentation is kept)"),
            },
            ["path", "line", "replacement"],
        ),
        "finish": _function("finish", "Submit the repository as it is; the test suite decides.", {}, []),
    }
    return [schemas[name] for name in tool_names(api)]


def render_chat(spec: Mapping[str, Any], task: Mapping[str, Any]) -> dict[str, Any]:
    """``{"messages": [system, user], "tools": [...]}`` for one task; the user message is its issue report."""
    names = names_of(spec)
    sources = sorted(p for p in spec["files"] if not p.startswith(TESTS_DIR))
    tests = sorted(p for p in spec["files"] if p.startswith(TESTS_DIR))
    system = "\n".join(
        [
            f"You maintain the Python package `{names('package')}`: {len(sources)} source files and "
            f"{len(tests)} test files under {TESTS_DIR} (plain test functions with asserts).",
            "A user has reported a bug. Find it with the tools and fix it in the source. " + EDIT_RULE,
            "The tests are read-only. The task is solved when the whole test suite passes; call finish then.",
        ]
    )
    return {
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": task["instruction"]}],
        "tools": tool_schemas(spec),
    }
