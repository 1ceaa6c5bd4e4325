"""SROLE's shields (§IV-C/D), registered once by name: ``SHIELDS.get("centralized")``.

A shield is a pure function ``shield(network, jobs, proposed, base_load, alpha) ->
ShieldResult``: it receives the agents' joint action and returns a safe one (Algorithm 1),
and a valid one: no node's memory above its capacity (§IV-B).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from edgewise.modelparallel.problem import EdgeNetwork, Job, TaskPlacement
from edgewise.registry import Registry

__all__ = ["SHIELDS", "Layer", "Shield", "ShieldResult", "Tally"]

Layer = tuple[int, int]  # (job index, partition index)


@dataclass(frozen=True, slots=True)
class ShieldResult:
    """The safe joint action: the placements, the layers whose host the shield changed (each
    earns its scheduling agent the κ penalty), the jobs it deferred to the next round (no
    host of the cluster has the memory for them: running them would be invalid, §IV-B), and
    the work done, in elementary checks, by the shield on the critical path (``ops``:
    shields of different clusters, and the sub-shields and delegate of one cluster, work in
    parallel) and in all (``total_ops``), and the measured wall seconds of the slowest
    shield (``seconds``; not deterministic)."""

    placements: tuple[TaskPlacement, ...]
    changed: tuple[Layer, ...]
    ops: int
    total_ops: int
    seconds: float = 0.0
    deferred: tuple[int, ...] = ()


@dataclass(slots=True)
class Tally:
    """What a shield has done so far, cluster by cluster: the hosts (edited in place), the
    changed layers, the deferred jobs, the critical-path and total ops, the slowest seconds."""

    hosts: list[list[int]]
    changed: list[Layer] = field(default_factory=list)
    deferred: set[int] = field(default_factory=set)
    longest_ops: int = 0
    total_ops: int = 0
    slowest_s: float = 0.0

    @classmethod
    def of(cls, proposed: Sequence[TaskPlacement]) -> Tally:
        return cls([list(p.nodes) for p in proposed])

    def add(self, changed: Sequence[Layer], longest_ops: int, total_ops: int,
            seconds: float) -> None:
        """One cluster's shields: they work beside the other clusters' (max), all count."""
        self.changed += changed
        self.longest_ops = max(self.longest_ops, longest_ops)
        self.total_ops += total_ops
        self.slowest_s = max(self.slowest_s, seconds)

    def result(self) -> ShieldResult:
        return ShieldResult(tuple(TaskPlacement(tuple(h)) for h in self.hosts),
                            tuple(dict.fromkeys(self.changed)), self.longest_ops,
                            self.total_ops, self.slowest_s, tuple(sorted(self.deferred)))


Shield = Callable[[EdgeNetwork, Sequence[Job], Sequence[TaskPlacement], NDArray[np.float64],
                   float], ShieldResult]

SHIELDS: Registry[Shield] = Registry("edgewise.modelparallel.shields", field="shield")
"""The shields by name (``centralized``, ``decentralized``); each module registers its own."""
