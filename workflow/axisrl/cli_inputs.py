"""What the command line refuses before it works, each in one line naming the input and the column or flag
(``axisrl.cli`` reports them): argument values, folders and files that are none, tables a command would read
wrongly or ignore, and flags that do not apply to the table given."""

from __future__ import annotations

import argparse
import math
import os
import warnings
from pathlib import Path

import polars as pl

from axisrl.artifacts import not_a_file


def results_folder(results: str) -> Path:
    """``results`` as a folder, or an error that says it is none (a mistyped path would list nothing)."""
    folder = Path(results)
    if not folder.is_dir():
        problem = not_a_file(folder)  # None: a readable file
        reason = {None: "not a folder", "no such file": "no such folder"}.get(problem, problem)
        raise ValueError(f"{results}: {reason} (a results folder, as the workflow writes it)")
    return folder


def out_folder(out: str) -> Path:
    """``--out``, refused before any work where it cannot be the folder the tables go to: an empty path (which
    would write into the current folder), or a path that is there and is no folder."""
    if not out:
        raise ValueError("--out: empty path (name the folder for the result tables)")
    folder = Path(out)
    if not folder.is_dir() and os.path.lexists(folder):
        raise ValueError(f"--out {out}: {not_a_file(folder) or 'a file'}, not a folder to write the tables into")
    return folder


class FlagError(ValueError):
    """A flag that does not apply to the table given (``flag``: the flag, as typed)."""

    def __init__(self, flag: str, problem: str) -> None:
        super().__init__(problem)
        self.flag = flag


def fit_inputs(runs: pl.DataFrame, episodes: pl.DataFrame | None, tier: str | None) -> pl.DataFrame:
    """The runs table ``analyse`` is given, refused (``TableError``, ``FlagError``) where a fit would fail deep
    inside or answer something other than what was asked: no rows; no run that did not fail; ``--tier`` on a
    table whose counts have no tiers (it would be ignored); ``--episodes`` whose ``success`` is not a number in
    [0, 1], or that no table of these runs reads (they would be ignored). Numbers stored as text are read as
    numbers (``check_runs`` has checked them)."""
    from axisrl.laws.data import (
        AMOUNT_COLUMNS,
        TableError,
        check_episodes,
        check_runs,
        count_columns,
        numbers,
        usable_runs,
    )
    from axisrl.laws.tables import in_families

    if runs.height == 0:
        raise TableError("runs", "no rows, only a header (one row per run)")
    if tier is not None and {"successes", "trials"} <= set(runs.columns):
        raise FlagError(
            f"--tier {tier}",
            "the table counts successes/trials, which have no tiers (p_<tier>/n_<tier> columns do): drop --tier",
        )
    check_runs(runs, tier or "T2")
    if "seed" in runs.columns:  # which runs are repeats of a design: a whole number where a run is measured
        measured = runs.with_row_index("row", offset=1)
        if "status" in measured.columns:
            measured = measured.filter(pl.col("status") == "ok")
        numbers(measured, "seed", -(2**63), whole=True, maximum=2**63 - 1)
    successes, trials = count_columns(runs, tier or "T2")
    text = [c for c in (*AMOUNT_COLUMNS, successes, trials, "seed") if c in runs.columns and runs[c].dtype == pl.String]
    runs = runs.with_columns(pl.col(c).str.strip_chars().cast(pl.Float64, strict=False) for c in text)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the failed runs are counted in the fit's own warnings
        usable, failed = usable_runs(runs, tier or "T2")
    if usable.height == 0:
        raise TableError("runs", f"no run to fit: all {failed.height} failed (a status other than 'ok', or no trials)")
    if episodes is not None:
        check_episodes(episodes)
        numbers(episodes.with_row_index("row", offset=1), "success", 0, whole=False, maximum=1, table="episodes")
        listed = "families" in runs.columns and isinstance(runs["families"].dtype, pl.List)
        if not (listed and in_families(runs, "worlds_variants").height):
            raise FlagError(
                "--episodes",
                "only Table 8 reads episodes (its task-level bootstrap), and the table has no runs of its "
                "family (worlds_variants, in a families column): drop --episodes",
            )
    return runs


