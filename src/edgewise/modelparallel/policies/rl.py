"""Centralized RL (§V-B): the cluster head schedules every job of its cluster."""

from __future__ import annotations

from edgewise.modelparallel.policies import REGISTRY, Method
from edgewise.modelparallel.schedule import decide_central

__all__ = ["rl"]


@REGISTRY.register("rl")
def rl() -> Method:
    """RL at the cluster head; negative reward only for memory violations (§V-B)."""
    return Method("rl", decide_central)
