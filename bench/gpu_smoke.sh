#!/usr/bin/env bash
# The ten-minute GPU check (docs/cluster.md, "Before your first study: the ten-minute check"), as one script a
# machine with an NVIDIA GPU runs as it is: install verl and vLLM, write the tiny model (or take MODEL), run
# config/studies/gpu-smoke.yaml end to end on the one GPU under a time limit, then print what it measured: each
# verl step's seconds, tokens per second and peak GPU memory, each GPU job's wall time, the GPU's peak memory
# as nvidia-smi sampled it, and which jobs failed with the end of their logs.
#   bash bench/gpu_smoke.sh                            # the tiny model, vLLM evaluation
#   MODEL=/models/Qwen3-0.6B bash bench/gpu_smoke.sh   # a real local model (train.llm.model)
#   EVAL=hf bash bench/gpu_smoke.sh                    # transformers evaluation (evaluate.backend hf)
# Environment: VENV, the virtual environment it installs into once and reuses (default .venv-gpu-smoke);
# PYTHON, the interpreter that makes it (default python3, 3.11 or later); LIMIT, the seconds the study may take
# (default 600); CORES, Snakemake's cores (default all); OUT, the folder for the summary, the logs and the report
# (default results/gpu-smoke). The install needs PyPI or a wheel folder (PIP_FIND_LINKS with PIP_NO_INDEX=1) holding
# verl[vllm]==0.9.1 (torch, vLLM and flash-attn's wheels among its dependencies) and this package's
# dependencies; nothing is downloaded after it (HF_HUB_OFFLINE=1). One environment serves every rule here
# (verl's pinned vLLM evaluates too); a cluster builds the per-rule conda environments instead (docs/cluster.md).
# Exit status: 0 every job ran, 1 a job failed or the study ran past LIMIT, 2 no GPU, 3 the install failed.
set -euo pipefail

# builtins only until a GPU is found: a machine without one stops here with one line
if ! command -v nvidia-smi >/dev/null 2>&1 || ! gpus=$(nvidia-smi -L 2>/dev/null) || [[ $gpus != *GPU* ]]; then
    echo "gpu_smoke: needs an NVIDIA GPU (nvidia-smi found none)" >&2
    exit 2
fi

cd "$(dirname "$0")/.."
VENV=${VENV:-.venv-gpu-smoke}
PYTHON=${PYTHON:-python3}
LIMIT=${LIMIT:-600}
CORES=${CORES:-all}
OUT=${OUT:-results/gpu-smoke}
MODEL=${MODEL:-}
EVAL=${EVAL:-vllm}
STUDY=config/studies/gpu-smoke.yaml
TINY=models/tiny-qwen2
mkdir -p "$OUT"
say() { echo "gpu_smoke: $*"; }
say "$(head -n 1 <<<"$gpus"), $(nproc) CPU cores, commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"

# 1. install (once: a venv that imports verl, vLLM and axisrl is reused)
start=$SECONDS
if ! "$VENV/bin/python" -c "import verl, vllm, axisrl" >/dev/null 2>&1; then
    say "installing verl[vllm]==0.9.1 and axisrl into $VENV (log: $OUT/install.log)"
    if ! { "$PYTHON" -m venv "$VENV" && "$VENV/bin/python" -m pip install --disable-pip-version-check \
        "verl[vllm]==0.9.1" -e .; } >"$OUT/install.log" 2>&1; then
        echo "gpu_smoke: the install failed ($(tail -n 1 "$OUT/install.log")): it needs PyPI, or PIP_FIND_LINKS and PIP_NO_INDEX=1 with the wheels; log: $OUT/install.log" >&2
        exit 3
    fi
fi
say "install: $((SECONDS - start)) s; $("$VENV/bin/python" - <<'EOF'
import importlib.metadata as m
names = ("torch", "verl", "vllm", "transformers", "flash_attn", "ray")
def version(name):
    try:
        return m.version(name.replace("_", "-"))
    except m.PackageNotFoundError:
        return "not installed"
print(", ".join(f"{name} {version(name)}" for name in names))
EOF
)"
export PATH="$PWD/$VENV/bin:$PATH" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1

# 2. the model: a real one by MODEL, else the tiny one (written once)
config=(--configfile "$STUDY")
overrides=("evaluate={backend: $EVAL}")
if [[ -n $MODEL ]]; then
    overrides+=("train={llm: {model: '$MODEL'}}")
elif [[ ! -f $TINY/config.json ]]; then
    axisrl model tiny "$TINY"
fi

# 3. the study, on one GPU, with the GPU's memory sampled beside it
nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 500 >"$OUT/gpu_memory.csv" 2>/dev/null &
sampler=$!
trap 'kill "$sampler" 2>/dev/null || true' EXIT
say "the study: snakemake --cores $CORES --resources gpu=1 ${config[*]} --config ${overrides[*]} (limit ${LIMIT} s; log: $OUT/snakemake.log)"
start=$SECONDS
status=0
timeout --signal=TERM --kill-after=60 "$LIMIT" snakemake --cores "$CORES" --resources gpu=1 --keep-going \
    "${config[@]}" --config "${overrides[@]}" >"$OUT/snakemake.log" 2>&1 || status=$?
wall=$((SECONDS - start))
if [[ $status == 0 ]]; then
    snakemake --report "$OUT/report.html" "${config[@]}" --config "${overrides[@]}" >>"$OUT/snakemake.log" 2>&1 ||
        status=$?
fi
kill "$sampler" 2>/dev/null || true

# 4. what it measured (bench/gpu_smoke_summary.py; the verl CPU tests run it on a CPU study's results too)
"$VENV/bin/python" bench/gpu_smoke_summary.py --out "$OUT" --status "$status" --wall "$wall" --limit "$LIMIT" \
    --configfile "$STUDY" --config "${overrides[@]}" | tee "$OUT/summary.txt" || say "the summary failed (above)"
exit $((status == 0 ? 0 : 1))
