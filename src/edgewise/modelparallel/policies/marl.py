"""MARL (§IV-B, §V-B): every node schedules its own job among its neighbours, unshielded,
with CQ-learning agents (§V-B: "a simple multi-agent RL-based method CQ-learning [53]")."""

from __future__ import annotations

from edgewise.modelparallel.policies import REGISTRY, Method
from edgewise.modelparallel.schedule import decide_marl

__all__ = ["marl"]


@REGISTRY.register("marl")
def marl() -> Method:
    """CQ-learning agents, one per node: independent, on the joint state where another
    agent's action changes their reward (`cq.CQAgent`)."""
    return Method("marl", decide_marl, learner="cq")
