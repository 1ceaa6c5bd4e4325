"""SROLE-D's shields (§IV-D): one per sub-cluster, and a delegate for the boundary nodes."""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from edgewise.modelparallel.jct import load_of
from edgewise.modelparallel.problem import ALPHA, EdgeNetwork, Job, TaskPlacement
from edgewise.modelparallel.shields import SHIELDS, Layer, ShieldResult, Tally
from edgewise.modelparallel.shields.algorithm1 import repair_memory, shield_pass

__all__ = ["decentralized_shield", "sub_clusters"]


def sub_clusters(network: EdgeNetwork, cluster: int, n_sub: int = 2) -> list[tuple[int, ...]]:
    """§IV-D: a cluster's nodes split into ``n_sub`` groups of geographic neighbours (by x,
    then y coordinate), as equal in size as possible."""
    members = sorted(network.members(cluster),
                     key=lambda j: (network.nodes[j].x_m, network.nodes[j].y_m, j))
    return [tuple(sorted(part.tolist())) for part in np.array_split(members, n_sub) if len(part)]


def _boundary(network: EdgeNetwork, jobs: Sequence[Job], hosts: list[list[int]],
              side: dict[int, int]) -> set[int]:
    """Nodes of the cluster that receive a layer from an agent of another sub-cluster."""
    return {h for j, job in enumerate(jobs) if job.origin in side
            for h in hosts[j] if side.get(h, -1) != side[job.origin]}


@SHIELDS.register("decentralized")
def decentralized_shield(network: EdgeNetwork, jobs: Sequence[Job],
                         proposed: Sequence[TaskPlacement], base_load: NDArray[np.float64],
                         alpha: float = ALPHA, n_sub: int = 2) -> ShieldResult:
    """§IV-D: each sub-cluster's shield receives only its own agents' actions and checks its
    own nodes against the observed ``base_load`` plus those actions; the nodes on the
    boundary (receiving layers from agents of another sub-cluster) are checked instead by a
    delegate that receives every action on them and the nodes' utilisations. The shields
    and the delegate work at once on the same joint action, so two of them may move layers
    onto the same node (the residual collisions of §V-D). Then the delegate checks the
    merged joint action for memory violations, which would make it invalid (§IV-B), and
    repairs them (`algorithm1.repair_memory`), after the shields. ``ops``: the slowest of
    the shields and the delegate, plus the repair."""
    tally = Tally.of(proposed)
    hosts, deferred = tally.hosts, tally.deferred
    full = base_load + load_of(network, jobs, proposed)
    for c in range(network.n_clusters):
        subs = sub_clusters(network, c, n_sub)
        agents_of, work = _work(network, jobs, hosts, base_load, full, subs)
        moves, shield_ops, concurrent = _concurrently(network, jobs, hosts, work, alpha)
        for (j, i), k in moves:
            hosts[j][i] = k
        t0 = time.perf_counter()
        ours = [j for mine in agents_of for j in mine]
        merged = base_load + load_of(network, [jobs[j] for j in ours],
                                     [TaskPlacement(tuple(hosts[j])) for j in ours])
        fixed, repair = repair_memory(network, jobs, hosts, merged, network.members(c),
                                      {(j, i) for j in ours
                                       for i in range(len(jobs[j].partitions))},
                                      deferred, alpha)
        tally.add([m for m, _ in moves] + fixed, max(shield_ops) + repair,
                  sum(shield_ops) + repair, concurrent + time.perf_counter() - t0)
    return tally.result()


Work = tuple[NDArray[np.float64], list[int], set[Layer]]


def _work(network: EdgeNetwork, jobs: Sequence[Job], hosts: list[list[int]],
          base_load: NDArray[np.float64], full: NDArray[np.float64],
          subs: list[tuple[int, ...]]) -> tuple[list[list[int]], list[Work]]:
    """Per sub-cluster shield and for the delegate: its view of the load, the nodes it
    checks and the layers it may move; and the jobs of each sub-cluster's agents."""
    side = {j: s for s, group in enumerate(subs) for j in group}
    edge = _boundary(network, jobs, hosts, side)
    agents_of = [[j for j, job in enumerate(jobs) if side.get(job.origin) == s]
                 for s in range(len(subs))]
    views = [base_load + load_of(network, [jobs[j] for j in mine],
                                 [TaskPlacement(tuple(hosts[j])) for j in mine])
             for mine in agents_of]
    work: list[Work] = [(views[s], [k for k in group if k not in edge],
                         {(j, i) for j in agents_of[s] for i in range(len(jobs[j].partitions))})
                        for s, group in enumerate(subs)]
    work.append((full.copy(), sorted(edge),
                 {(j, i) for mine in agents_of for j in mine
                  for i in range(len(jobs[j].partitions)) if hosts[j][i] in edge}))
    return agents_of, work


def _concurrently(network: EdgeNetwork, jobs: Sequence[Job], hosts: list[list[int]],
                  work: list[Work], alpha: float
                  ) -> tuple[list[tuple[Layer, int]], list[int], float]:
    """The shields and the delegate at once, each on its own copy of the joint action: the
    moves they make, their checks, and the wall seconds of the slowest."""
    moves: list[tuple[Layer, int]] = []
    shield_ops, concurrent = [], 0.0
    for view, nodes, movable in work:
        mine_hosts = [list(h) for h in hosts]  # the copy simulates concurrency: not timed
        t0 = time.perf_counter()
        moved, ops = shield_pass(network, jobs, mine_hosts, view, nodes, movable, alpha)
        moves += [((j, i), mine_hosts[j][i]) for j, i in moved]
        shield_ops.append(ops + len(movable))  # receiving and taking its actions
        concurrent = max(concurrent, time.perf_counter() - t0)
    return moves, shield_ops, concurrent
