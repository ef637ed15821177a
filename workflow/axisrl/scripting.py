"""Run a Snakemake ``script:`` job's stage: log to the job's log, fail in one line.

The only module that touches the ``snakemake`` object, and only through duck typing, so the stages
stay free of Snakemake and every rule's script is the same one-line shim
(``workflow/scripts/stage.py``). A job's stage is its rule's name; the job's process imports nothing
heavy itself, so a job the warm server runs (``axisrl.warm``) pays for no import.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from typing import Any

from axisrl import warm
from axisrl.threads import limit_threads

CALL_STAGE = "axisrl.scripting:call_stage"


def run_stage(job: Any) -> None:
    """Run the stage named by ``job.rule`` with the job's named params and files: in a child of the
    warm server when one answers, else in this process, with the job's ``threads`` for math libraries."""
    limit_threads(job.threads)
    args = (job.rule, job.params.spec, job.params.settings, _files(job.input), _files(job.output))
    if warm.enabled(job.threads):
        status = warm.run(CALL_STAGE, args, job.log[0])
        if status:
            sys.exit(status)
        if status is not None:
            return
    warm.run_here(CALL_STAGE, args, job.log[0])


def call_stage(
    rule: str, spec: Any, settings: Mapping[str, Any], inputs: Mapping[str, Any], outputs: Mapping[str, Any]
) -> None:
    """The stage of ``rule``; a bad input ends the job with one error line, not a traceback."""
    from axisrl.artifacts import ArtifactError
    from axisrl.datasets import PoolTooSmall
    from axisrl.stages import job_function

    try:
        job_function(rule, settings)(spec, settings, inputs, outputs)
    except (ArtifactError, PoolTooSmall) as exc:
        logging.getLogger("axisrl").error("%s", exc)
        sys.exit(1)
    except Exception:
        logging.getLogger("axisrl").exception("stage failed")
        raise


def _files(files: Any) -> dict[str, Any]:
    """Named files as plain strings and lists (a Snakemake ``Namedlist`` would need Snakemake to unpickle)."""
    return {name: list(value) if isinstance(value, list) else value for name, value in files.items()}
