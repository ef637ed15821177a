"""Tool signatures: a spec's tool entries compiled into ``Tool``s, the parameters each primitive
takes and the name an agent calls it by. Apart from ``Runtime`` because a signature depends only on
its table and the world's lexicon, not on execution.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from axisrl.domains.toolworld.model import OPS, Field, Param, Table, Tool


def compile_tool(tool: Mapping[str, Any], table: Table, lex: Mapping[str, str], status_field: str) -> Tool:
    """A spec's tool entry on ``table`` as its typed signature: the parameters its primitive takes
    (in the world's names from ``lex``) and its surface name, verb and table (and field, if it has one)."""
    prim = tool["prim"]
    ident = Param("id", lex["param:id"], "id", True, table=table.sym)
    value_fields = table.of_type("int", "enum")
    selector = Param(
        "field", lex["param:field"], "sel", True, choices=tuple(f.sym for f in table.of_type("int", "enum", "status"))
    )

    def value_param(f: Field, required: bool) -> Param:
        return Param(f.sym, f.name, "int" if f.type == "int" else "enum", required, field=f.sym)

    if prim == "lookup":
        params: tuple[Param, ...] = (Param("key", table.by_sym["f0"].name, "key", True),)
    elif prim in ("get", "delete"):
        params = (ident,)
    elif prim == "list":
        params = ()
    elif prim == "filter":
        params = (
            selector,
            Param("op", lex["param:op"], "op", True, choices=OPS),
            Param("value", lex["param:value"], "val", True),
        )
    elif prim == "aggregate":
        params = (
            selector,
            Param("value", lex["param:value"], "val", True),
            Param("total", lex["param:total"], "sel", False, choices=tuple(f.sym for f in table.of_type("int"))),
        )
    elif prim == "create":
        params = (Param("key", table.by_sym["f0"].name, "key", True), *(value_param(f, True) for f in value_fields))
    elif prim == "update" and tool["field"] is None:
        params = (ident, *(value_param(f, False) for f in value_fields))
    elif prim == "update":
        params = (ident, value_param(table.by_sym[tool["field"]], True))
    elif prim == "link":
        ref = table.by_sym[tool["field"]]
        params = (ident, Param(ref.sym, ref.name, "id", True, table=ref.target))
    elif prim == "transition":
        params = (ident, Param("to", lex["param:to"], "enum", True, field=status_field))
    else:
        raise ValueError(f"unknown primitive {prim!r}")
    name = f"{lex['verb:' + prim]}_{table.name}"
    if tool["field"] is not None:
        name += "_" + table.by_sym[tool["field"]].name
    return Tool(tool["sym"], prim, table.sym, tool["field"], name, params, {p.name: p for p in params})
