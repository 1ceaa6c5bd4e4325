"""Algorithm 1's steps (§IV-C), shared by the centralized and the decentralized shield:
rank a node's layers by their demand weight (Eq. 3) and move the heaviest to the least
utilised (Eq. 2) neighbour that stays at or below α."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from edgewise.modelparallel.problem import EdgeNetwork, Job, combined_utilisation, overloaded
from edgewise.modelparallel.shields import Layer

__all__ = ["demand_weight", "relieve", "shield_pass"]


def demand_weight(demand: NDArray[np.float64], capacity: NDArray[np.float64]) -> float:
    """ω(l_i) = Π_k b_k(l_i) / C_k(d_j) (Eq. 3)."""
    return float(np.prod(demand / capacity))


def _fits(load: NDArray[np.float64], cap: NDArray[np.float64], node: int,
          demand: NDArray[np.float64], alpha: float) -> bool:
    return bool(np.all(load[node] + demand <= alpha * cap[node] + 1e-12))


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


