"""RL from a domain's base against the base itself, on the validation tier V, at the default centre.

Run: python bench/bench_domain_base.py webworld [--seeds 16] [--task-rule raw] [--workdir DIR]
[--train KEY=VALUE ...] [--point d_env=32] [--set pretrain.steps=200]
(2 cores, nothing else running; record in bench/README.md)

The domain's study on the default config (``domain: <name>``, tasks counted by ``--task-rule``) is
planned with its axis sweeps only; the workflow then builds the centre point's train jobs alone (its
pool, dedup, base and runs: the first half of the seeds in one job, the rest in the axis sweeps'
second job), or with ``--point`` the axis-sweep point that differs from the centre there
(``d_env=32``: the d_env sweep's point at 32; the grid is the default's, and ``--grid d_env=2,8,32``
replaces an axis's). A ``--workdir`` kept between calls reuses the pool and the base. Each run
records its own success on V (``p_V``, the tier the base is chosen on; T2 is never read here) and
its base's (``p_V_base``); the script prints both, their paired difference with a t interval, and
how many runs beat the base.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl
import yaml
from scipy import stats

from axisrl.config import load_config, load_yaml
from axisrl.stages import study

ROOT = Path(__file__).resolve().parents[1]


def overlay(domain: str, seeds: int, task_rule: str, train: dict, grids: dict) -> dict:
    """The default config in ``domain``, its axis sweeps only (on ``grids`` where given), ``seeds``
    seeds at each point, with ``train`` settings over the default's."""
    half = seeds // 2
    schema = load_yaml(ROOT / "config" / "schema.yaml")
    families = schema["properties"]["study"]["properties"]["families"]["properties"]
    sweeps = {"enabled": True, "extra_seeds": list(range(half, seeds))}
    return {
        "domain": domain,
        "dedup": {"task_rule": task_rule},
        "study": {
            "seeds": list(range(half)),
            **({"grids": grids} if grids else {}),
            "families": {name: sweeps if name == "axis_sweeps" else {"enabled": False} for name in families},
        },
        "recipe": {"enabled": False},
        "train": train,
    }


def sampled(workdir: Path, ok: pl.DataFrame, targets: list[str], domain: str) -> None:
    """The base and every run played on V with sampled actions (one episode a task, the study's
    episode seeds), beside the study's greedy V success: a policy that acts well only greedily
    explores badly, and its GRPO groups score alike."""
    import torch

    from axisrl.backends.tiny import evaluate, load_policy, policy_of

    (dedup,) = {path.parent for path in workdir.glob("results/dedup/*/heldout_envs.parquet")}
    envs = pl.read_parquet(dedup / "heldout_envs.parquet").to_dicts()
    tasks = pl.read_parquet(dedup / "heldout_tasks.parquet").filter(pl.col("keep") & (pl.col("tier") == "V"))
    bases = [torch.load(path, weights_only=True)[0] for path in workdir.glob("results/pretrain/*/base.pt")]
    (base,) = [b for b in bases if b["param_hash"] == ok["base_param_hash"][0]]

    def success(policy: object) -> float:
        records = evaluate(policy, envs, tasks.to_dicts(), seed=0, greedy=False, domain=domain)
        return float(np.mean([r["success"] for r in records]))

    base_sampled = success(policy_of(base))
    runs = []
    for target in targets:
        folder = workdir / Path(target).parent
        for seed in pl.read_parquet(folder / "runs.parquet").filter(pl.col("status") == "ok")["seed"]:
            runs.append(success(load_policy(folder / "policies.pt", seed)))
    gain = np.asarray(runs) - base_sampled
    print(f"  sampled on V: base {base_sampled:.3f}, runs {np.mean(runs):.3f}, {int((gain > 0).sum())} above the base")


def _split(text: str) -> tuple[str, str]:
    key, _, value = text.partition("=")
    return key, value


def _setting(text: str) -> tuple[str, object]:
    key, _, value = text.partition("=")
    return key, yaml.safe_load(value)


