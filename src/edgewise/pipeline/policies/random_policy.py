"""SEIFER §6.1's random baseline: random nodes, each with a random partition it can hold."""

from __future__ import annotations

import numpy as np

from edgewise.errors import InfeasibleError
from edgewise.pipeline.policies import register
from edgewise.pipeline.policies._common import Tables, make_plan, parts_needed, tables
from edgewise.pipeline.problem import PipelinePlan, PipelineProblem

__all__ = ["random_plan"]


def _draw(t: Tables, rng: np.random.Generator) -> tuple[list[int], list[int]] | None:
    """One random plan, or None if it ran out of nodes that can hold the next segment."""
    cuts, nodes, free, i = [0], [], list(range(t.n_nodes)), 0
    while i < t.n_seg:
        hosts = [v for v in free if t.fits(i, i, v)]
        if not hosts:
            return None
        v = hosts[int(rng.integers(len(hosts)))]
        free.remove(v)
        ends = [j for j in range(i, t.n_seg)
                if t.fits(i, j, v) and parts_needed(t, j + 1, free) <= len(free)]
        if not ends:
            return None
        i = ends[int(rng.integers(len(ends)))] + 1
        cuts.append(i)
        nodes.append(v)
    return cuts, nodes


@register("random")
def random_plan(problem: PipelineProblem, rng: np.random.Generator, *,
                attempts: int = 1000) -> PipelinePlan:
    """§6.1 (1): "Select a random node and a random partition that can be accommodated on
    that node." Repeated from the first segment until the chain is covered: a node drawn
    uniformly among unused nodes that can hold the next segment, then the partition's end
    drawn uniformly among those that fit that node's memory and leave few enough
    segments for the remaining nodes (guard, ours: otherwise most draws strand).

    Parameters
    ----------
    problem : PipelineProblem
        The chain and the cluster.
    rng : numpy.random.Generator
        Source of the random choices.
    attempts : int
        Draws before giving up (a draw fails if it runs out of nodes).

    Returns
    -------
    PipelinePlan
        A random plan that respects memory and uses distinct nodes.

    Raises
    ------
    InfeasibleError
        If a segment fits no node, or ``attempts`` draws all ran out of nodes.
    """
    t = tables(problem)
    for _ in range(attempts):
        drawn = _draw(t, rng)
        if drawn is not None:
            return make_plan(problem, drawn[0], drawn[1], "random")
    raise InfeasibleError(f"{attempts} random draws for {problem.chain.name!r} all ran out "
                          f"of the {t.n_nodes} nodes")