def law_columns(frame: pl.DataFrame, path: Path) -> pl.DataFrame:
    """A recipe ``law.parquet`` as ``law_from_frame`` reads it, refused naming the column where it is not: a
    column missing, or not numbers (text, say); no rows; an empty cell where the law needs a number (the fit's
    ``E`` and centre, and each fitted axis's amplitude, exponent and range; ``m_star``/``k_star`` may be empty)."""
    from axisrl.recipe import RECIPE_AXES

    if not any(c.startswith(("alpha_", "A_", "centre_")) for c in frame.columns):
        return frame  # another recipe artifact (cost.parquet, say): _recipe says which
    if frame.height == 0:
        raise ValueError(f"{path}: a law with no rows (the fit is draw -1)")
    per_axis = ("A", "alpha", "lo", "hi", "centre")
    needed = ["draw", "E", "m_star", "k_star", *(f"{name}_{a}" for a in RECIPE_AXES for name in per_axis)]
    for column in needed:
        if column not in frame.columns:
            raise ValueError(f"{path}: no column {column} (a law.parquet as the recipe stage writes it)")
        values = frame[column].drop_nulls()  # a column of empty cells (m_star unfitted) is no number, and no text
        if not (values.dtype.is_numeric() or values.is_empty()):
            raise ValueError(f"{path}: column {column} must hold numbers, got {values.dtype} ({values[0]!r}, ...)")
    fitted = [a for a in RECIPE_AXES if frame.sort("draw")[f"alpha_{a}"][0] is not None]
    required = ["draw", "E", *(f"centre_{a}" for a in RECIPE_AXES)]
    required += [f"{name}_{a}" for a in fitted for name in ("A", "alpha", "lo", "hi")]
    for column in required:
        finite = pl.col(column).cast(pl.Float64).is_finite().fill_null(False)
        bad = frame.with_row_index("row", offset=1).filter(~finite)
        if bad.height:
            row = bad.row(0, named=True)
            raise ValueError(f"{path}: column {column}, row {row['row']}: must be a finite number, got {row[column]}")
    return frame


def whole(text: str, low: int, high: float = math.inf) -> int:
    """``text`` as a whole number in [``low``, ``high``]; otherwise argparse's error names the flag and this
    says what it takes (argparse's own, ``invalid count value``, names a function of this module)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"must be {'at least 1' if low == 1 else f'{low} or more'}, got {value}")
    if value > high:
        raise argparse.ArgumentTypeError(f"must be at most {high}, got {value}")
    return value


def positive_int(text: str) -> int:
    return whole(text, 1)


def nonnegative_int(text: str) -> int:
    return whole(text, 0)


def seed(text: str) -> int:
    """A random seed numpy and polars both take (0 to 2**32 - 1)."""
    return whole(text, 0, 2**32 - 1)


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def targets(texts: list[str]) -> dict[str, float]:
    """``--target alpha=0.05`` -> {"alpha": 0.05}, for the quantities the planner predicts."""
    from axisrl.planner import QUANTITIES

    targets = {}
    for text in texts:
        quantity, _, value = text.partition("=")
        try:
            width = positive_float(value)
        except (ValueError, argparse.ArgumentTypeError):
            width = None
        if quantity not in QUANTITIES or width is None:
            raise ValueError(
                f"--target {text!r}: expected QUANTITY=HALF_WIDTH with QUANTITY one of {QUANTITIES} "
                "and HALF_WIDTH a positive number"
            )
        targets[quantity] = width
    return targets


def study_config(configs: list[str]) -> tuple[dict, frozenset[str]]:
    """The study ``configs`` name (overlays on config/config.yaml), refused where Snakemake refuses
    it, by the same code (the schema: ``load_config``; the study's designs: ``stages.registry.train_keys``),
    and its train keys."""
    from axisrl.config import ConfigError, load_config, load_yaml

    base, schema = Path("config/config.yaml"), Path("config/schema.yaml")
    missing = [str(path) for path in (base, schema) if not path.is_file()]
    if missing:
        raise ValueError(
            f"no {' or '.join(missing)} in {Path.cwd()}: axisrl power reads the workflow's config, "
            "so run it in the workflow's folder"
        )
    for config in configs:  # a folder, a link loop, ...: said in words, naming the file (YAML's error would not)
        problem = not_a_file(Path(config))
        if problem and problem != "no such file":
            raise ValueError(f"{config}: {problem}")
        try:
            if problem is None:
                Path(config).read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"{config}: not a YAML file (byte {exc.start} is not UTF-8 text)") from None
    paths = [base, *(Path(c) for c in configs if Path(c).resolve() != base.resolve())]
    config = load_config(*paths, schema_path=schema)
    from axisrl.stages.registry import train_keys  # after the files are read: a mistyped one is named in a second

    try:
        return config, train_keys(config, load_yaml(schema))
    except ConfigError as error:
        raise ConfigError(f"{' + '.join(map(str, paths))}: {error}") from None


def given_inputs(args: argparse.Namespace) -> str:
    """The files (or target) the command read, as given: what an error none of the checks foresaw names."""
    given = {
        "show": [args.path] if args.command == "show" else [],
        "catalog": [getattr(args, "results", None)],
        "fit": [getattr(args, "runs", None), getattr(args, "curves", None), getattr(args, "episodes", None)],
        "recipe": [getattr(args, "law", None) or "results/recipe"],
        "power": [*getattr(args, "config", []), getattr(args, "noise", None), getattr(args, "results", None)],
        "where": [getattr(args, "target", None)],
        "model": [getattr(args, "directory", None)],
    }[args.command]
    return " or ".join(str(part) for part in given if part is not None) or f"axisrl {args.command}"
