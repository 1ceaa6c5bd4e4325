"""Exact oracle for small clusters: every partition × every placement on distinct nodes,
by branch and bound; and Theorem 1's lower bound (Eq. 9)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from edgewise.errors import ConfigError
from edgewise.pipeline.policies import register
from edgewise.pipeline.policies._common import Tables, make_plan, no_split, tables
from edgewise.pipeline.problem import PipelinePlan, PipelineProblem

__all__ = ["MAX_EXACT_NODES", "exact", "theorem1_lower_bound"]

MAX_EXACT_NODES = 12


def theorem1_lower_bound(problem: PipelineProblem,
                         partition_transfer_sizes: Sequence[float]) -> float:
    """Theorem 1 (Eq. 9): min β = max S / max E_c, as a time (S compressed by λ, Eq. 4).

    A lower bound on the bottleneck of any placement of a partition whose transfer sizes
    (bytes, η(p_0) first) are ``partition_transfer_sizes``: the largest transfer needs some
    link, and no link beats the fastest. Over all partitions it holds with S = (η(p_0),),
    which every plan sends. Without the dispatcher's transfer (the paper's §6.1 scoring),
    S holds the cuts' outputs only and E_c the links between compute nodes; with no cut
    (one partition) nothing is sent and the bound is 0.
    """
    links = problem.bandwidth_mbps if problem.dispatcher_transfer else \
        problem.bandwidth_mbps[1:, 1:]
    fastest = float(np.max(links, initial=0.0))
    if not partition_transfer_sizes:
        return 0.0
    if fastest <= 0:
        return float("inf")
    return float(max(partition_transfer_sizes)) / problem.compression * 8 / (fastest * 1e6)


@dataclass(slots=True)
class _BranchAndBound:
    t: Tables
    best: float = float("inf")
    plan: tuple[list[int], list[int]] | None = None
    cuts: list[int] = field(default_factory=lambda: [0])
    nodes: list[int] = field(default_factory=list)
    explored: dict[tuple[int, int, int], float] = field(default_factory=dict)

    def branch(self, i: int, prev: int, used: int, worst: float) -> None:
        """Place the partition starting at segment ``i`` after vertex ``prev`` (0: the
        dispatcher) on every unused node, then every end that fits; prune any branch
        whose bottleneck so far already reaches the incumbent's, or a state already
        explored with a bottleneck so far no larger (its completions cannot improve on
        the incumbent then: DP over used-node sets, as Held–Karp)."""
        t, key = self.t, (i, prev, used)
        if self.explored.get(key, float("inf")) <= worst:
            return
        self.explored[key] = worst
        row = t.times[i, prev]
        for w in np.argsort(row[1:], kind="stable").tolist():
            w_worst = max(worst, float(row[w + 1]))
            if used >> w & 1 or w_worst >= self.best:
                continue
            self.nodes.append(w)
            for j in range(i, t.n_seg):
                j_worst = max(w_worst, float(t.compute[i, j, w]))
                if not t.fits(i, j, w) or j_worst >= self.best:
                    break  # memory and compute only grow with j
                self.cuts.append(j + 1)
                if j == t.n_seg - 1:
                    self.best, self.plan = j_worst, (list(self.cuts), list(self.nodes))
                else:
                    self.branch(j + 1, w + 1, used | 1 << w, j_worst)
                self.cuts.pop()
            self.nodes.pop()


@register("exact")
def exact(problem: PipelineProblem, rng: np.random.Generator) -> PipelinePlan:
    """The true minimum of the pipeline objective (transfers, plus compute with ``gflops``).

    Enumerates every contiguous partition whose parts fit their nodes × every placement on
    distinct nodes (ordered), pruning a branch once its bottleneck so far reaches the best
    complete plan's. Exponential: at most ``MAX_EXACT_NODES`` nodes.

    Raises
    ------
    ConfigError
        With more than ``MAX_EXACT_NODES`` nodes.
    InfeasibleError
        If no plan fits.
    """
    if len(problem.nodes) > MAX_EXACT_NODES:
        raise ConfigError(f"exact handles at most {MAX_EXACT_NODES} nodes, got "
                          f"{len(problem.nodes)}", field="nodes")
    search = _BranchAndBound(tables(problem))
    search.branch(0, 0, 0, 0.0)
    if search.plan is None:
        raise no_split(problem)
    return make_plan(problem, search.plan[0], search.plan[1], "exact")
