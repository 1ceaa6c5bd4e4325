"""SROLE-D (§IV-D): MARL plus one shield per sub-cluster and a delegate for the boundary."""

from __future__ import annotations

from edgewise.modelparallel.policies import REGISTRY, Method
from edgewise.modelparallel.schedule import decide_marl

__all__ = ["srole_d"]


@REGISTRY.register("srole-d")
def srole_d() -> Method:
    """MARL's CQ-learning agents, shielded per sub-cluster, boundary collisions settled by
    a delegate."""
    return Method("srole-d", decide_marl, "decentralized", learner="cq")
