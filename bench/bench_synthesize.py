"""Synthesis speed: ~10,000 tasks over 256 toolworld environments on one core (target: < 30 s).

Run: python bench/bench_synthesize.py   (prints seconds, counts and tasks/s; record in bench/README.md)
"""

from __future__ import annotations

import time
from pathlib import Path

from axisrl.config import load_config
from axisrl.domains import toolworld

ROOT = Path(__file__).resolve().parents[1]
OVERLAY = {
    "n_worlds": 64,
    "variants_per_world": 4,
    "contents_per_variant": 1,
    "reskins_per_world": 0,
    "tasks_per_env": 40,
    "heldout": {"t0_envs": 0, "t1_envs": 0, "t2_worlds": 1, "t2_variants_per_world": 1, "tasks_per_env": 1},
}


def main() -> None:
    config = load_config(ROOT / "config" / "config.yaml", schema_path=ROOT / "config" / "schema.yaml")
    settings = {**config["synthesize"], **OVERLAY, "heldout": {**config["synthesize"]["heldout"], **OVERLAY["heldout"]}}
    start = time.perf_counter()
    pool = toolworld.generate_pool(settings)
    seconds = time.perf_counter() - start
    print(
        f"envs={len(pool.envs)} tasks={len(pool.tasks)} (held-out envs={len(pool.heldout_envs)} "
        f"tasks={len(pool.heldout_tasks)}) seconds={seconds:.2f} tasks/s={len(pool.tasks) / seconds:.0f}"
    )


if __name__ == "__main__":
    main()
