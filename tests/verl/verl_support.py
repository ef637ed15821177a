"""Helpers for the verl tests: a tiny local Qwen2 model directory and tiny toolworld and mathcode pools.

Nothing can be downloaded, so the model directory is made here by the package's own writer
(``axisrl.backends.verl.tiny_model``, which ``axisrl model tiny`` runs too): a byte-level tokenizer with
Qwen's ChatML tokens and chat template, and a one-layer Qwen2 config without weights (verl's config
validation and dataset read only the config and the tokenizer). (Not a
conftest.py: a second top-level ``conftest`` module would displace tests/conftest.py, and a package
here would be named ``verl`` and shadow the real one.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from axisrl.backends.verl.config import VerlJob
from axisrl.config import validate_config
from axisrl.domains import mathcode, toolworld
from axisrl.plan import backend_settings

POOL_CONFIG = {
    "n_worlds": 2,
    "variants_per_world": 1,
    "contents_per_variant": 1,
    "reskins_per_world": 0,
    "tasks_per_env": 3,
    "heldout": {
        "tasks_per_env": 2,
        "t0_envs": 1,
        "t1_envs": 1,
        "t2_worlds": 1,
        "t2_variants_per_world": 1,
        "validation_worlds": 0,
    },
}


def small_pool(schema: dict[str, Any]) -> toolworld.Pool:
    """Two worlds, three tasks each, and a held-out pool with one environment per tier (no placebo)."""
    cfg = validate_config({"synthesize": POOL_CONFIG}, schema)["synthesize"]
    return toolworld.generate_pool({**cfg, "placebo_contents": 0})


MATHCODE_POOL_CONFIG = {
    "seed": 0,
    "tasks_per_env": 2,
    "contents_per_variant": 1,
    "max_steps": 4,
    "placebo_contents": 0,
    "placebo_tasks_per_env": 1,
    "mathcode": {
        "generators": ["basic_arithmetic", "gcd"],
        "heldout_generators": ["lcm"],
        "tools": ["calculator", "python"],
        "python_states": ["persistent"],
        "python_outputs": ["echo"],
        "grammars": ["tagged"],
        "python_timeout_s": 5,
    },
    "heldout": {
        "seed": 1000003,
        "tasks_per_env": 1,
        "t0_envs": 1,
        "t1_envs": 1,
        "t2_worlds": 1,
        "t2_variants_per_world": 1,
    },
}
"""Two generators under a calculator and a persistent, echoing Python harness with tagged answers: three
training environments of two problems each and one held-out problem per tier (about two seconds)."""


def small_mathcode_pool() -> toolworld.Pool:
    return mathcode.generate_pool(MATHCODE_POOL_CONFIG)


def train_settings(
    schema: dict[str, Any], algo: str, reward_density: str = "sparse", d_traj: int = 4
) -> dict[str, Any]:
    """What the plan hands a backend for a design: the schema's train defaults resolved for it."""
    design = {"budget": "fixed_visits", "algo": algo, "width": 64, "d_traj": d_traj, "reward_density": reward_density}
    return backend_settings(validate_config({}, schema)["train"], design)


def tiny_job(model_dir: Path, run_dir: Path, **changes: Any) -> VerlJob:
    """A verl job on the tiny model, sized for a CPU test (``changes`` override any field)."""
    fields = {
        "model_path": str(model_dir),
        "run_dir": run_dir,
        "experiment_name": "test-run",
        "num_cpus": 4,
        "max_prompt_length": 16384,
        "micro_batch_size_per_gpu": 2,
    }
    return VerlJob(**(fields | changes))
