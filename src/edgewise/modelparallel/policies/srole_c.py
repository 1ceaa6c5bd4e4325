"""SROLE-C (§IV-C): MARL plus one centralized shield per cluster (Algorithm 1)."""

from __future__ import annotations

from edgewise.modelparallel.policies import REGISTRY, Method
from edgewise.modelparallel.schedule import decide_marl

__all__ = ["srole_c"]


@REGISTRY.register("srole-c")
def srole_c() -> Method:
    """MARL's CQ-learning agents, their joint action corrected by Algorithm 1 at the cluster
    head."""
    return Method("srole-c", decide_marl, "centralized", learner="cq")
