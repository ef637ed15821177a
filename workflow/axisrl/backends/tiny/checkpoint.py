"""A checkpoint file holds the final weights of every seed of a grid point, each with what is
needed to rebuild the policy around them: one file per train job, since every output file a job
declares costs Snakemake work when it builds the DAG of a study of thousands of runs."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from axisrl.backends.tiny.policy import ToolPointer
from axisrl.backends.tiny.settings import TrainSettings
from axisrl.backends.tiny.train import TrainResult, make_policy


def checkpoint(result: TrainResult) -> dict[str, Any]:
    """What a checkpoint keeps of one run."""
    return {
        "state_dict": result.state,
        "settings": dataclasses.asdict(result.settings),
        "param_hash": result.param_hash,
        "status": result.status,
    }


def save_checkpoints(checkpoints: Mapping[int, Mapping[str, Any]], path: str | Path) -> None:
    """``checkpoints`` by seed, written atomically (a temporary file, then a rename)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(dict(checkpoints), tmp)
    tmp.replace(path)


def policy_of(checkpoint: Mapping[str, Any]) -> ToolPointer:
    """The policy a checkpoint describes, in evaluation mode."""
    policy = make_policy(TrainSettings.from_dict(checkpoint["settings"]))
    policy.load_state_dict(checkpoint["state_dict"])
    return policy.eval()


def load_policy(path: str | Path, seed: int) -> ToolPointer:
    checkpoints = torch.load(path, weights_only=True)
    if seed not in checkpoints:
        raise KeyError(f"{path} holds seeds {sorted(checkpoints)}, not seed {seed}")
    return policy_of(checkpoints[seed])
