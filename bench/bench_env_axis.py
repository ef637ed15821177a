"""The environment axis alone: toolworld's d_env sweep and its slope per doubling on the validation tier V.

Run: python bench/bench_env_axis.py [--grid 1,2,4,8,16,32,64] [--seeds 4] [--set SECTION.KEY=VALUE ...]
[--control SECTION.KEY=VALUE ...] [--control-level placebo|s2|s3] [--workdir DIR]
(2 cores, nothing else running; record in bench/README.md)

The default config, planned with its d_env sweep alone (``axis_sweeps.axes: [d_env]`` on ``--grid``, the
other axes at the centre, ``--seeds`` seeds at each point, the centre's d_task at least the largest d_env)
and with ``--set`` over it, is run through the workflow to ``collect``; the script prints each point's mean V
success and the fitted trend of V success on ``log2 d_env`` with its 95 % interval (``laws.success_trends``,
runs as replicates: the Figure 2 trend, read on V, never on T2). With ``--control``, the same sweep again with
those settings over ``--set``: the pool whose worlds share what the first one's tell apart (issue 59), printed
beside it; ``--control-level placebo`` makes the control the same sweep over contents of one world's unedited
variant (one structure shared by every environment; Table 7's placebo). A ``--workdir`` kept between calls reuses
what the two have in common.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl
import yaml
from bench_domain_base import with_settings  # this folder is on the path when a bench script runs

from axisrl.config import load_config, load_yaml
from axisrl.laws import success_trends
from axisrl.stages import study

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "config" / "schema.yaml"
DEFAULT_GRID = (1, 2, 4, 8, 16, 32, 64)
"""Seven log-spaced points spanning 64x (issue 59 asks for at least five spanning at least 64x); the default pool
has 83 signature-distinct environments."""


def sweep_overlay(grid: list[int], seeds: int, settings: list[str], level: str | None = None) -> dict:
    """The default config with the d_env sweep alone on ``grid`` and ``seeds`` seeds a point (the first half
    in one train job, the rest in the sweep's extra seeds, as the study splits them), the centre's d_task raised
    to the grid's largest d_env where it is smaller (each environment needs a task), then ``settings``. With
    ``level``, environments are counted at that level (Table 7's pool construction; ``placebo``: contents of
    one world's unedited variant, so every environment shares its structure) and the sweep is that family's."""
    schema = load_yaml(SCHEMA)
    centre = load_config(ROOT / "config" / "config.yaml", schema_path=SCHEMA)["study"]["centre"]
    families = schema["properties"]["study"]["properties"]["families"]["properties"]
    if level is None:
        family, swept, seed_list = (
            "axis_sweeps",
            {"axes": ["d_env"], "extra_seeds": list(range(seeds // 2, seeds))},
            list(range(seeds // 2)),
        )
    else:
        family, swept, seed_list = "pool_construction", {"levels": [level]}, list(range(seeds))
    enabled = {name: {"enabled": False} for name in families}
    enabled[family] = {"enabled": True, **swept}
    if level is not None:  # every seed is in study.seeds: the sweeps' extra seeds would repeat them
        enabled["axis_sweeps"]["extra_seeds"] = []
    overlay = {
        "study": {
            "seeds": seed_list,
            "grids": {"d_env": grid},
            "family_points": len(grid),
            "centre": {"d_task": max(centre["d_task"], max(grid))},
            "families": enabled,
        },
        "synthesize": {"placebo_contents": max(grid)},
        "recipe": {"enabled": False},
    }
    return with_settings(overlay, settings)


def sweep(workdir: Path, name: str, overlay: dict) -> pl.DataFrame:
    """Run the sweep ``overlay`` plans in ``workdir`` (written there as ``<name>.yaml``) to its collected runs."""
    path = workdir / f"{name}.yaml"
    path.write_text(yaml.safe_dump(overlay))
    config = load_config(ROOT / "config" / "config.yaml", path, schema_path=SCHEMA)
    collect = study(config, load_yaml(SCHEMA)).specs["collect"].key
    started = time.time()
    subprocess.run(
        ["snakemake", "collect", "-s", str(ROOT / "Snakefile"), "--cores", "2", "--configfile", str(path)],
        cwd=workdir,
        check=True,
    )
    print(f"{name}: the sweep took {time.time() - started:.0f} s", file=sys.stderr)
    return pl.read_parquet(workdir / "results" / "collect" / collect / "runs.parquet")


def report(name: str, runs: pl.DataFrame) -> None:
    """Each point's mean V success and the trend per doubling of d_env with its interval."""
    ok = runs.filter(pl.col("status") == "ok")
    points = ok.group_by("d_env").agg(pl.col("p_V").mean().round(3), n=pl.len()).sort("d_env")
    means = ", ".join(f"{row['d_env']}: {row['p_V']:.3f} ({row['n']})" for row in points.iter_rows(named=True))
    (trend,) = success_trends(ok, ["d_env"], tier="V").iter_rows(named=True)
    print(f"{name}: {ok.height} of {runs.height} runs ok; V success by d_env (runs): {means}")
    print(
        f"  slope per doubling of d_env on V: {trend['slope']:+.4f} [{trend['slope_lo']:+.4f}, "
        f"{trend['slope_hi']:+.4f}] (95 %), p {trend['p_value']:.3g}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", default=",".join(map(str, DEFAULT_GRID)), help="d_env points, comma-separated")
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE", help="the miniature's")
    parser.add_argument("--control", action="append", default=[], metavar="SECTION.KEY=VALUE", help="over --set")
    parser.add_argument(
        "--control-level",
        choices=("placebo", "s2", "s3"),
        help="the control counts environments at this level (placebo: one structure, many contents)",
    )
    parser.add_argument("--workdir", type=Path, help="keep the studies here (default: a temporary folder)")
    args = parser.parse_args()
    grid = sorted(int(value) for value in args.grid.split(","))
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="axisrl-env-axis-"))
    workdir.mkdir(parents=True, exist_ok=True)
    report("miniature", sweep(workdir, "miniature", sweep_overlay(grid, args.seeds, args.set)))
    if args.control or args.control_level:
        control = sweep_overlay(grid, args.seeds, args.set + args.control, args.control_level)
        report("control", sweep(workdir, "control", control))
    else:
        print("control: none given (--control, --control-level)")
    print(f"  studies kept in {workdir}", file=sys.stderr)


if __name__ == "__main__":
    main()
