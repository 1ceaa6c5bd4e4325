"""SROLE-C's shield (§IV-C, Algorithm 1): one shield per cluster, at its head, sees every
agent's action and every node's load."""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from edgewise.modelparallel.jct import load_of
from edgewise.modelparallel.problem import ALPHA, EdgeNetwork, Job, TaskPlacement
from edgewise.modelparallel.shields import SHIELDS, ShieldResult, Tally
from edgewise.modelparallel.shields.algorithm1 import repair_memory, shield_pass

__all__ = ["centralized_shield"]


@SHIELDS.register("centralized")
def centralized_shield(network: EdgeNetwork, jobs: Sequence[Job],
                       proposed: Sequence[TaskPlacement], base_load: NDArray[np.float64],
                       alpha: float = ALPHA) -> ShieldResult:
    """Algorithm 1: one shield per cluster sees every agent's action and every node's load
    (``base_load``: the demand already on the nodes, e.g. background tasks), then repairs
    any memory violation left (`algorithm1.repair_memory`)."""
    tally = Tally.of(proposed)
    load = base_load + load_of(network, jobs, proposed)
    for c in range(network.n_clusters):
        t0 = time.perf_counter()
        members = network.members(c)
        movable = {(j, i) for j, job in enumerate(jobs) if network.cluster(job.origin) == c
                   for i in range(len(job.partitions))}
        moved, ops = shield_pass(network, jobs, tally.hosts, load, members, movable, alpha)
        fixed, more = repair_memory(network, jobs, tally.hosts, load, members, movable,
                                    tally.deferred, alpha)
        ops += more + len(movable)  # lines 2–3: collect and virtually take every action
        tally.add(moved + fixed, ops, ops, time.perf_counter() - t0)
    return tally.result()
