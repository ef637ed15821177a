"""Whether a change moved results: a preset's runs at another revision against the working tree's.

Run: python bench/compare_results.py --against REV [--preset smoke] [--preset quick] [--preset default]
[--workdir DIR] [--cores 2]
     python bench/compare_results.py --runs OLD/runs.parquet NEW/runs.parquet

For each preset, ``REV``'s tree (``git archive``, its package first on ``PYTHONPATH``) and the working tree
each run the study to ``collect`` in a folder of their own, then their collected runs are compared run by
run: the same run keys, and for each the same status, ``param_hash``, base, compute and held-out success on
every tier (``COMPARED``). Measured seconds differ from run to run and are not compared. Prints every
difference and exits 1 if there is one: a refactor must print none (docs/guarantees.md).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
PRESETS = {"default": "config/config.yaml", "smoke": "config/studies/smoke.yaml", "quick": "config/studies/quick.yaml"}
"""Each preset's config file, in the tree that runs it (a study runs in a folder of its own, where the
Snakefile's relative ``configfile`` would not be found)."""
COMPARED = (
    "status",
    "param_hash",
    "base_param_hash",
    "train_success",
    "updates",
    "episodes",
    "env_steps",
    "rollout_flops",
    "train_flops",
    "executed_compute",
)
"""What a run computed (held-out success is every ``p_<tier>`` and ``n_<tier>`` column besides)."""


def heldout_columns(runs: pl.DataFrame) -> list[str]:
    return sorted(c for c in runs.columns if c.startswith(("p_", "n_")))


def differences(old: pl.DataFrame, new: pl.DataFrame) -> list[str]:
    """One line per run key present on one side only and per (run, column) whose values differ."""
    lines = [f"run {key}: only before" for key in sorted(set(old["run_key"]) - set(new["run_key"]))]
    lines += [f"run {key}: only after" for key in sorted(set(new["run_key"]) - set(old["run_key"]))]
    columns = [c for c in (*COMPARED, *heldout_columns(old)) if c in old.columns]
    missing = [c for c in columns if c not in new.columns]
    lines += [f"column {c}: only before" for c in missing]
    columns = [c for c in columns if c not in missing]
    joined = old.select("run_key", *columns).join(new.select("run_key", *columns), on="run_key", suffix="_after")
    for column in columns:
        before, after = pl.col(column), pl.col(f"{column}_after")
        moved = joined.filter(before.ne_missing(after))
        lines += [
            f"run {row['run_key']}: {column} {row[column]!r} -> {row[f'{column}_after']!r}"
            for row in moved.iter_rows(named=True)
        ]
    return lines


def collected(workdir: Path) -> pl.DataFrame:
    (path,) = sorted((workdir / "results" / "collect").glob("*/runs.parquet"))
    return pl.read_parquet(path)


def run_study(source: Path, preset: str, workdir: Path, cores: int, pythonpath: Path | None) -> pl.DataFrame:
    """The preset's study from ``source`` (a tree with a Snakefile) run to ``collect`` in ``workdir``."""
    workdir.mkdir(parents=True, exist_ok=True)
    command = ["snakemake", "collect", "-s", str(source / "Snakefile"), "--cores", str(cores), "-q"]
    command += ["--configfile", str(source / PRESETS[preset])]
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(pythonpath), env.get("PYTHONPATH")]))
    started = time.time()
    subprocess.run(command, cwd=workdir, env=env, check=True)
    print(f"{preset} at {source}: {time.time() - started:.0f} s", file=sys.stderr)
    return collected(workdir)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", help="the revision to compare the working tree with")
    parser.add_argument("--preset", action="append", choices=sorted(PRESETS), help="default: smoke")
    parser.add_argument("--workdir", type=Path, help="keep the studies here (default: a temporary folder)")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--runs", nargs=2, type=Path, metavar=("OLD", "NEW"), help="compare two runs.parquet")
    args = parser.parse_args()
    if args.runs:
        pairs = {"runs": (pl.read_parquet(args.runs[0]), pl.read_parquet(args.runs[1]))}
    elif args.against:
        workdir = args.workdir or Path(tempfile.mkdtemp(prefix="axisrl-compare-"))
        source = workdir / "source"
        if not source.exists():
            source.mkdir(parents=True)
            archive = subprocess.run(["git", "archive", args.against], cwd=ROOT, check=True, capture_output=True)
            subprocess.run(["tar", "-x", "-C", str(source)], input=archive.stdout, check=True)
        pairs = {
            preset: (
                run_study(source, preset, workdir / preset / "before", args.cores, source / "workflow"),
                run_study(ROOT, preset, workdir / preset / "after", args.cores, None),
            )
            for preset in args.preset or ["smoke"]
        }
    else:
        parser.error("give --against REV or --runs OLD NEW")
    moved = False
    for name, (old, new) in pairs.items():
        lines = differences(old, new)
        print(f"{name}: {old.height} runs before, {new.height} after; {len(lines)} differences")
        for line in lines:
            print(f"  {line}")
        moved |= bool(lines)
    sys.exit(1 if moved else 0)


if __name__ == "__main__":
    main()
