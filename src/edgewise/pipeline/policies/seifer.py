"""SEIFER (Parthasarathy & Krishnamachari 2023) §3.2: optimal partitioning, then k-path
matching of the transfer-size classes onto bandwidth classes (Algorithms 1–3)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from edgewise.errors import InfeasibleError
from edgewise.pipeline.policies import register
from edgewise.pipeline.policies._common import Tables, make_plan, tables
from edgewise.pipeline.policies.kpath import k_path
from edgewise.pipeline.policies.partitioning import Partition, optimal_partition
from edgewise.pipeline.problem import PipelinePlan, PipelineProblem

__all__ = ["k_path_matching", "runs", "seifer", "subgraph_k_path", "tau"]

Array = NDArray[np.float64]
BoolArray = NDArray[np.bool_]


def tau(bandwidth: Array, threshold: float, x: int) -> NDArray[np.int64]:
    """Eq. 8: edges with bandwidth ≥ ``threshold`` are class ``x``, the others the class
    right below (``x - 1``). G_c^X is the subgraph of class-``x`` edges."""
    return np.where(bandwidth >= threshold, x, x - 1).astype(np.int64)


def subgraph_k_path(bandwidth: Array, allowed: BoolArray, rng: np.random.Generator,
                    delta: float = 1e-3) -> list[int] | None:
    """Algorithm 2 (SUBGRAPH-K-PATH): the k-path of G_c^X for the highest threshold.

    Binary search over the edge weights sorted in descending order (line 3): ``low``
    moves past thresholds with no k-path in G_c^X, ``high`` down to one with a path.
    Only vertices that ``allowed`` admits somewhere (free nodes that fit, and the fixed
    ``s``/``u``) are kept, which plays the role of ``DEL(G_c, N)`` for used nodes.
    Returns vertex indices of ``bandwidth``, or None if no k-path exists at any threshold.
    """
    keep = np.flatnonzero(allowed.any(axis=0))
    sub = bandwidth[np.ix_(keep, keep)]
    edge_list = np.unique(sub[sub > 0])[::-1]
    low, high, best = 0, len(edge_list), None
    while low < high:
        median = (low + high) // 2
        adj = (tau(sub, float(edge_list[median]), 1) == 1) & (sub > 0)
        np.fill_diagonal(adj, False)
        result = k_path(adj, allowed[:, keep], rng, delta=delta)
        if result is None:
            low = median + 1
        else:
            high, best = median, result
    return None if best is None else [int(keep[v]) for v in best]


def runs(classes: Sequence[int]) -> list[tuple[int, int, int]]:
    """FIND-SUBARRAYS over S, in Algorithm 3's order: ``(class, start, length)`` of each
    maximal run of one class, highest class first (line 2), longest first (line 4)."""
    out: list[tuple[int, int, int]] = []
    start = 0
    for i in range(1, len(classes) + 1):
        if i == len(classes) or classes[i] != classes[start]:
            out.append((classes[start], start, i - start))
            start = i
    return sorted(out, key=lambda r: (-r[0], -r[2], r[1]))


def _allowed(t: Tables, cuts: Sequence[int], placed: Sequence[int | None], start: int,
             length: int) -> BoolArray:
    """Which vertices may take each position of the run's path: the placed ``startV`` /
    ``endV`` (lines 7–8), else free nodes that fit that partition's own memory."""
    n = t.n_nodes + 1
    free = np.ones(n, dtype=bool)
    free[[v for v in placed if v is not None]] = False
    allowed = np.zeros((length + 1, n), dtype=bool)
    for p in range(length + 1):
        q = start + p  # placed[q] hosts partition q - 1 (placed[0] is the dispatcher)
        fixed = placed[q]
        if fixed is not None:
            allowed[p, fixed] = True
            continue
        for v in np.flatnonzero(free).tolist():
            allowed[p, v] = t.fits(cuts[q - 1], cuts[q] - 1, v - 1)
    return allowed


def k_path_matching(t: Tables, part: Partition, rng: np.random.Generator,
                    delta: float = 1e-3) -> tuple[int, ...] | None:
    """Algorithm 3 (K-PATH-MATCHING): place the partitions, or None on failure.

    ``N`` (here ``placed``) has the dispatcher at position 0 and partition ``q - 1`` at
    position ``q``; transfer ``S[j]`` runs over edge (N[j], N[j + 1]). Each run of
    ``length`` class-X transfers needs a (length + 1)-vertex path (line 9). When the
    problem does not score the dispatcher's transfer (the paper's §6.1, where Algorithm 1
    returns ``minPath`` without Δ), S[0] is not matched and the dispatcher is not on the
    path."""
    placed: list[int | None] = [0] + [None] * len(part.sizes)
    skip = 0 if t.problem.dispatcher_transfer else 1
    for _, start, length in runs(part.classes[skip:]):
        allowed = _allowed(t, part.cuts, placed, start + skip, length)
        path = subgraph_k_path(t.problem.bandwidth_mbps, allowed, rng, delta)
        if path is None:
            return None
        placed[start + skip:start + skip + length + 1] = path  # line 10
    if placed[1] is None:  # one partition and nothing to match: any node that holds it
        hosts = [v for v in range(t.n_nodes) if t.fits(0, t.n_seg - 1, v)]
        if not hosts:
            return None
        placed[1] = hosts[0] + 1
    return tuple(int(v) - 1 for v in placed[1:] if v is not None)


@register("seifer")
def seifer(problem: PipelineProblem, rng: np.random.Generator, *, n_classes: int = 11,
           delta: float = 1e-3) -> PipelinePlan:
    """SEIFER's partitioning and placement (§3.2, Algorithms 1–3).

    Parameters
    ----------
    problem : PipelineProblem
        The chain and the cluster.
    rng : numpy.random.Generator
        Source of the k-path colourings.
    n_classes : int
        Transfer-size classes = bandwidth classes (§3.2.2; 11 is what most models need,
        §5.2.1). On failure the algorithm is re-run with one class fewer (end of §3.2.2).
    delta : float
        Failure probability allowed to each colour-coding k-path search.

    Returns
    -------
    PipelinePlan
        The plan, scored by the pipeline objective (compute included with ``gflops``).

    Raises
    ------
    InfeasibleError
        If nothing fits, or no matching was found even with one class.
    """
    t = tables(problem)
    for classes in range(n_classes, 0, -1):
        part = optimal_partition(t, classes)
        nodes = k_path_matching(t, part, rng, delta)
        if nodes is not None:
            return make_plan(problem, part.cuts, nodes, "seifer")
    raise InfeasibleError(f"SEIFER found no k-path matching for {problem.chain.name!r} "
                          f"with 1..{n_classes} classes")
