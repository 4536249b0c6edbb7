"""Builds the configured Task (``task.name``): ``math`` (local files or CHAMP, Math-Verify rewards as in
Section 2) or ``reasoning_gym`` (procedural tasks with their own verifiers)."""
from __future__ import annotations

from rlscale.config.registry import TASK
from rlscale.config.schema import TaskConfig
from rlscale.tasks.base import Task


def build_task(cfg: TaskConfig) -> Task:
    """The Task named by ``cfg.name``; each backend is imported only when chosen."""
    TASK.check(cfg.name)
    if cfg.name == "math":
        from rlscale.tasks.math import MathTask

        return MathTask(cfg)
    from rlscale.tasks.reasoning_gym import ReasoningGymTask

    return ReasoningGymTask(cfg)
