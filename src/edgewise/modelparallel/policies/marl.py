"""MARL (§IV-B): every node schedules its own job among its neighbours, unshielded."""

from __future__ import annotations

from edgewise.modelparallel.policies import REGISTRY, Method
from edgewise.modelparallel.schedule import decide_marl

__all__ = ["marl"]


@REGISTRY.register("marl")
def marl() -> Method:
    """Independent tabular Q-learning agents, one per node (§IV-B)."""
    return Method("marl", decide_marl)
