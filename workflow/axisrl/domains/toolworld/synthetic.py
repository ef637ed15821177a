"""Synthetic data sources that imitate the paper's synthesis method families (Table 3).

Real data is the exact generator (``generate_pool``). A synthetic source makes artifacts of the
same shape (environment, task and trajectory rows) plus ``source`` (the method) and ``defect``
(null when faithful, else the failure injected), so reports can measure defect rates; training
never reads ``defect``. How often a method fails is its *fidelity model*, a plain dict of
probabilities (``METHODS[name].fidelity``, overridable per config); every draw comes from
``random.Random(derive_seed(seed, "synthetic", method, ...))``, so a source is a pure function of
its inputs.

* Environment synthesis (``awm``, ``genenv``; axis ``d_env``): new worlds from their own seed
  stream, each with ``generate_tasks`` tasks. ``description_mismatch``: the environment's tool
  documentation disagrees with what its tools do (see ``defects.mismatch``); ``unverifiable_goal``:
  a task's goal is made unreachable (see ``defects.unreachable_goal``).
* Task synthesis (``autoplay``, ``sca``, ``rlve``; axis ``d_task``): new tasks for real
  environments, corrupted per the method's mix (``unsolvable``, ``mislabelled``,
  ``near_duplicate``) and then passed through the method's own filter.
* Trajectory synthesis (``swirl``; axis ``d_traj``): the reference of a real task with step
  errors, kept unless the step-wise judge catches one.
* Environment + trajectory synthesis (``dreamgym``; axis ``d_traj``): ``SimulatedEnv`` (in
  ``simulated.py``) steps rollouts at training time; nothing is generated here.

``common_core=True`` replaces every method's own filter by one shared core (the reference must
execute and pass its verifier, recall 1.0; SWiRL's judge at recall 1.0) and leaves the failure
mixes as they are (Table 16).

The registry and fidelity models are in ``methods``, what the families share in
``synthetic_common`` and each family's generator in ``synthetic_envs``, ``synthetic_tasks`` and
``synthetic_trajectories``; this module runs them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from axisrl.domains.toolworld.methods import METHODS, method_fidelity
from axisrl.domains.toolworld.synthetic_common import SyntheticPool
from axisrl.domains.toolworld.synthetic_envs import env_method, world_shape
from axisrl.domains.toolworld.synthetic_tasks import task_method
from axisrl.domains.toolworld.synthetic_trajectories import trajectory_method
from axisrl.domains.toolworld.world import Spec

__all__ = ["generate_synthetic"]


def generate_synthetic(
    envs: list[dict[str, Any]], tasks: list[dict[str, Any]], cfg: Mapping[str, Any]
) -> SyntheticPool:
    """Synthetic rows of every method in ``cfg["methods"]`` (``{name: fidelity overrides}``) from
    the real training pool rows ``envs`` and ``tasks``.

    ``cfg``: ``seed``; ``envs`` (environments per environment method); ``tasks_per_env`` (tasks per
    real environment for task methods, and per synthetic environment unless ``env_tasks`` is
    given); ``task_envs`` (task and trajectory methods work on the first this-many real
    environments in pool order, the rule the mixtures read); ``trajectories_per_task`` (SWiRL,
    per real task of those environments); ``common_core`` (default false). ``dreamgym`` makes no
    rows: its artifact is ``SimulatedEnv``, run at training time.
    """
    seed, core = cfg["seed"], bool(cfg.get("common_core", False))
    fidelity = {name: method_fidelity(name, overrides, core) for name, overrides in cfg["methods"].items()}
    out = SyntheticPool()
    real_specs = {env["env_id"]: _spec(env) for env in envs}
    targets = envs[: cfg["task_envs"]]
    real_tasks: dict[str, list[dict[str, Any]]] = {}
    for task in tasks:
        real_tasks.setdefault(task["env_id"], []).append(task)
    for name, fid in fidelity.items():
        kind = METHODS[name].kind
        if kind == "env":
            n_tasks = cfg.get("env_tasks", cfg["tasks_per_env"])
            out.stats[name] = env_method(
                name, fid, core, seed, cfg["envs"], n_tasks, world_shape(real_specs.values()), out
            )
        elif kind == "task":
            out.stats[name] = task_method(name, fid, seed, cfg["tasks_per_env"], targets, real_specs, real_tasks, out)
        elif kind == "trajectory":
            out.stats[name] = trajectory_method(
                name, fid, seed, cfg["trajectories_per_task"], targets, real_specs, real_tasks, out
            )
    return out


def _spec(env: Mapping[str, Any]) -> Spec:
    return json.loads(env["spec"]) if isinstance(env["spec"], str) else env["spec"]
