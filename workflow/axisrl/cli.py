"""``axisrl show PATH`` and ``axisrl catalog [RESULTS]``: read artifacts without the workflow."""

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="axisrl", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    show = commands.add_parser("show", help="print an artifact's schema, row count, head and config")
    show.add_argument("path")
    show.add_argument("-n", "--rows", type=int, default=5, help="rows of the head to print (default 5)")
    listing = commands.add_parser("catalog", help="list the artifacts under a results folder")
    listing.add_argument("results", nargs="?", default="results")
    args = parser.parse_args(argv)
    try:
        if args.command == "show":
            _show(args.path, args.rows)
        else:
            _catalog(args.results)
    except ArtifactError as exc:
        print(f"axisrl: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
