"""Run a stage function for a Snakemake ``script:`` job: log to the job's log, fail in one line.

The only module that touches the ``snakemake`` object, and only through duck typing, so the
stages stay free of Snakemake and the scripts in ``workflow/scripts/`` stay one call long. The
scripts name their stage instead of importing it, so a job the warm server runs (``axisrl.warm``)
imports nothing heavy in its own process.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from typing import Any

from axisrl import warm

CALL_STAGE = "axisrl.scripting:call_stage"
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def run_stage(job: Any, stage: str) -> None:
    """Call ``axisrl.stages.<stage>(spec, settings, inputs, outputs)`` with the job's named params
    and files: in a child of the warm server when one answers, else in this process. Math libraries
    get the job's ``threads`` unless the environment already says otherwise: torch would otherwise
    take every core of the machine, whatever the job claimed."""
    for name in THREAD_VARIABLES:
        os.environ.setdefault(name, str(job.threads))
    args = (stage, job.params.spec, job.params.settings, _files(job.input), _files(job.output))
    if warm.enabled(job.threads):
        status = warm.run(CALL_STAGE, args, job.log[0])
        if status:
            sys.exit(status)
        if status is not None:
            return
    warm.run_here(CALL_STAGE, args, job.log[0])


def call_stage(stage: str, spec: Any, settings: Mapping[str, Any], inputs: Mapping[str, Any],
               outputs: Mapping[str, Any]) -> None:
    """``axisrl.stages.<stage>``; a bad input ends the job with one error line, not a traceback."""
    from axisrl import stages
    from axisrl.artifacts import ArtifactError
    from axisrl.datasets import PoolTooSmall

    try:
        getattr(stages, stage)(spec, settings, inputs, outputs)
    except (ArtifactError, PoolTooSmall) as exc:
        logging.getLogger("axisrl").error("%s", exc)
        sys.exit(1)
    except Exception:
        logging.getLogger("axisrl").exception("stage failed")
        raise


def _files(files: Any) -> dict[str, Any]:
    """Named files as plain strings and lists (a Snakemake ``Namedlist`` would need Snakemake to unpickle)."""
    return {name: list(value) if isinstance(value, list) else value for name, value in files.items()}
