"""Every procedural domain on the default ``synthesize`` sizes: its pool's size and dedup collapse
(Table 6) and its episodes' cost drivers (Table 18), measured by replaying reference solutions.

Run: python bench/bench_domains.py [--episodes 200]   (one core; record in bench/README.md)

Per domain: seconds to generate the pool; raw training environments and their S1-distinct ones, with
the tool-set and transition diversity of the distinct ones (``dedup.pool_stats``); the mean
reference length in calls (``finish`` included); and, replaying the reference of ``--episodes`` T2
tasks through the domain's own environment, wall seconds per environment call and per verification,
and the share that verifies.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import polars as pl

from axisrl import dedup, domains
from axisrl.config import load_config
from axisrl.stages.pools import ENV_COLUMNS

ROOT = Path(__file__).resolve().parents[1]
PROCEDURAL = ("toolworld", "webworld", "repoworld")
"""The domains whose pools are generated here (mathcode needs reasoning-gym's generators and has no
world levels; miniwob needs a browser and has no reference solutions)."""


def replay(domain: domains.Domain, envs: list[dict], tasks: list[dict]) -> dict[str, float]:
    """Wall seconds per env call and per verification, and the share verified, over reference replays."""
    specs = {env["env_id"]: json.loads(env["spec"]) for env in envs}
    step_seconds = verify_seconds = 0.0
    calls = successes = 0
    for task in tasks:
        env = domain.Env(specs[task["env_id"]], task)
        env.reset()
        for call in json.loads(task["reference"]):
            started = time.perf_counter()
            env.step(call)
            step_seconds += time.perf_counter() - started
            calls += 1
        started = time.perf_counter()
        successes += env.verify().success
        verify_seconds += time.perf_counter() - started
    return {
        "env_seconds_per_call": step_seconds / max(calls, 1),
        "verifier_seconds": verify_seconds / max(len(tasks), 1),
        "verified": successes / max(len(tasks), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=200, help="T2 reference replays per domain")
    args = parser.parse_args()
    config = load_config(ROOT / "config" / "config.yaml", schema_path=ROOT / "config" / "schema.yaml")
    for name in PROCEDURAL:
        domain = domains.load(name)
        started = time.perf_counter()
        pool = domain.generate_pool(config["synthesize"])
        seconds = time.perf_counter() - started
        envs = pl.DataFrame(pool.envs, schema={k: ENV_COLUMNS[k] for k in pool.envs[0]})
        stats = dedup.pool_stats(dedup.env_signatures(envs, name), "train", name)
        t2 = [task for task in pool.heldout_tasks if task["tier"] == "T2"][: args.episodes]
        drivers = replay(domain, pool.heldout_envs, t2)
        horizon = sum(len(json.loads(task["reference"])) for task in pool.tasks) / len(pool.tasks)
        print(
            f"{name}: pool {seconds:.1f} s, {len(pool.envs)} envs and {len(pool.tasks)} tasks; "
            f"Table 6: {stats['n_raw']} raw -> {stats['n_distinct']} S1-distinct "
            f"({stats['n_worlds']} worlds; tool Jaccard {stats['jaccard_tools']:.3f}, "
            f"transitions {stats['transition_diversity']:.3f}); "
            f"reference {horizon:.1f} calls; {len(t2)} T2 replays: "
            f"{drivers['env_seconds_per_call'] * 1e6:.0f} us per call, "
            f"{drivers['verifier_seconds'] * 1e3:.2f} ms per verification, {drivers['verified']:.0%} verified"
        )


if __name__ == "__main__":
    main()
