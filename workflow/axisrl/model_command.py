"""``axisrl model tiny DIR``: a model directory for machines with no weights.

The GPU smoke check (config/studies/gpu-smoke.yaml) trains a model with verl and serves it with vLLM; where no
real model is at hand, this writes a small Qwen2-architecture one (``axisrl.backends.verl.tiny_model``, the
verl tests' tokenizer and chat template, with random weights) so the check still runs every part of the
cluster path. Nothing is downloaded.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path


def write_tiny(directory: str) -> str:
    """Write the smoke model into ``directory`` (new, or an empty folder); what was written, in one line.
    The files appear only when all of them are written, so a failed write leaves no half a model behind."""
    from axisrl.backends.verl.tiny_model import SMOKE_SHAPE, write_tiny_model

    target = Path(directory)
    if target.exists() and not target.is_dir():
        raise ValueError(f"{directory}: a file, not a folder (axisrl model tiny writes a new model folder)")
    if target.is_dir() and any(target.iterdir()):
        raise ValueError(f"{directory}: not empty (axisrl model tiny writes a new model folder: name another)")
    partial = target.parent / f".{target.name}.partial-{os.getpid()}"
    try:
        partial.mkdir(parents=True)
    except OSError as exc:
        raise ValueError(f"{directory}: cannot write there ({exc.strerror})") from None
    try:
        from transformers.utils import logging

        logging.disable_progress_bar()  # the command says what it wrote in one line
        write_tiny_model(partial, SMOKE_SHAPE, weights=True)
        os.replace(partial, target)  # onto an empty folder too
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    config = json.loads((target / "config.json").read_text())
    return (
        f"wrote a tiny {config['architectures'][0]} to {target}: {config['num_hidden_layers']} layers, hidden size "
        f"{config['hidden_size']}, vocabulary {config['vocab_size']} (byte-level), {_parameters(target):,} parameters, "
        f"random weights (seed 0), no download; a study trains it with train.llm.model: {target.resolve()}"
    )


def _parameters(directory: Path) -> int:
    """The parameter count of a safetensors model directory, read from the file's header."""
    from safetensors import safe_open

    with safe_open(directory / "model.safetensors", framework="pt") as weights:
        return sum(math.prod(weights.get_slice(name).get_shape()) for name in weights.keys())
