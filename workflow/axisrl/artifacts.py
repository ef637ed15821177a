"""Parquet artifacts that carry their own provenance, written atomically.

Every artifact's file metadata says which stage and key wrote it, the config that was hashed into
the key, the upstream keys, the versions of axisrl and the libraries that wrote it, and the CPU it
ran on, so any Parquet file under ``results/`` explains itself without the workflow that made it.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import platform
import stat
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version as package_version
from pathlib import Path
from typing import Any

import polars as pl

from axisrl import __version__
from axisrl.config import SCHEMA_VERSION, StageSpec, canonical_json
from axisrl.schema import current_names

PREFIX = "axisrl."
CATALOG_NAME = "catalog.parquet"
LIBRARIES = ("polars", "numpy", "scipy", "statsmodels", "torch", "snakemake")
"""Recorded in every artifact: what reads and writes it, fits it, and trains the policies behind it."""
VECTOR_FLAGS = (("AVX512", "avx512f"), ("AVX2", "avx2"), ("AVX", "avx"), ("SVE", "sve"), ("NEON", "asimd"))
"""(instruction set, its /proc/cpuinfo flag), widest first: what ``machine()`` reports as ``vector``."""


class ArtifactError(RuntimeError):
    """An artifact that cannot be used: missing, unreadable, foreign, or from another schema version."""


@dataclass(frozen=True)
class ArtifactMeta:
    stage: str
    key: str
    config: dict[str, Any]
    inputs: dict[str, str]
    version: str
    schema_version: int
    created: str
    libraries: dict[str, str]
    machine: dict[str, str]
    """``machine()`` of the writer; empty for artifacts written before it was recorded."""


@functools.cache
def machine() -> dict[str, str]:
    """The CPU that writes artifacts: architecture, model and widest vector instruction set. Training
    is bit-identical on one kind of CPU, not across kinds (torch picks its kernels by instruction
    set), so two studies' artifacts are comparable bit for bit only where these agree."""
    info = {"architecture": platform.machine(), "cpu": platform.processor() or platform.machine(), "vector": "unknown"}
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return info
    fields: dict[str, str] = {}
    for line in lines:
        name, _, value = line.partition(":")
        fields.setdefault(name.strip(), value.strip())
    info["cpu"] = fields.get("model name", info["cpu"])
    flags = set(fields.get("flags", fields.get("Features", "")).split())
    info["vector"] = next((isa for isa, flag in VECTOR_FLAGS if flag in flags), "other")
    return info


def write_artifact(frame: pl.DataFrame, path: str | Path, spec: StageSpec) -> None:
    """Write ``frame`` with provenance metadata; the file appears complete or not at all."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    metadata = {
        "stage": spec.stage,
        "key": spec.key,
        "config": canonical_json(spec.config),
        "inputs": canonical_json(spec.inputs),
        "version": __version__,
        "schema_version": str(SCHEMA_VERSION),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "libraries": canonical_json({name: package_version(name) for name in LIBRARIES}),
        "machine": canonical_json(machine()),
    }
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(handle)
    try:
        frame.write_parquet(tmp, compression="zstd", metadata={f"{PREFIX}{k}": v for k, v in metadata.items()})
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def first_line(exc: BaseException) -> str:
    """An exception's message on one line (polars adds hints and context on the lines after), in words: an
    OS error's reason (``permission denied``), never the class's name, which says nothing to a user."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror[:1].lower() + exc.strerror[1:]
    lines = str(exc).strip().splitlines()
    if isinstance(exc, KeyError) and lines:
        return f"no {lines[0]}"
    return lines[0] if lines else "failed, without a message"


