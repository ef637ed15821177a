"""A checkpoint is the final weights plus what is needed to rebuild the policy around them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from axisrl.backends.tiny.policy import ToolPointer
from axisrl.backends.tiny.train import TrainResult, TrainSettings, make_policy


def save_checkpoint(result: TrainResult, path: str | Path) -> None:
    """Write atomically (a temporary file, then a rename)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    torch.save({"state_dict": result.state, "settings": dataclasses.asdict(result.settings),
                "param_hash": result.param_hash, "status": result.status}, tmp)
    tmp.replace(path)


def load_policy(path: str | Path) -> ToolPointer:
    checkpoint = torch.load(path, weights_only=True)
    policy = make_policy(TrainSettings.from_dict(checkpoint["settings"]))
    policy.load_state_dict(checkpoint["state_dict"])
    return policy.eval()
