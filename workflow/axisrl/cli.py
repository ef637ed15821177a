"""``axisrl show PATH``, ``axisrl catalog [RESULTS]``: read artifacts without the workflow;
``axisrl fit RUNS --out DIR``: fit and plot a runs table the user brings (schema: ``axisrl.laws``)."""

from __future__ import annotations

import argparse
import json
import sys

import polars as pl

from axisrl.artifacts import ArtifactError, catalog, read_artifact, read_meta


def _show(path: str, rows: int) -> None:
    meta = read_meta(path)
    frame = read_artifact(path)
    print(f"{path}\n  stage {meta.stage}  key {meta.key}  created {meta.created}  axisrl {meta.version}")
    print(f"  inputs {json.dumps(meta.inputs)}  libraries {json.dumps(meta.libraries)}")
    print(f"  {frame.height} rows x {frame.width} columns")
    print("schema:")
    for name, dtype in frame.schema.items():
        print(f"  {name}: {dtype}")
    with pl.Config(tbl_rows=rows, tbl_cols=12, fmt_str_lengths=40):
        print(frame.head(rows))
    print("config:")
    print(json.dumps(meta.config, indent=2, sort_keys=True))


def _catalog(results: str) -> None:
    frame = catalog(results).select("stage", "key", "path", "created", "rows", "error")
    with pl.Config(tbl_rows=-1, fmt_str_lengths=80, tbl_width_chars=200):
        print(frame)


def _read_runs(path: str) -> pl.DataFrame:
    """A runs table from Parquet (a collect artifact or any Parquet file) or CSV."""
    if path.endswith(".csv"):
        return pl.read_csv(path)
    return pl.read_parquet(path)


def _fit(runs_path: str, episodes_path: str | None, out: str, settings: dict) -> None:
    from pathlib import Path

    from axisrl.laws.study import LawSettings, analyse
    from axisrl.report.figures import figure2
    from axisrl.report.tables import readable, write_table

    runs = _read_runs(runs_path)
    episodes = _read_runs(episodes_path) if episodes_path else None
    frames = analyse(runs, episodes, LawSettings(**settings))
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    for name, frame in frames.items():
        frame.write_parquet(folder / f"{name}.parquet")
        write_table(readable(frame), folder / f"{name}.md", folder / f"{name}.csv", name)
    figure2(frames["points"], frames["axis_fits"], folder / "fig2.png", folder / "fig2.pdf")
    fits = frames["axis_fits"].filter(pl.col("selected"))
    for row in fits.iter_rows(named=True):
        print(f"{row['series']} {row['axis']}: alpha = {row['alpha']:.3f} [{row['alpha_lo']:.3f}, {row['alpha_hi']:.3f}]"
              f" ({row['model']}, {row['n_points']} points)")
    for warning in frames["warnings"]["warning"]:
        print(f"axisrl: warning: {warning}", file=sys.stderr)
    print(f"wrote {len(frames)} tables and fig2 to {folder}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="axisrl", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    show = commands.add_parser("show", help="print an artifact's schema, row count, head and config")
    show.add_argument("path")
    show.add_argument("-n", "--rows", type=int, default=5, help="rows of the head to print (default 5)")
    listing = commands.add_parser("catalog", help="list the artifacts under a results folder")
    listing.add_argument("results", nargs="?", default="results")
    fit = commands.add_parser("fit", help="fit scaling laws to a runs table (Parquet or CSV) and plot them")
    fit.add_argument("runs", help="one row per run: design columns (d_env, d_task, d_traj, ...) and "
                                  "successes/trials, or p_<tier>/n_<tier> as collect writes them")
    fit.add_argument("--out", required=True, help="folder for the result tables and fig2")
    fit.add_argument("--episodes", help="optional per-episode rows (run_key, task_id, tier, success) "
                                        "for the task-level bootstrap")
    fit.add_argument("--tier", default="T2", help="held-out tier to fit when runs carry p_<tier> (default T2)")
    fit.add_argument("--n-boot", type=int, default=2000, help="bootstrap resamples (default 2000)")
    fit.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        if args.command == "show":
            _show(args.path, args.rows)
        elif args.command == "catalog":
            _catalog(args.results)
        else:
            _fit(args.runs, args.episodes, args.out, {"tier": args.tier, "n_boot": args.n_boot, "seed": args.seed})
    except (ArtifactError, ValueError, OSError) as exc:
        print(f"axisrl: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