def not_a_file(path: Path) -> str | None:
    """Why ``path`` cannot be read as a file, in words (no such file, a folder, a symbolic link loop or to
    nothing, permission denied), or None where it is a readable file: the one reason an error should give."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return f"a symbolic link to nothing (to {os.readlink(path)})" if path.is_symlink() else "no such file"
    except OSError as exc:
        return "a symbolic link loop" if exc.errno == errno.ELOOP else first_line(exc)
    if stat.S_ISDIR(mode):
        return "a directory, not a file"
    if not stat.S_ISREG(mode):
        return "not a regular file"
    if not os.access(path, os.R_OK):
        return "permission denied"
    return None


def _raw_metadata(path: Path) -> dict[str, str]:
    problem = not_a_file(path)
    if problem == "no such file":
        raise ArtifactError(f"{path}: missing artifact (run the stage that writes it)")
    if problem:
        raise ArtifactError(f"{path}: {problem}")
    try:
        raw = pl.read_parquet_metadata(path)
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise ArtifactError(f"{path}: not a readable Parquet file (truncated or corrupt): {first_line(exc)}") from None
    return {k.removeprefix(PREFIX): v for k, v in raw.items() if k.startswith(PREFIX)}


def read_meta(path: str | Path) -> ArtifactMeta:
    """Provenance of an artifact; refuses files axisrl did not write or wrote under another schema."""
    path = Path(path)
    raw = _raw_metadata(path)
    if "stage" not in raw:
        raise ArtifactError(f"{path}: not an axisrl artifact (no axisrl metadata)")
    try:
        version = int(raw["schema_version"])
        if version != SCHEMA_VERSION:
            raise ArtifactError(
                f"{path}: written with artifact schema version {version}, this axisrl reads "
                f"version {SCHEMA_VERSION}; use a fresh results folder or the axisrl release that wrote it"
            )
        return ArtifactMeta(
            stage=raw["stage"],
            key=raw["key"],
            config=json.loads(raw["config"]),
            inputs=json.loads(raw["inputs"]),
            version=raw["version"],
            schema_version=version,
            created=raw["created"],
            libraries=json.loads(raw["libraries"]),
            machine=json.loads(raw.get("machine", "{}")),
        )
    except (KeyError, ValueError) as exc:  # metadata another program wrote under axisrl's names, or edited
        raise ArtifactError(f"{path}: axisrl metadata that cannot be read ({first_line(exc)})") from None


def read_artifact(path: str | Path, stage: str | None = None) -> pl.DataFrame:
    """Read an artifact, checking it is intact and (if given) written by ``stage``."""
    path = Path(path)
    meta = read_meta(path)
    if stage is not None and meta.stage != stage:
        raise ArtifactError(f"{path}: written by stage '{meta.stage}', expected '{stage}'")
    try:
        frame = pl.read_parquet(path, glob=False)  # a path, never a pattern: a folder may be named [
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise ArtifactError(f"{path}: not a readable Parquet file (truncated or corrupt): {first_line(exc)}") from None
    return with_current_names(frame)


def with_current_names(frame: pl.DataFrame) -> pl.DataFrame:
    """A frame written before a column was renamed, under the names of today (``axisrl.schema.RENAMED``)."""
    names = current_names(dict.fromkeys(frame.columns))
    return frame.rename(dict(zip(frame.columns, names, strict=True)))


def read_table(path: str | Path) -> pl.DataFrame:
    """A table a user brings (any Parquet file, or CSV by its suffix), not necessarily an artifact;
    a missing or unreadable file is an ``ArtifactError`` whose message is one line naming it."""
    path = Path(path)
    kind = "CSV" if path.suffix.lower() == ".csv" else "Parquet"
    problem = not_a_file(path)
    if problem:
        raise ArtifactError(f"{path}: {problem}")
    try:
        return with_current_names(pl.read_csv(path) if kind == "CSV" else pl.read_parquet(path, glob=False))
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise ArtifactError(
            f"{path}: not a readable {kind} file (truncated, corrupt or another format): {first_line(exc)}"
        ) from None


def catalog(results: str | Path) -> pl.DataFrame:
    """One row per Parquet artifact under ``results``; unreadable files are listed with their error."""
    results = Path(results)
    rows = []
    for path in sorted(results.rglob("*.parquet")):
        if path.name == CATALOG_NAME and path.parent == results:
            continue
        row: dict[str, Any] = {
            "stage": None,
            "key": None,
            "path": str(path),
            "created": None,
            "rows": None,
            "version": None,
            "config": None,
            "error": None,
        }
        try:
            meta = read_meta(path)
            row.update(
                stage=meta.stage,
                key=meta.key,
                created=meta.created,
                version=meta.version,
                config=canonical_json(meta.config),
                rows=pl.scan_parquet(path, glob=False).select(pl.len()).collect().item(),
            )
        except ArtifactError as exc:
            row["error"] = str(exc)
        rows.append(row)
    schema = {
        "stage": pl.String,
        "key": pl.String,
        "path": pl.String,
        "created": pl.String,
        "rows": pl.Int64,
        "version": pl.String,
        "config": pl.String,
        "error": pl.String,
    }
    return pl.DataFrame(rows, schema=schema)
