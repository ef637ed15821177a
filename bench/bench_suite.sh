#!/usr/bin/env bash
# The test suite's wall time on this machine: the fast loop (`pytest -m "not slow"`), then every test but the science
# checks (`pytest`, as CI runs it), then the science checks (`pytest -m science`; SUBSETS="fast full" leaves them
# out), each as a whole process under /usr/bin/time, with the CPU, the core count and the commit named.
# Run it from a checkout with the README's install done and nothing else running beside it; pass pytest options
# after the script's name (pytest runs in parallel by default, pyproject.toml's addopts; `-n 0` times it in one
# process). The numbers go in bench/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
echo "commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' (with uncommitted changes)'), ${cpu}, $(nproc) cores"
for subset in ${SUBSETS:-fast full science}; do
    marker=()
    [[ $subset == fast ]] && marker=(-m "not slow")
    [[ $subset == science ]] && marker=(-m science)
    log=$(mktemp)
    status=0
    /usr/bin/time -o "$log.time" -f '%e s wall, %M KB peak RSS of the pytest process' \
        pytest -p no:cacheprovider -q "${marker[@]}" "$@" >"$log" 2>&1 || status=$?
    echo "$subset: $(cat "$log.time"), exit $status: $(grep -E '[0-9]+ (passed|failed)' "$log" | tail -n 1 | tr -d '=')"
    rm -f "$log" "$log.time"
done
