"""verl's custom reward function for every domain: replay the calls the agent executed, verify the task.

Configured as ``reward.custom_reward_function.path=pkg://axisrl.backends.verl.reward`` (verl 0.9.1's
``main_ppo`` silently ignores the legacy top-level ``custom_reward_function`` key) with the reward
density in ``reward.custom_reward_function.reward_kwargs``. verl's reward manager calls it with
keyword arguments only and merges the agent loop's ``extra_fields`` into ``extra_info``.
"""

from __future__ import annotations

import json
from typing import Any

from axisrl.backends.verl.episode import CALLS_KEY, AgentEpisode


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: str,
    extra_info: dict[str, Any] | None = None,
    reward_density: str = "sparse",
    **kwargs: Any,
) -> dict[str, float]:
    """Score one trajectory from the environment's final state, never from its text.

    ``data_source`` is the row's domain (any of ``axisrl.domains.DOMAINS``), ``ground_truth`` the
    task row as JSON, ``extra_info["spec"]`` the environment and ``extra_info[CALLS_KEY]`` the calls
    the ``axisrl_agent`` loop executed. ``solution_str`` (verl's decode of every turn, tool outputs
    included) is not parsed: replaying the executed calls reproduces the agent's state exactly,
    re-parsing the text would not (verl executes only ``max_parallel_calls`` calls per turn). The
    keys are the same for every sample, as verl requires: ``score`` (trained), ``acc`` (success,
    verl's core validation metric), ``subgoal_fraction``, ``env_steps`` and ``finished``.
    """
    if extra_info is None or CALLS_KEY not in extra_info:
        raise ValueError(
            f"extra_info has no {CALLS_KEY!r}: the row was not run by the axisrl agent loop "
            "(check the row's agent_name and rollout.agent.agent_loop_config_path)"
        )
    episode = AgentEpisode.from_json(data_source, extra_info["spec"], ground_truth)
    episode.replay(json.loads(extra_info[CALLS_KEY]))
    outcome = episode.outcome()
    return {
        "score": outcome.score(reward_density),
        "acc": float(outcome.success),
        "subgoal_fraction": outcome.score("dense"),
        "env_steps": float(outcome.env_steps),
        "finished": float(outcome.finished),
    }
