"""What the GPU smoke check measured (bench/gpu_smoke.sh runs it after the study): the model it ran, each verl
step's seconds, tokens and tokens per second per GPU and peak allocated memory (verl's file logger), the
checkpoints each run kept, each GPU job's wall time (Snakemake's benchmark files), the held-out episodes,
the GPU's peak memory as nvidia-smi sampled it, and which jobs failed with the end of their logs; then one
line, PASS or FAIL. Run from the workflow's directory, with the study's config files and --config overrides:

    python bench/gpu_smoke_summary.py --out results/gpu-smoke --status 0 --wall 512 --limit 600 \
        --configfile config/studies/gpu-smoke.yaml --config 'evaluate={backend: vllm}'
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import polars as pl
import yaml

from axisrl.backends.verl.config import RunLayout
from axisrl.config import load_config, load_yaml
from axisrl.stages import study

STEP_COLUMNS = {
    "step": "training/global_step",
    "seconds": "timing_s/step",
    "gen_s": "timing_s/gen",
    "update_s": "timing_s/update_actor",
    "tokens": "perf/total_num_tokens",
    "tokens/s/GPU": "perf/throughput",
    "max_alloc_GB": "perf/max_memory_allocated_gb",
}
"""The columns of a run's step table and the verl metric each shows."""
FAILED = re.compile(r"^Error in rule (\w+):\n(?:.+\n)*?\s+log: (\S+)", re.M)
"""A failed job in Snakemake's log: its rule and its log file."""


def cell(value: object) -> str:
    if value is None:
        return "-"
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def wall_seconds(benchmark: Path) -> str:
    """A job's wall time from its Snakemake benchmark file (written when the job finished)."""
    if not benchmark.exists():
        return "did not finish"
    return f"{float(benchmark.read_text().splitlines()[1].split()[0]):.0f} s"


def step_table(run: RunLayout) -> list[str]:
    """One line per training step over every attempt of the run, from verl's file logger."""
    lines = ["  " + "  ".join(STEP_COLUMNS)]
    for attempt in run.attempts():
        if not attempt.metrics_log.exists():
            continue
        for line in attempt.metrics_log.read_text().splitlines():
            data = json.loads(line)["data"]
            if "training/global_step" in data:  # not the validation before training
                lines.append("  " + "  ".join(cell(data.get(name)) for name in STEP_COLUMNS.values()))
    return lines


def summary(out: Path, status: int, wall: int, limit: int, configfiles: list[str], overrides: list[str]) -> list[str]:
    overlay = {}
    for item in overrides:  # Snakemake's --config KEY=YAML, merged as Snakemake merges it
        key, _, value = item.partition("=")
        overlay[key] = yaml.safe_load(value)
    merged = out / "config-overrides.yaml"
    merged.write_text(yaml.safe_dump(overlay))
    config = load_config("config/config.yaml", *configfiles, merged, schema_path="config/schema.yaml")
    jobs = study(config, load_yaml("config/schema.yaml"))

    model = Path(config["train"]["llm"]["model"])
    shape = json.loads((model / "config.json").read_text()) if (model / "config.json").is_file() else {}
    lines = [
        f"model: {model.resolve()} ({', '.join(shape.get('architectures', ['no config.json']))}, "
        f"{shape.get('num_hidden_layers')} layers, hidden size {shape.get('hidden_size')}); "
        f"evaluation: {config['evaluate']['backend']}"
    ]
    for point in jobs.points.values():
        design = point.design
        for seed in point.seeds:
            key = point.train.key
            benchmark = Path(f"results/benchmarks/train/{key}_seed{seed}.tsv")
            lines.append(
                f"train {key} seed {seed} (d_env {design.d_env}, d_task {design.d_task}, d_traj {design.d_traj}): "
                f"{wall_seconds(benchmark)}"
            )
            run = RunLayout(Path(f"results/train/{key}/seed{seed}/verl"))
            lines += step_table(run)
            kept = sorted(path.name for path in (run.run_dir / "checkpoints").glob("global_step_*"))
            lines.append(f"  attempts {len(run.attempts())}; checkpoints kept: {', '.join(kept) or 'none'}")
        if point.evaluate:
            key = point.evaluate.key
            episodes = Path(f"results/evaluate/{key}/episodes.parquet")
            played = ""
            if episodes.exists():
                frame = pl.read_parquet(episodes)
                success = frame["success"].mean() if frame.height else 0.0
                played = f", {frame.height} held-out episodes, success {success:.3f}"
            lines.append(f"evaluate {key}: {wall_seconds(Path(f'results/benchmarks/evaluate/{key}.tsv'))}{played}")

    memory = out / "gpu_memory.csv"
    samples = [int(value) for value in memory.read_text().split() if value.isdigit()] if memory.exists() else []
    lines.append(f"peak GPU memory (nvidia-smi every 0.5 s): {max(samples, default=0):,} MiB, {len(samples)} samples")
    log = (out / "snakemake.log").read_text(errors="replace") if (out / "snakemake.log").exists() else ""
    done = re.findall(r"(\d+) of (\d+) steps \(\d+%\) done", log)
    lines.append(f"study wall: {wall} s (limit {limit} s); steps done: {' of '.join(done[-1]) if done else 'none'}")
    failed = FAILED.findall(log)
    for rule, path in failed:
        lines.append(f"FAILED {rule} (log {path}), its last lines:")
        tail = Path(path).read_text(errors="replace").splitlines()[-15:] if Path(path).exists() else ["(no log)"]
        lines += [f"  {line}" for line in tail]
    if status == 124:
        lines.append(f"FAIL: the study ran past its limit of {limit} s")
    elif status or failed:
        lines.append(f"FAIL: snakemake exited {status}, {len(failed)} job(s) failed (log: {out / 'snakemake.log'})")
    else:
        lines.append(f"PASS: every job ran; the report: {out / 'report.html'}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the folder with snakemake.log and gpu_memory.csv")
    parser.add_argument("--status", type=int, required=True, help="the study's exit status (124: its time limit)")
    parser.add_argument("--wall", type=int, required=True, help="the study's wall seconds")
    parser.add_argument("--limit", type=int, required=True, help="the study's time limit in seconds")
    parser.add_argument("--configfile", nargs="+", required=True, help="the study's config files, in order")
    parser.add_argument("--config", nargs="*", default=[], help="Snakemake's --config KEY=YAML overrides")
    args = parser.parse_args(argv)
    print("\n".join(summary(args.out, args.status, args.wall, args.limit, args.configfile, args.config)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
