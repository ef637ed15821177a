"""tiny: a CPU RL backend for toolworld (GRPO or PPO on a permutation-equivariant pointer policy).

    result = train(envs, tasks, TrainSettings(algo="grpo", width=64), seed=0)
    # or several seeds, one after another (a train job's):
    results = train_seeds(envs, tasks, TrainSettings(), seeds=[0, 1, 2])
    # or with synthetic trajectories in its GRPO groups (SWiRL-like replays or DreamGym-like simulation):
    result = train(envs, tasks, settings, seed=0, synthetic=SyntheticTrajectories(4, replay=rows_by_task))
    save_checkpoints({0: checkpoint(result)}, "policies.pt")
    episodes = evaluate(load_policy("policies.pt", seed=0), heldout_envs, heldout_tasks, seed=0)

The caller pins threads (``OMP_NUM_THREADS=1`` before importing torch, ``torch.set_num_threads(1)``);
this package never changes them. How the backend works and why: ``docs/tiny-backend.md``.
"""

from axisrl.backends.tiny.checkpoint import checkpoint, load_policy, policy_of, save_checkpoints
from axisrl.backends.tiny.evaluate import HeldoutStarts, baseline_episodes, evaluate
from axisrl.backends.tiny.policy import ToolPointer
from axisrl.backends.tiny.settings import TrainSettings
from axisrl.backends.tiny.synthetic import SyntheticTrajectories
from axisrl.backends.tiny.train import TrainResult, make_policy, train, train_seeds

__all__ = [
    "HeldoutStarts",
    "SyntheticTrajectories",
    "ToolPointer",
    "TrainResult",
    "TrainSettings",
    "baseline_episodes",
    "checkpoint",
    "evaluate",
    "load_policy",
    "make_policy",
    "policy_of",
    "save_checkpoints",
    "train",
    "train_seeds",
]
