"""Run a stage function for a Snakemake ``script:`` job: log to the job's log, fail in one line.

The only module that touches the ``snakemake`` object, and only through duck typing, so the
stages stay free of Snakemake and the scripts in ``workflow/scripts/`` stay one call long.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any

from axisrl.artifacts import ArtifactError
from axisrl.datasets import PoolTooSmall


def run_stage(job: Any, stage: Callable[..., None]) -> None:
    """Call ``stage(spec, settings, inputs, outputs)`` with the job's named params and files."""
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(message)s",
        handlers=[logging.FileHandler(job.log[0], mode="w"), logging.StreamHandler(sys.stderr)],
        force=True,
    )
    try:
        stage(job.params.spec, job.params.settings, dict(job.input.items()), dict(job.output.items()))
    except (ArtifactError, PoolTooSmall) as exc:
        logging.getLogger("axisrl").error("%s", exc)
        sys.exit(1)
    except Exception:
        logging.getLogger("axisrl").exception("stage failed")
        raise
