"""Algorithm 1's steps (§IV-C), shared by the centralized and the decentralized shield:
rank a node's layers by their demand weight (Eq. 3) and move the heaviest to the least
utilised (Eq. 2) neighbour that stays at or below α; then repair what would make the
schedule invalid (§IV-B: memory above capacity), deferring a job that fits nowhere.

Moving a layer moves its CPU and memory and changes which transfers cross links: the
transfers to its predecessor and successor in the chain now go to and from its new host.
A move is taken only if every node whose demand it raises stays at or below α and the
relieved node's excess above α falls, so a shield never overloads a node that was fine
and every move makes progress.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from edgewise.modelparallel.jct import combined_utilisation, job_load, overloaded
from edgewise.modelparallel.problem import MEM, EdgeNetwork, Job
from edgewise.modelparallel.shields import Layer

__all__ = ["demand_weight", "move_delta", "relieve", "repair_memory", "shield_pass"]

EPS = 1e-9


def demand_weight(demand: NDArray[np.float64], capacity: NDArray[np.float64]) -> float:
    """ω(l_i) = Π_k b_k(l_i) / C_k(d_j) (Eq. 3)."""
    return float(np.prod(demand / capacity))


def move_delta(job: Job, hosts: Sequence[int], i: int, to: int,
               n: int) -> NDArray[np.float64]:
    """The (n, 3) change of demand when layer ``i`` of ``job`` moves from its host to ``to``."""
    moved = list(hosts)
    moved[i] = to
    return job_load(job, moved, n) - job_load(job, hosts, n)


def _excess(load: NDArray[np.float64], cap: NDArray[np.float64], alpha: float) -> float:
    return float(np.sum(np.maximum(0.0, load / cap - alpha)))


def _acceptable(load: NDArray[np.float64], cap: NDArray[np.float64], delta: NDArray[np.float64],
                node: int, alpha: float) -> bool:
    """Every other node whose demand rises stays ≤ α; ``node``'s excess above α falls."""
    after = load + delta
    rising = np.any(delta > EPS, axis=1)
    rising[node] = False
    if np.any(after[rising] > alpha * cap[rising] + EPS):
        return False
    return _excess(after[node], cap[node], alpha) < _excess(load[node], cap[node], alpha) - EPS


def _by_utilisation(load: NDArray[np.float64], cap: NDArray[np.float64],
                    nodes: Sequence[int]) -> list[int]:
    return sorted(nodes, key=lambda k: (float(combined_utilisation(load[k] / cap[k])), k))


def relieve(network: EdgeNetwork, jobs: Sequence[Job], hosts: list[list[int]],
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
        for k in _by_utilisation(load, cap, network.neighbours(node)):
            ops += 1
            delta = move_delta(jobs[j], hosts[j], i, k, network.n)
            if _acceptable(load, cap, delta, node, alpha):
                load += delta
                hosts[j][i] = k
                moved.append((j, i))
                break
    return moved, ops


def shield_pass(network: EdgeNetwork, jobs: Sequence[Job], hosts: list[list[int]],
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
            moved, n = relieve(network, jobs, hosts, load, node, movable, alpha)
            changed += moved
            ops += n
        if len(changed) == before:
            break
    return changed, ops


def _memory_host(network: EdgeNetwork, job: Job, hosts: Sequence[int], i: int, node: int,
                 load: NDArray[np.float64], alpha: float) -> tuple[int | None, int]:
    """A node of ``node``'s cluster that can take layer ``i`` within its memory: the first,
    in order of utilisation among ``node``'s neighbours and then among the rest of the
    cluster, where no node goes above α, else the first where the memory fits.
    (host or None, checks made)."""
    cap = network.capacity()
    near = network.neighbours(node)
    rest = [k for k in network.members(network.cluster(node)) if k != node and k not in near]
    ops, fallback = 0, None
    for k in [*_by_utilisation(load, cap, near), *_by_utilisation(load, cap, rest)]:
        ops += 1
        delta = move_delta(job, hosts, i, k, network.n)
        after = load + delta
        if after[k, MEM] > cap[k, MEM] + EPS:
            continue
        rising = np.any(delta > EPS, axis=1)
        if not np.any(overloaded(after[rising] / cap[rising], alpha)):
            return k, ops
        fallback = k if fallback is None else fallback
    return fallback, ops


def repair_memory(network: EdgeNetwork, jobs: Sequence[Job], hosts: list[list[int]],
                  load: NDArray[np.float64], nodes: Sequence[int], movable: set[Layer],
                  deferred: set[int], alpha: float) -> tuple[list[Layer], int]:
    """Make the schedule valid on ``nodes`` (§IV-B): while a node's memory demand exceeds
    its capacity, move its largest layer to a node of the cluster where it fits
    (`_memory_host`); if none takes any of its layers, defer the job with the most memory
    on it (the whole job waits for the next round; its demand leaves ``load``)."""
    cap = network.capacity()
    changed: list[Layer] = []
    ops = 0
    for node in nodes:
        while load[node, MEM] > cap[node, MEM] + EPS:
            ops += 1
            on_node = sorted(((j, i) for (j, i) in movable if hosts[j][i] == node
                              and j not in deferred),
                             key=lambda L: (-jobs[L[0]].partitions[L[1]].memory_mb, L))
            moved = False
            for j, i in on_node:
                k, n = _memory_host(network, jobs[j], hosts[j], i, node, load, alpha)
                ops += n
                if k is not None:
                    load += move_delta(jobs[j], hosts[j], i, k, network.n)
                    hosts[j][i] = k
                    changed.append((j, i))
                    moved = True
                    break
            if not moved:
                if not on_node:
                    break  # only the background or unmovable layers: nothing to repair
                j = max({j for j, _ in on_node}, key=lambda j: (sum(
                    jobs[j].partitions[i].memory_mb for jj, i in on_node if jj == j), -j))
                load -= job_load(jobs[j], hosts[j], network.n)
                deferred.add(j)
    return changed, ops
