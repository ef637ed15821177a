"""A study across domains (``domains:``): each domain's study runs as its own, under
``domains/<name>/``; this job reads their frames and writes the tables and figure that set them side
by side (in the study's own folder, ``results/studies/<key>/``)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from axisrl.artifacts import read_artifact
from axisrl.config import StageSpec

log = logging.getLogger("axisrl")

DOMAINS_RULE = "domains"
"""The rule (and job) that writes the side-by-side targets."""

FRAMES = {"axis_fits": "laws", "trends": "laws", "ordering": "laws", "points": "laws", "pool_stats": "dedup"}
"""The frames each domain's study hands this job (name -> the stage that wrote it), besides its runs."""
TITLES = {
    "table2": "Table 2 across domains: per-axis exponents of the main axis sweeps, trends of held-out success "
    "and the ordering of the exponents, per domain",
    "table6": "Table 6 across domains: raw generator outputs to signature-distinct environments, per domain and split",
    "table18": "Table 18 across domains: measured cost drivers per domain (means over its finished runs)",
    "table_base": "RL against its base across domains: of each domain's finished runs that start from a base, "
    "their bases' success on V, their mean, the mean paired gain and how many end above their base",
}
FIGURES = {"fig2": "Figure 2 across domains: per-axis scaling laws, a row of panels per domain"}


def input_name(domain: str, frame: str) -> str:
    """The job's input name of one domain's frame (``runs``: its collected runs)."""
    return f"{domain}__{frame}"


def side_by_side(
    spec: StageSpec | None, settings: Mapping[str, Any], inputs: Mapping[str, str], outputs: Mapping[str, str]
) -> None:
    """Tables 2, 6 and 18, RL against its base and Figure 2 with a row per domain of ``settings["domains"]``."""
    from axisrl.report import domains as side
    from axisrl.report.figures import figure2_rows
    from axisrl.report.tables import write_markdown

    names = settings["domains"]

    def frames(frame: str, stage: str) -> dict[str, Any]:
        return {d: read_artifact(inputs[input_name(d, frame)], stage) for d in names}

    laws = {frame: frames(frame, stage) for frame, stage in FRAMES.items()}
    runs = frames("runs", "collect")
    exponents = side.exponents_by_domain(laws["axis_fits"], laws["trends"], laws["ordering"])
    tables = {
        "table2": (exponents, side.exponents_markdown(exponents)),
        "table6": (side.pools_by_domain(laws["pool_stats"]),) * 2,
        "table18": (side.drivers_by_domain(runs),) * 2,
        "table_base": (side.base_by_domain(runs),) * 2,
    }
    for name, (frame, shown) in tables.items():  # every column in the CSV, so each domain's row has the same ones
        write_markdown(shown, outputs[f"{name}_markdown"], TITLES[name])
        frame.write_csv(outputs[f"{name}_csv"])
        log.info("%s across %d domains", name, len(names))
    rows = {d: (laws["points"][d], laws["axis_fits"][d], laws["trends"][d]) for d in names}
    figure2_rows(rows, Path(outputs["fig2_png"]), Path(outputs["fig2_pdf"]))
