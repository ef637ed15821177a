"""The report family: the catalog of artifacts, and every table and figure target (``axisrl.targets``)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from axisrl.artifacts import catalog as list_artifacts
from axisrl.artifacts import read_artifact, write_artifact
from axisrl.config import StageSpec
from axisrl.stages.registry import resolve
from axisrl.targets import FIGURES, TABLES, Target, labelled

log = logging.getLogger("axisrl")


def catalog(
    spec: StageSpec, settings: Mapping[str, Any], inputs: Mapping[str, str], outputs: Mapping[str, str]
) -> None:
    """List every artifact under the results folder the catalog's ``<stage>/<key>/`` folder sits in (all keys,
    not only the current config's)."""
    frame = list_artifacts(Path(outputs["catalog"]).parents[2])
    write_artifact(frame, outputs["catalog"], spec)
    log.info("catalog: %d artifacts", frame.height)


def _frames(target: Target, inputs: Mapping[str, str]) -> dict[str, Any]:
    return {name: read_artifact(inputs[name], stage) for name, (stage, _) in target.frames.items() if name in inputs}


def table(
    spec: StageSpec | None, settings: Mapping[str, Any], inputs: Mapping[str, str], outputs: Mapping[str, str]
) -> None:
    """One table of the paper as compact Markdown and full CSV."""
    from axisrl.report.tables import write_table

    target = TABLES[settings["name"]]
    frame = resolve(target.make)(**_frames(target, inputs), **settings["options"])
    title = labelled(target.title, settings["reduced"])
    write_table(frame, outputs["markdown"], outputs["csv"], title, settings["name"])
    log.info("%s: %d rows", settings["name"], frame.height)


def figure(
    spec: StageSpec | None, settings: Mapping[str, Any], inputs: Mapping[str, str], outputs: Mapping[str, str]
) -> None:
    """One figure of the paper as PNG and PDF."""
    target = FIGURES[settings["name"]]
    resolve(target.make)(**_frames(target, inputs), **settings["options"], png=outputs["png"], pdf=outputs["pdf"])
    log.info("%s: drawn", settings["name"])
