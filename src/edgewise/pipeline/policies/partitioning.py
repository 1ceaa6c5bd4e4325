"""SEIFER §3.2.1: optimal partitioning by minimum total transfer-size class (Algorithm 1).

Heterogeneous memory. The paper assumes homogeneous nodes (κ = the smallest node's
memory). Here a range of segments is a vertex of the partition graph (Eq. 6) if it fits
κ, starting with κ = the LARGEST node's memory; placement must then respect each node's
own κ_v (a partition only goes to a node it fits), so the chosen partition is kept only
if its partitions can go to distinct nodes they fit (:func:`matchable`). Otherwise κ
steps down through the distinct node memories (ending at the paper's homogeneous κ), and
as a last resort the partition of a memory-only feasible plan is used.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np

from edgewise.errors import InfeasibleError
from edgewise.pipeline.policies._common import Tables, feasible_path, matchable

__all__ = ["Partition", "optimal_partition", "partition_graph", "size_class",
           "transfer_thresholds"]

Cost = tuple[int, int, int]


@dataclass(frozen=True, slots=True)
class Partition:
    """Chosen cuts (as :class:`PipelinePlan` ``cuts``), the transfer sizes S into each
    partition — S[0] = η(p_0) from the dispatcher partition Δ — and their classes (Eq. 5)."""

    cuts: tuple[int, ...]
    sizes: tuple[int, ...]
    classes: tuple[int, ...]


def transfer_thresholds(sizes: Sequence[int], n_classes: int) -> tuple[float, ...]:
    """Class boundaries: the ``1/c, ..., (c-1)/c`` quantiles of the transfer sizes (Eq. 5)."""
    if n_classes < 1:
        raise ValueError(f"n_classes must be ≥ 1, got {n_classes}")
    qs = [k / n_classes for k in range(1, n_classes)]
    return tuple(float(x) for x in np.quantile(np.asarray(sizes, dtype=np.float64), qs))


def size_class(size: float, thresholds: Sequence[float]) -> int:
    """Class 0 (lowest, "L") to ``len(thresholds)`` (highest, "H") of a transfer size."""
    return int(np.searchsorted(np.asarray(thresholds), size, side="right"))


def partition_graph(t: Tables, kappa: int) -> dict[int, list[int]]:
    """Eq. 6–7 by start segment: ``graph[i]`` lists every end ``j`` such that the range
    ``i..j`` fits ``kappa``; range ``i..j`` has an edge to every range starting at
    ``j + 1``. Ranges starting at 0 are roots, those ending at the last segment leaves.
    O(N²) for N segments (ranges grow until they overflow κ)."""
    graph: dict[int, list[int]] = {}
    for i in range(t.n_seg):
        graph[i] = [j for j in range(i, t.n_seg) if t.mem(i, j) <= kappa]
    return graph


def _min_cost_cuts(t: Tables, graph: dict[int, list[int]], weight: Sequence[int],
                   max_parts: int) -> tuple[int, ...] | None:
    """Algorithm 1 (MIN-COST-PATH, PARTITION): the root→leaf path with the least total
    edge weight (ties: fewer bytes, then fewer partitions) and at most ``max_parts``
    vertices. ``path_from`` is the paper's ``pathFrom`` map (line 2), keyed by the first
    segment after the previous partition's last layer and the partitions left."""
    last = t.n_seg - 1

    @cache
    def path_from(i: int, left: int) -> tuple[Cost, tuple[int, ...]] | None:
        if left == 0:
            return None
        options: list[tuple[Cost, tuple[int, ...]]] = []
        for j in graph[i]:
            if j == last:  # a leaf
                options.append(((0, 0, 1), (j,)))
                continue
            sub = path_from(j + 1, left - 1)
            if sub is not None:  # newCost ← minCost + w(v, chosenNode)
                (w, b, k), ends = sub
                options.append(((w + weight[j], b + t.sizes[j + 1], k + 1), (j, *ends)))
        return min(options) if options else None

    best = path_from(0, max_parts)
    return None if best is None else (0, *(j + 1 for j in best[1]))


def _memory_feasible_cuts(t: Tables) -> tuple[int, ...]:
    """Cuts of any plan that fits memory on distinct nodes; InfeasibleError if none."""
    found = feasible_path(t, float("inf"))
    if found is None:
        raise InfeasibleError(f"{t.problem.chain.name!r} cannot be split onto distinct "
                              f"nodes of {t.n_nodes} that each fit their partition "
                              "(more partitions than nodes, or no link between them)")
    return found[0]


def optimal_partition(t: Tables, n_classes: int) -> Partition:
    """SEIFER's optimal partition Θ with the dispatcher partition Δ prepended (§3.2.1).

    Parameters
    ----------
    t : Tables
        The instance's tables (:func:`~edgewise.pipeline.policies._common.tables`).
    n_classes : int
        Number of transfer-size classes; thresholds are quantiles of the candidate
        partition points' transfer sizes η(p_0), ..., η(p_{N-1}).

    Returns
    -------
    Partition
        Cuts minimising the sum of transfer-size classes, their S and classes.

    Raises
    ------
    InfeasibleError
        If no split fits distinct nodes' memories.
    """
    thresholds = transfer_thresholds(t.sizes, n_classes)
    weight = [size_class(t.sizes[j + 1], thresholds) if j + 1 < t.n_seg else 0
              for j in range(t.n_seg)]
    node_mem = t.problem.memory_bytes
    cuts: tuple[int, ...] | None = None
    for kappa in sorted(set(node_mem), reverse=True):
        cuts = _min_cost_cuts(t, partition_graph(t, kappa), weight, len(node_mem))
        if cuts is not None and matchable(
                [t.mem(a, b - 1) for a, b in itertools.pairwise(cuts)], node_mem):
            break
        cuts = None
    if cuts is None:
        cuts = _memory_feasible_cuts(t)
    sizes = tuple(t.sizes[c] for c in cuts[:-1])
    return Partition(cuts, sizes, tuple(size_class(s, thresholds) for s in sizes))
