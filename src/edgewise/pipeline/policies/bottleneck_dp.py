"""Beyond SEIFER: minimise the bottleneck directly, by binary search over its candidate
values and an exact distinct-node feasibility search for each."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from edgewise.errors import InfeasibleError
from edgewise.pipeline.policies import register
from edgewise.pipeline.policies._common import (
    Path,
    SearchBudgetExceeded,
    Tables,
    feasible_path,
    make_plan,
    tables,
)
from edgewise.pipeline.policies.joint_greedy import joint_greedy
from edgewise.pipeline.problem import PipelinePlan, PipelineProblem

__all__ = ["bottleneck_dp", "candidate_values"]


def candidate_values(t: Tables) -> NDArray[np.float64]:
    """Every value the bottleneck can take, sorted: each transfer's time over each link it
    could use (η(p_0) from the dispatcher, a cut's output between two nodes) and, with
    ``gflops``, each range's compute time on each node it fits."""
    n = t.n_nodes
    parts = [t.times[0, 0, 1:]]
    off = ~np.eye(n, dtype=bool)
    parts += [t.times[i, 1:, 1:][off] for i in range(1, t.n_seg)]
    if t.problem.gflops is not None:
        parts += [t.compute[i, j][[t.fits(i, j, v) for v in range(n)]]
                  for i in range(t.n_seg) for j in range(i, t.n_seg)]
    values = np.unique(np.concatenate(parts))
    return values[np.isfinite(values)]


def _probe(t: Tables, beta: float, budget: int) -> tuple[Path | None, bool]:
    """The feasibility search at ``beta``: (path or None, whether the answer is exact)."""
    try:
        return feasible_path(t, beta, budget), True
    except SearchBudgetExceeded:
        return None, False  # treated as infeasible: the result stays a valid plan


@register("bottleneck-dp")
def bottleneck_dp(problem: PipelineProblem, rng: np.random.Generator, *,
                  budget: int = 200_000) -> PipelinePlan:
    """The plan with the least bottleneck (transfers, plus compute with ``gflops``).

    The optimum is one of :func:`candidate_values`; a value β is feasible iff some plan
    has every transfer and stage ≤ β, which is monotone in β, so a binary search over the
    sorted candidates finds the least feasible one. Each probe is
    :func:`~edgewise.pipeline.policies._common.feasible_path`, a depth-first search over
    (segment, node, used-node bitmask) states with memoised failures.

    Exactness: the result is optimal whenever no probe exceeds ``budget`` state
    expansions — always when ``n_seg · n · 2^n ≤ budget`` (e.g. n ≤ 10 with ≤ 19
    segments), and in practice on larger clusters, where a failure rarely depends on the
    used set. A probe that runs out of budget counts as infeasible (still a valid plan,
    possibly suboptimal); then the joint-greedy plan is returned if it is better.
    O(log(N·n²) · probe) for N segments and n nodes.

    Raises
    ------
    InfeasibleError
        If no plan fits memory on distinct nodes over finite links.
    """
    t = tables(problem)
    values = candidate_values(t)
    low, high, best, exact = 0, len(values), None, True
    while low < high:
        mid = (low + high) // 2
        found, ok = _probe(t, float(values[mid]), budget)
        exact = exact and ok
        if found is None:
            low = mid + 1
        else:
            high, best = mid, found
    if best is None:
        if exact:
            raise InfeasibleError(f"no split of {problem.chain.name!r} fits distinct nodes "
                                  "over finite links")
        return joint_greedy(problem, rng)
    plan = make_plan(problem, best[0], best[1], "bottleneck-dp")
    if not exact:
        greedy = joint_greedy(problem, rng)
        if greedy.bottleneck_s < plan.bottleneck_s:
            return make_plan(problem, greedy.cuts, greedy.nodes, "bottleneck-dp")
    return plan
