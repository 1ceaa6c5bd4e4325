"""The naive baseline: split the chain into equal shares of its work, one per device, in
the cluster's order (what a pipeline without a partitioner does)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from edgewise.errors import InfeasibleError
from edgewise.pipeline.policies import register
from edgewise.pipeline.policies._common import make_plan
from edgewise.pipeline.problem import PipelinePlan, PipelineProblem

__all__ = ["even_cuts", "even_split"]


def even_cuts(work: NDArray[np.float64], parts: int) -> tuple[int, ...]:
    """Cuts of ``len(work)`` segments into ``parts`` non-empty partitions whose cumulative
    work is nearest the even quantiles k/parts of the total."""
    n = len(work)
    total = np.cumsum(work, dtype=np.float64)
    cuts = [0]
    for k in range(1, parts):
        lo, hi = cuts[-1] + 1, n - (parts - k)  # room for the partitions still to come
        target = total[-1] * k / parts
        ends = np.arange(lo, hi + 1)
        cuts.append(int(ends[np.argmin(np.abs(total[ends - 1] - target))]))
    return (*cuts, n)


@register("even")
def even_split(problem: PipelineProblem, rng: np.random.Generator) -> PipelinePlan:
    """One partition per device (as many as there are segments at most), each with an equal
    share of the FLOPs (of the memory when FLOPs are zero), on the devices in the order
    the cluster lists them. Blind to speeds and links; deterministic (``rng`` unused).

    Raises
    ------
    InfeasibleError
        When a partition does not fit the memory of its device.
    """
    chain = problem.chain
    parts = min(len(problem.nodes), chain.n_segments)
    work = np.asarray(chain.flops, dtype=np.float64)
    if not work.any():
        work = np.asarray(chain.memory_bytes, dtype=np.float64)
    cuts = even_cuts(work, parts)
    for k in range(parts):
        need = sum(chain.memory_bytes[cuts[k]:cuts[k + 1]])
        if need > problem.memory_bytes[k]:
            raise InfeasibleError(f"even split: partition {k} of {chain.name!r} needs "
                                  f"{need} B, node {problem.nodes[k]!r} has "
                                  f"{problem.memory_bytes[k]} B")
    return make_plan(problem, cuts, range(parts), "even")
