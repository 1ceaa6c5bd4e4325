"""SEIFER §6.1's joint-optimisation baseline: greedy partitions along greedy node paths."""

from __future__ import annotations

import numpy as np

from edgewise.errors import InfeasibleError
from edgewise.pipeline.policies import register
from edgewise.pipeline.policies._common import (
    Tables,
    make_plan,
    objective,
    parts_needed,
    tables,
)
from edgewise.pipeline.problem import PipelinePlan, PipelineProblem

__all__ = ["joint_greedy"]


def _next_end(t: Tables, i: int, v: int, free: list[int]) -> int | None:
    """(a) The partition from segment ``i`` with the smallest transfer size that fits node
    ``v``: the rest of the chain if it fits (nothing to send on, §5.2.2), else the end whose
    output is smallest (ties: the longer partition). Guard (ours): only ends after which
    the ``free`` nodes could still cover the rest, so the walk does not strand itself."""
    ends = [j for j in range(i, t.n_seg)
            if t.fits(i, j, v) and parts_needed(t, j + 1, free) <= len(free)]
    if not ends:
        return None
    if ends[-1] == t.n_seg - 1:
        return ends[-1]
    return min(reversed(ends), key=lambda j: t.sizes[j + 1])


def _walk(t: Tables, start: int) -> tuple[list[int], list[int]] | None:
    """Steps (a)–(b) from node ``start``, or None if the walk gets stuck."""
    bw = t.problem.bandwidth_mbps
    cuts, nodes, v = [0], [start], start
    while True:
        free = [w for w in range(t.n_nodes) if w not in nodes]
        end = _next_end(t, cuts[-1], v, free)
        if end is None:
            return None
        cuts.append(end + 1)
        if end == t.n_seg - 1:
            return cuts, nodes
        # (b) the highest-bandwidth unused neighbour (that can hold the next segment)
        options = [w for w in free
                   if t.fits(end + 1, end + 1, w) and bw[v + 1, w + 1] > 0]
        if not options:
            return None
        v = max(options, key=lambda w: float(bw[v + 1, w + 1]))
        nodes.append(v)


@register("joint-greedy")
def joint_greedy(problem: PipelineProblem, rng: np.random.Generator) -> PipelinePlan:
    """§6.1 (2), the joint-optimisation algorithm. For each node n: "(a) At each step
    choose the partition with the smallest transfer size that will fit within the node
    [...] (b) Starting at n, find the neighbor in the communication graph whose edge e has
    the highest bandwidth, and add that to the path of chosen nodes c. Then, find the
    highest bandwidth edge from e, and so on. (c) Compare the bottleneck latency found
    with p and c to the smallest bottleneck found with all nodes n thus far, and update".

    Deterministic (``rng`` is unused); ties go to the lower-numbered start node.
    O(n · k · (n + N)) for n nodes, k partitions, N segments.

    Raises
    ------
    InfeasibleError
        If the greedy walk gets stuck from every start node.
    """
    t = tables(problem)
    best: tuple[float, list[int], list[int]] | None = None
    for start in range(t.n_nodes):
        walk = _walk(t, start)
        if walk is None:
            continue
        score = objective(problem, walk[0], walk[1])
        if best is None or score < best[0]:
            best = (score, *walk)
    if best is None:
        raise InfeasibleError(f"the greedy walk for {problem.chain.name!r} got stuck from "
                              "every start node (memory or too few nodes)")
    return make_plan(problem, best[1], best[2], "joint-greedy")