def with_settings(config_overlay: dict, settings: list[str]) -> dict:
    """``config_overlay`` with each ``SECTION.KEY=VALUE`` of ``settings`` set in it (the value read as YAML)."""
    for path, value in map(_setting, settings):
        *sections, key = path.split(".")
        node = config_overlay
        for section in sections:
            node = node.setdefault(section, {})
        node[key] = value
    return config_overlay


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("domain")
    parser.add_argument("--seeds", type=int, default=16)
    parser.add_argument("--task-rule", default="raw", help="dedup.task_rule (repoworld's reports are alike: raw)")
    parser.add_argument("--workdir", type=Path, help="keep the study here (default: a temporary folder)")
    parser.add_argument("--train", action="append", default=[], metavar="KEY=VALUE", help="e.g. kl_coef=0.1")
    parser.add_argument("--point", action="append", default=[], metavar="AXIS=VALUE", help="e.g. d_env=32")
    parser.add_argument("--grid", action="append", default=[], metavar="AXIS=V1,V2", help="e.g. d_env=2,8,32")
    parser.add_argument("--sampled", action="store_true", help="also play V sampled (the study evaluates greedily)")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE", help="pretrain.steps=200")
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix=f"axisrl-{args.domain}-"))
    shutil.copytree(ROOT / "config", workdir / "config", dirs_exist_ok=True)
    overlay_path = workdir / "centre.yaml"
    settings = dict(map(_setting, args.train))
    grids = {axis: [int(v) for v in values.split(",")] for axis, values in map(_split, args.grid)}
    config_overlay = with_settings(overlay(args.domain, args.seeds, args.task_rule, settings, grids), args.set)
    overlay_path.write_text(yaml.safe_dump(config_overlay))
    schema_path = ROOT / "config" / "schema.yaml"
    config = load_config(ROOT / "config" / "config.yaml", overlay_path, schema_path=schema_path)
    centre = {**config["study"]["centre"], **{axis: int(value) for axis, value in map(_split, args.point)}}
    planned = study(config, load_yaml(schema_path))
    jobs = [
        point
        for point in planned.points.values()
        if all(getattr(point.design, axis) == value for axis, value in centre.items())
    ]
    targets = [f"results/train/{point.train.key}/runs.parquet" for point in jobs]
    started = time.time()
    subprocess.run(
        ["snakemake", *targets, "-s", str(ROOT / "Snakefile"), "--cores", "2", "--configfile", str(overlay_path)],
        cwd=workdir,
        check=True,
    )
    wall = time.time() - started
    runs = pl.concat([pl.read_parquet(workdir / target) for target in targets], how="diagonal_relaxed")
    episodes = pl.concat(
        [pl.read_parquet(workdir / target.replace("runs.parquet", "episodes.parquet")) for target in targets]
    )
    on_v = episodes.filter(pl.col("tier") == "V").group_by("run_key").agg(p_V=pl.col("success").mean(), n_V=pl.len())
    ok = runs.filter(pl.col("status") == "ok").join(on_v, on="run_key")
    gain = (ok["p_V"] - ok["p_V_base"]).to_numpy()
    lo, hi = stats.t.interval(0.95, len(gain) - 1, loc=gain.mean(), scale=stats.sem(gain)) if len(gain) > 1 else (0, 0)
    print(f"{args.domain} {args.train}: centre {centre}, {ok.height} of {runs.height} runs ok, wall {wall:.0f} s")
    print(f"  base on V: {ok['p_V_base'][0]:.3f} (n_V {ok['n_V'][0]}); RL runs on V: mean {ok['p_V'].mean():.3f}")
    above = int((gain > 0).sum())
    print(f"  paired gain: {gain.mean():+.3f} [{lo:+.3f}, {hi:+.3f}], {above} of {len(gain)} above the base")
    print(f"  per seed: {np.round(ok.sort('seed')['p_V'].to_numpy(), 3).tolist()}")
    signal = [c for c in ("train_success", "zero_variance_share", "rollout_kl_mean") if c in ok.columns]
    spent = (ok["executed_compute"] / ok["executed_compute"].mean()).std() if "executed_compute" in ok.columns else None
    means = ", ".join(f"{c} {ok[c].mean():.3f}" for c in signal)
    if args.sampled:
        sampled(workdir, ok, targets, args.domain)
    print(f"  {means}; executed compute {ok['executed_compute'].mean():.3g} FLOPs (relative SD {spent:.2f})")
    print(f"  study kept in {workdir}", file=sys.stderr)


if __name__ == "__main__":
    main()
