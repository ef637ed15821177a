#!/usr/bin/env bash
# Create the venv where the verl backend's CPU tests run (.venv-verl, or VERL_VENV), from the interpreter PYTHON
# (default: python). `pytest` calls this itself (tests/test_verl_venv.py) and runs the tests in it, as
#   bash tests/verl/setup_venv.sh && .venv-verl/bin/python -m pytest tests/verl
# verl 0.9.1 pins transformers<5.11, which must not reach the main environment, so verl gets a venv of its own
# that still sees PYTHON's packages (CPU torch, polars, numpy): a .pth file appends PYTHON's site directories
# after the venv's own, so that verl's transformers wins. (--system-site-packages would not do: run from a
# venv, it shows the base interpreter's packages, not the venv's.) axisrl is installed into it editable from
# this checkout, so the tests (and verl's workers) import this tree whichever checkout PYTHON points at.
# Idempotent and quiet: a venv whose stamp matches the requirements and PYTHON's site directories is left as
# it is, any other is made afresh; pip's output goes to install.log and is shown only when an install fails.
# Exits with CANNOT_BUILD, before touching the venv, where pip cannot fetch verl (no network or index).
set -euo pipefail
cd "$(dirname "$0")/../.."

VENV=${VERL_VENV:-.venv-verl}
PYTHON=${PYTHON:-python}
CANNOT_BUILD=77
# `pip install verl` alone cannot run: the V1 trainer imports transfer_queue and the agent loop
# imports cachetools and uvicorn (all from verl's verl-core extra, whose GPU-side rest is not needed).
# kernels: the main environment's newer transformers pulls a kernels (0.19) whose LayerRepository needs a
# revision, and the venv's transformers 5.10 imports it at import time without one; the venv gets the kernels
# range that its transformers declares (its `kernels` extra: >=0.12,<0.13).
REQUIREMENTS=(verl==0.9.1 cachetools uvicorn fastapi pyzmq msgspec TransferQueue "kernels>=0.12,<0.13")
STAMP="$VENV/.axisrl-requirements"
LOG="$VENV/install.log"

# PYTHON's site directories in its own sys.path order (user site, site-packages, and its base's where a
# venv includes them), one a line.
SITE_DIRS=$("$PYTHON" - "$VENV" <<'EOF'
import os, site, sys
if os.path.realpath(sys.prefix) == os.path.realpath(sys.argv[1]):
    sys.exit(f"setup_venv.sh: PYTHON is the verl venv itself ({sys.prefix}); run it from the main environment")
dirs = set(site.getsitepackages()) | ({site.getusersitepackages()} if site.ENABLE_USER_SITE else set())
print("\n".join(path for path in sys.path if path in dirs))
EOF
)
WANTED="${REQUIREMENTS[*]}"$'\n'"$SITE_DIRS"

if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$WANTED" ]] \
    && "$VENV/bin/python" -c "import importlib.util as u, sys
sys.exit(any(u.find_spec(m) is None for m in ('verl', 'transfer_queue', 'cachetools', 'uvicorn', 'axisrl')))"; then
    exit 0
fi

if ! probe=$("$PYTHON" -m pip install --dry-run --ignore-installed --no-deps --quiet verl==0.9.1 2>&1); then
    echo "cannot build $VENV: pip cannot fetch verl==0.9.1 here: $(tail -n 1 <<<"$probe")"
    exit "$CANNOT_BUILD"
fi

"$PYTHON" -m venv --clear "$VENV"
"$VENV/bin/python" - "$SITE_DIRS" <<'EOF'
import sys, sysconfig
from pathlib import Path
lines = [f"import site; site.addsitedir({path!r})\n" for path in sys.argv[1].splitlines()]
Path(sysconfig.get_path("purelib"), "axisrl-main-environment.pth").write_text("".join(lines))
EOF
install() {
    if ! "$VENV/bin/python" -m pip install --disable-pip-version-check "$@" >>"$LOG" 2>&1; then
        cat "$LOG" >&2
        exit 1
    fi
}
: >"$LOG"
install "${REQUIREMENTS[@]}"
install --no-deps -e .
printf '%s\n' "$WANTED" >"$STAMP"
