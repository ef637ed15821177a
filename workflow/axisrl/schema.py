"""The config schema, ``config/schema.yaml``: the one place a setting's default is written.

Code that builds settings without a config (the tiny trainer's ``TrainSettings``, a test, a bench
script) reads its defaults here, so they cannot drift from a study's. It imports nothing of the
package, so every floor may read it.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "config" / "schema.yaml"
"""The schema of the checkout this package runs from (the package is installed editable, beside it)."""


@functools.cache
def schema() -> dict[str, Any]:
    with open(SCHEMA_PATH) as handle:
        return yaml.load(handle, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


RENAMED = {"group_size": "d_traj", "max_rollout_steps": "token_cap", "max_flops": "flop_cap"}
"""Names a setting or a column had before it took its config key's name (issue 60): a finished study's
checkpoints and Parquet files still hold them, and are read under the names of today."""


def current_names(names: Mapping[str, Any]) -> dict[str, Any]:
    """``names`` (a settings dict, or a frame's columns) with every old name of ``RENAMED`` given its
    name of today, unless that name is there too."""
    return {RENAMED[k] if k in RENAMED and RENAMED[k] not in names else k: v for k, v in names.items()}


def default(*path: str) -> Any:
    """The default of the setting at ``path`` (section, then keys), e.g. ``default("train", "lr")``."""
    node = schema()
    for depth, key in enumerate(path):
        try:
            node = node["properties"][key]
        except KeyError:
            raise KeyError(f"the schema has no setting {'.'.join(path[: depth + 1])}") from None
    if "default" not in node:
        raise KeyError(f"the schema gives {'.'.join(path)} no default")
    return node["default"]
