"""Exact oracle for Eq. 1 on the thief's Δ lattice: a knapsack over streams."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from edgewise.continual.policies import register
from edgewise.continual.policies._grid import Lattice, build_lattice, make_plan
from edgewise.continual.problem import ContinualPlan, ContinualProblem

__all__ = ["exact", "exact_allocation"]


def _pair_best(lattice: Lattice, v: int) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """For each c: the best objective term of stream v with R index + I index = c, and the
    R index attaining it."""
    m = lattice.score_matrix(v)
    size = m.shape[0]
    if not lattice.has_job[v]:  # no retraining job: c counts the inference share only
        return m[0].copy(), np.zeros(size, dtype=np.int64)
    best = np.full(2 * size - 1, -np.inf)
    arg = np.zeros(2 * size - 1, dtype=np.int64)
    for i_r in range(size):  # row i_r fills c = i_r .. i_r + size - 1
        row = m[i_r]
        seg = best[i_r:i_r + size]
        better = row > seg
        best[i_r:i_r + size] = np.where(better, row, seg)
        arg[i_r:i_r + size] = np.where(better, i_r, arg[i_r:i_r + size])
    return best, arg


def exact_allocation(lattice: Lattice) -> list[int]:
    """Maximise Σ_v term_v(R_v, I_v) subject to Σ (R_v + I_v) ≤ G (second constraint of
    Eq. 1) over every allocation on the lattice and every (γ, λ): dynamic programming over
    streams on the index budget, O(N · B · M) for budget B and M grid points per job."""
    budget = lattice.budget
    dp = np.zeros(budget + 1)
    choices: list[tuple[NDArray[np.int64], NDArray[np.int64]]] = []
    for v in range(len(lattice.problem.streams)):
        best, arg = _pair_best(lattice, v)
        new = np.full(budget + 1, -np.inf)
        used = np.zeros(budget + 1, dtype=np.int64)
        for c in range(min(len(best), budget + 1)):
            cand = np.full(budget + 1, -np.inf)
            cand[c:] = dp[:budget + 1 - c] + best[c]
            better = cand > new
            new, used = np.where(better, cand, new), np.where(better, c, used)
        dp = new
        choices.append((used, arg))
    alloc = [0] * (2 * len(choices))
    b = int(np.argmax(dp))
    for v in range(len(choices) - 1, -1, -1):
        used, arg = choices[v]
        c = int(used[b])
        alloc[2 * v] = int(arg[c])
        alloc[2 * v + 1] = c - alloc[2 * v]
        b -= c
    return alloc


@register("exact")
def exact(problem: ContinualProblem, rng: np.random.Generator) -> ContinualPlan:
    """The optimum of Eq. 1 over shares on the thief's Δ lattice and all configurations; an
    upper bound for every policy on that lattice. Deterministic; ``rng`` is unused."""
    lattice = build_lattice(problem)
    return make_plan(lattice, exact_allocation(lattice))
