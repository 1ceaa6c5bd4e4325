"""The shields of SROLE as pure functions: centralized (§IV-C, Algorithm 1) and decentralized
with sub-clusters and a delegate for the boundary nodes (§IV-D)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from edgewise.modelparallel.problem import (
    ALPHA,
    EdgeNetwork,
    Job,
    Placement,
    combined_utilisation,
    load_of,
    overloaded,
)

__all__ = ["ShieldResult", "centralized_shield", "decentralized_shield", "demand_weight",
           "sub_clusters"]

Layer = tuple[int, int]  # (job index, partition index)


@dataclass(frozen=True, slots=True)
class ShieldResult:
    """The safe joint action: the placements, the layers whose host the shield changed (each
    earns its scheduling agent the κ penalty) and the work done, in elementary checks, by the
    shield on the critical path (``ops``: shields of different clusters, and the sub-shields
    and delegate of one cluster, work in parallel) and in all (``total_ops``), and the
    measured wall seconds of the slowest shield (``seconds``; not deterministic)."""

    placements: tuple[Placement, ...]
    changed: tuple[Layer, ...]
    ops: int
    total_ops: int
    seconds: float = 0.0


def demand_weight(demand: NDArray[np.float64], capacity: NDArray[np.float64]) -> float:
    """ω(l_i) = Π_k b_k(l_i) / C_k(d_j) (Eq. 3)."""
    return float(np.prod(demand / capacity))


def _fits(load: NDArray[np.float64], cap: NDArray[np.float64], node: int,
          demand: NDArray[np.float64], alpha: float) -> bool:
    return bool(np.all(load[node] + demand <= alpha * cap[node] + 1e-12))


def _relieve(network: EdgeNetwork, jobs: Sequence[Job], hosts: list[list[int]],
             load: NDArray[np.float64], node: int, movable: set[Layer],
             alpha: float) -> tuple[list[Layer], int]:
    """Algorithm 1 lines 5–14 for one node d_j: while it is overloaded, move its heaviest layer
    (Eq. 3) to the least-utilised (Eq. 2) neighbour of d_j that stays at or below α after
    taking it (§IV-C: "it searches for nearby edge nodes with high resource availability from
    edge node d_j"; "we limit our safe action from the nearby edges of the original edge node
    in the decided original action"); a layer that fits nowhere stays, the next is tried."""
    cap = network.capacity()
    ops = 1
    if not overloaded(load[node] / cap[node], alpha):
        return [], ops
    on_node = [(j, i) for (j, i) in movable if hosts[j][i] == node]
    on_node.sort(key=lambda L: (-demand_weight(jobs[L[0]].demand()[L[1]], cap[node]), L))
    ops += len(on_node)
    moved: list[Layer] = []
    for j, i in on_node:
        if not overloaded(load[node] / cap[node], alpha):
            break
        b = jobs[j].demand()[i]
        others = list(network.neighbours(node))
        others.sort(key=lambda k: (float(combined_utilisation(load[k] / cap[k])), k))
        for k in others:
            ops += 1
            if _fits(load, cap, k, b, alpha):
                load[node] -= b
                load[k] += b
                hosts[j][i] = k
                moved.append((j, i))
                break
    return moved, ops


def _shield(network: EdgeNetwork, jobs: Sequence[Job], hosts: list[list[int]],
            load: NDArray[np.float64], nodes: Sequence[int], movable: set[Layer],
            alpha: float) -> tuple[list[Layer], int]:
    """Algorithm 1 over ``nodes`` (lines 4–15), moving only ``movable`` layers. The pass is
    repeated while it moves a layer: relieving a later node can free room for a layer of an
    earlier one (each move lowers the total excess above α, so this ends)."""
    changed: list[Layer] = []
    ops = 0
    for _ in range(len(movable) + 1):
        before = len(changed)
        for node in nodes:
            moved, n = _relieve(network, jobs, hosts, load, node, movable, alpha)
            changed += moved
            ops += n
        if len(changed) == before:
            break
    return changed, ops


def centralized_shield(network: EdgeNetwork, jobs: Sequence[Job],
                       proposed: Sequence[Placement], base_load: NDArray[np.float64],
                       alpha: float = ALPHA) -> ShieldResult:
    """Algorithm 1: one shield per cluster sees every agent's action and every node's load
    (``base_load``: the demand already on the nodes, e.g. background tasks)."""
    hosts = [list(p.nodes) for p in proposed]
    load = base_load + load_of(network, jobs, proposed)
    changed: list[Layer] = []
    longest = total = 0
    slowest = 0.0
    for c in range(network.n_clusters):
        t0 = time.perf_counter()
        members = network.members(c)
        movable = {(j, i) for j, job in enumerate(jobs) if network.cluster(job.origin) == c
                   for i in range(len(job.partitions))}
        moved, ops = _shield(network, jobs, hosts, load, members, movable, alpha)
        ops += len(movable)  # lines 2–3: collect and virtually take every action
        changed += moved
        longest, total = max(longest, ops), total + ops
        slowest = max(slowest, time.perf_counter() - t0)
    return ShieldResult(tuple(Placement(tuple(h)) for h in hosts), tuple(changed), longest,
                        total, slowest)


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


def decentralized_shield(network: EdgeNetwork, jobs: Sequence[Job],
                         proposed: Sequence[Placement], base_load: NDArray[np.float64],
                         alpha: float = ALPHA, n_sub: int = 2) -> ShieldResult:
    """§IV-D: each sub-cluster's shield receives only its own agents' actions and checks its
    own nodes against the observed ``base_load`` plus those actions; the nodes on the
    boundary (receiving layers from agents of another sub-cluster) are checked instead by a
    delegate that receives every action on them and the nodes' utilisations. The shields
    and the delegate work at once on the same joint action, so two of them may move layers
    onto the same node (the residual collisions of §V-D). ``ops``: the slowest of them."""
    hosts = [list(p.nodes) for p in proposed]
    full = base_load + load_of(network, jobs, proposed)
    changed: list[Layer] = []
    longest = total = 0
    slowest = 0.0
    for c in range(network.n_clusters):
        subs = sub_clusters(network, c, n_sub)
        side = {j: s for s, group in enumerate(subs) for j in group}
        edge = _boundary(network, jobs, hosts, side)
        agents_of = [[j for j, job in enumerate(jobs) if side.get(job.origin) == s]
                     for s in range(len(subs))]
        views = [base_load + load_of(network, [jobs[j] for j in mine],
                                     [Placement(tuple(hosts[j])) for j in mine])
                 for mine in agents_of]
        work = [(views[s], [k for k in group if k not in edge],
                 {(j, i) for j in agents_of[s] for i in range(len(jobs[j].partitions))})
                for s, group in enumerate(subs)]
        work.append((full.copy(), sorted(edge),
                     {(j, i) for mine in agents_of for j in mine
                      for i in range(len(jobs[j].partitions)) if hosts[j][i] in edge}))
        moves: list[tuple[Layer, int]] = []
        shield_ops = []
        for view, nodes, movable in work:  # each on its own copy of the joint action
            mine_hosts = [list(h) for h in hosts]  # the copy simulates concurrency: not timed
            t0 = time.perf_counter()
            moved, ops = _shield(network, jobs, mine_hosts, view, nodes, movable, alpha)
            moves += [((j, i), mine_hosts[j][i]) for j, i in moved]
            shield_ops.append(ops + len(movable))  # receiving and taking its actions
            slowest = max(slowest, time.perf_counter() - t0)
        for (j, i), k in moves:
            hosts[j][i] = k
        changed += [m for m, _ in moves]
        longest, total = max(longest, max(shield_ops)), total + sum(shield_ops)
    return ShieldResult(tuple(Placement(tuple(h)) for h in hosts), tuple(changed), longest,
                        total, slowest)
