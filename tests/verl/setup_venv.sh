#!/usr/bin/env bash
# Create .venv-verl, where the verl backend's CPU tests run:
#   bash tests/verl/setup_venv.sh && .venv-verl/bin/python -m pytest tests/verl
# verl 0.9.1 pins transformers<5.11, which must not reach the main environment, so verl gets its own
# venv that still sees the main environment's packages (--system-site-packages: CPU torch, polars,
# numpy). axisrl is installed into it editable from this checkout, so the tests (and verl's workers)
# import this tree whichever checkout the main environment points at.
# Idempotent and quiet: a venv whose stamp matches the requirements is left as it is; pip's output
# goes to .venv-verl/install.log and is shown only when an install fails.
set -euo pipefail
cd "$(dirname "$0")/../.."

VENV=.venv-verl
# `pip install verl` alone cannot run: the V1 trainer imports transfer_queue and the agent loop
# imports cachetools and uvicorn (all from verl's verl-core extra, whose GPU-side rest is not needed).
REQUIREMENTS=(verl==0.9.1 cachetools uvicorn fastapi pyzmq msgspec TransferQueue)
STAMP="$VENV/.axisrl-requirements"
LOG="$VENV/install.log"

if [[ -f "$STAMP" && "$(cat "$STAMP")" == "${REQUIREMENTS[*]}" ]] \
    && "$VENV/bin/python" -c "import importlib.util as u, sys
sys.exit(any(u.find_spec(m) is None for m in ('verl', 'transfer_queue', 'cachetools', 'uvicorn', 'axisrl')))"; then
    exit 0
fi

python -m venv --system-site-packages "$VENV"
install() {
    if ! "$VENV/bin/python" -m pip install --disable-pip-version-check "$@" >>"$LOG" 2>&1; then
        cat "$LOG" >&2
        exit 1
    fi
}
: >"$LOG"
install "${REQUIREMENTS[@]}"
install --no-deps --no-build-isolation -e .
echo "${REQUIREMENTS[*]}" >"$STAMP"
