"""Ekya's thief scheduler (Algorithm 1), with PickConfigs/EstimateAccuracy of Algorithm 2."""

from __future__ import annotations

import numpy as np

from edgewise.continual.policies import register
from edgewise.continual.policies._grid import Lattice, build_lattice, make_plan
from edgewise.continual.problem import ContinualPlan, ContinualProblem

__all__ = ["thief", "thief_allocation"]

_TOL = 1e-12  # "improves" means strictly, beyond float noise


def thief_allocation(lattice: Lattice) -> list[int]:
    """Algorithm 1 on the lattice: start fair (line 2); every job in turn is the thief and every
    other job the victim (lines 4-7); steal Δ at a time (lines 10-12) while the victim keeps a
    non-negative share (line 13) and the objective strictly improves (lines 15-20). One pass,
    as in the paper; all_jobs (line 1) lists the inference jobs first, then the retraining
    jobs, so inference first secures what it needs to keep up before retraining steals."""
    n = len(lattice.problem.streams)
    best = list(lattice.fair)  # job 2v is v's retraining, 2v+1 its inference
    order = lattice.jobs
    terms = [lattice.score(v, best[2 * v], best[2 * v + 1]) for v in range(n)]
    best_total = sum(terms)
    top = len(lattice.shares) - 1
    for thief_job in order:
        for victim_job in order:
            if thief_job == victim_job:
                continue
            temp = best.copy()
            while True:
                temp[victim_job] -= 1
                temp[thief_job] += 1
                if temp[victim_job] < 0 or temp[thief_job] > top:
                    break
                streams = {thief_job // 2, victim_job // 2}
                new = {v: lattice.score(v, temp[2 * v], temp[2 * v + 1]) for v in streams}
                total = best_total + sum(new[v] - terms[v] for v in streams)
                if total <= best_total + _TOL:
                    break
                best, best_total = temp.copy(), total
                for v, term in new.items():
                    terms[v] = term
    return best


@register("thief")
def thief(problem: ContinualProblem, rng: np.random.Generator) -> ContinualPlan:
    """Ekya's thief scheduler: resource stealing in quanta of Δ (Algorithm 1) over the
    configurations PickConfigs picks (Algorithm 2). Deterministic; ``rng`` is unused."""
    lattice = build_lattice(problem)
    return make_plan(lattice, thief_allocation(lattice))
