"""Independent Q-learning: MARL's decisions with agents that never look at the others (the
MARL of the earlier code, kept for comparison with CQ-learning)."""

from __future__ import annotations

from edgewise.modelparallel.policies import REGISTRY, Method
from edgewise.modelparallel.schedule import decide_marl

__all__ = ["iql"]


@REGISTRY.register("iql")
def iql() -> Method:
    """Independent tabular Q-learning agents, one per node, unshielded."""
    return Method("iql", decide_marl)
