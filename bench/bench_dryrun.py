"""Parse-time cost of a large study: `snakemake -n` on a plan of about 5,000 runs (prints numbers; not a test).

Run: python bench/bench_dryrun.py [--side 50] [--repeats 3]

The plan is the default study plus an interaction grid of side x side grid points (d_env = 1..side,
d_task = side..2*side-1, so every point is valid) at 2 seeds: one train job per point (it trains and
evaluates both seeds) and a second one for each axis-sweep point's 2 extra seeds. The workflow (with its
default profile) is copied to a temporary folder, so nothing under results/ is touched. Timed: the
whole `snakemake -n -q` process (config validation, plan, keys, DAG), and the whole `snakemake -n`
process, which also prints every job.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name in ("Snakefile", "config", "workflow", "envs", "profiles"):
            source = ROOT / name
            (shutil.copytree if source.is_dir() else shutil.copy)(source, work / name)
        overlay = {
            "study": {
                "seeds": [0, 1],
                "families": {
                    "interaction": {
                        "d_env": list(range(1, args.side + 1)),
                        "d_task": list(range(args.side, 2 * args.side)),
                    }
                },
            },
            "synthesize": {"placebo_contents": 32},
        }
        (work / "big.yaml").write_text(yaml.safe_dump(overlay))
        for repeat in range(args.repeats):
            for quiet in (["-q"], []):
                started = time.perf_counter()
                done = subprocess.run(
                    ["snakemake", "-n", *quiet, "--cores", "2", "--configfile", "big.yaml"],
                    cwd=work,
                    capture_output=True,
                    text=True,
                    check=True,
                )
                seconds = time.perf_counter() - started
                stats = [line for line in done.stdout.splitlines() if line.strip().startswith(("train ", "total "))]
                print(
                    f"repeat {repeat}, snakemake -n {' '.join(quiet)}: {seconds:.2f} s; "
                    + "; ".join(" ".join(line.split()) for line in stats[:2])
                )
        plan = subprocess.run(["python", "-c", PLAN_SIZE], cwd=work, capture_output=True, text=True, check=True)
        print(plan.stdout.strip())


PLAN_SIZE = """
from axisrl.config import load_yaml, validate_config
from axisrl.plan import plan_designs, plan_rows
from axisrl.stages import study
import yaml
schema = load_yaml('config/schema.yaml')
config = yaml.safe_load(open('config/config.yaml'))
overlay = yaml.safe_load(open('big.yaml'))
config['study'] = {**config.get('study', {}), **overlay['study']}
config['synthesize'] = {**config['synthesize'], **overlay['synthesize']}
cfg = validate_config(config, schema)
jobs = study(cfg, schema).points
rows = plan_rows(plan_designs(cfg['study']), cfg['study'], cfg['domain'])
points = {job.design.point_key for job in jobs.values()}
print(f'plan: {len(rows)} runs over {len(points)} grid points in {len(jobs)} train jobs')
"""

if __name__ == "__main__":
    main()
