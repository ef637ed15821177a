"""Run a Snakemake ``script:`` job's stage: log to the job's log, fail in one line.

The only module that touches the ``snakemake`` object, and only through duck typing, so the stages
stay free of Snakemake and every rule's script is the same one-line shim
(``workflow/scripts/stage.py``). A job's stage is its rule's name; the job's process imports nothing
heavy itself, so a job the warm server runs (``axisrl.warm``) pays for no import.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator, Mapping
from typing import Any

from axisrl import warm
from axisrl.threads import limit_threads

CALL_STAGE = "axisrl.scripting:call_stage"


class Uncompared(Mapping[str, Any]):
    """A keyed stage's settings as its job's ``params``, hidden from Snakemake's params trigger.

    Snakemake compares only builtin values of ``params`` with what it recorded; this is not one. A
    keyed stage needs no comparison (its output path carries the hash of every hashed setting it
    reads), and one would rerun the job when a setting that never changes results (``x-hashed:
    false``: resources, loggers, checkpoint cadence, batch sizes) changed."""

    def __init__(self, settings: Mapping[str, Any]) -> None:
        self._settings = dict(settings)

    def __getitem__(self, key: str) -> Any:
        return self._settings[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._settings)

    def __len__(self) -> int:
        return len(self._settings)

    def __repr__(self) -> str:
        return f"Uncompared({self._settings!r})"


def run_stage(job: Any) -> None:
    """Run the stage named by ``job.rule`` with the job's named params and files: in a child of the
    warm server when one answers, else in this process, with the job's ``threads`` for math libraries."""
    limit_threads(job.threads)
    args = (job.rule, job.params.spec, dict(job.params.settings), _files(job.input), _files(job.output))
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
