"""How many threads a job's math libraries may take: the one place that sets it.

torch, MKL and OpenBLAS otherwise take every core of the machine, whatever the job claimed, and two
threads in one process collapse when another job holds a core."""

from __future__ import annotations

import os
import sys

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def limit_threads(threads: int) -> None:
    """Give the math libraries ``threads`` threads unless the environment already says otherwise; torch,
    when it is already imported (a warm server's child), is told directly."""
    for name in THREAD_VARIABLES:
        os.environ.setdefault(name, str(threads))
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)
