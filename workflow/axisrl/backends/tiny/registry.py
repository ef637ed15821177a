"""The tiny trainer's registries, below every module that fills or reads them: ``UPDATES`` (update
rules by ``TrainSettings.algo``, filled by ``updates.register_update``) and ``KL_BOUNDS`` (step bounds by
``TrainSettings.kl_bound``). Kept apart so that the settings can check a name against them without
importing the rules, and the rules can name the settings without importing the trainer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

UPDATES: dict[str, Callable[..., Any]] = {}
"""The update rules by ``TrainSettings.algo``, filled by ``register_update``."""

KL_BOUNDS: dict[str, Callable[[float, float, float], float]] = {}
"""Rules that bound an update's step by its measured ``rollout_kl``, by ``TrainSettings.kl_bound``:
each maps (learning-rate scale, the last update's rollout_kl, target_kl) to the next scale."""
