"""Okita's building blocks: the deployment metric Q (Eq. 6), PA (Alg. 2) and DTA (Alg. 3)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from edgewise.sites.problem import Job, SitesProblem, Transfer

__all__ = ["Deployment", "Geometry", "assignable", "deploy_metric", "dta", "pa", "pa_all",
           "site_capacity", "trim"]

FloatArray = np.ndarray


@dataclass(frozen=True, slots=True)
class Geometry:
    """Arrays derived once per problem: capacities C (R×K), q (R×R) and, per destination
    r, the other sites in non-decreasing order of q^{r' r} (Alg. 3 line 4)."""

    capacity: FloatArray
    q: FloatArray
    sources: np.ndarray

    @staticmethod
    def of(problem: SitesProblem) -> Geometry:
        cap = np.array([s.capacity for s in problem.sites], dtype=np.float64)
        q = np.array(problem.q, dtype=np.float64)
        ranked = np.where(np.eye(len(q), dtype=bool), np.inf, q)
        sources = np.argsort(ranked, axis=0, kind="stable").T[:, : len(q) - 1]
        return Geometry(cap, q, sources)


@dataclass(frozen=True, slots=True)
class Deployment:
    """What PA (Alg. 2) decides for one job and slot, the paper's "deployment of workers and
    PS": y_i^r(t) per site, the PS site, and the per-slot parameter-exchange cost."""

    workers: np.ndarray
    ps_site: int
    param_cost: float


def assignable(job: Job, avail: FloatArray, with_ps: bool = False) -> np.ndarray:
    """A_i^r(t) = min_k ⌊(U_r^k - n_i^k 1[r = PS]) / m_i^k⌋ (Alg. 2 line 6), -1 where even
    the PS does not fit; ``with_ps`` subtracts the PS demand at every site."""
    m = np.asarray(job.worker_demand)
    left = avail - (np.asarray(job.ps_demand) if with_ps else 0.0)
    pos = m > 0
    counts = np.floor((left[:, pos] + 1e-9) / m[pos]).min(axis=1)
    counts[(left < -1e-9).any(axis=1)] = -1
    return np.asarray(counts, dtype=np.int64)


def deploy_metric(problem: SitesProblem, geo: Geometry, job: Job, remaining: np.ndarray,
                  avail: FloatArray) -> FloatArray:
    """Q_i^r(t) of Eq. 6: β1 · mean_k U_r^k / C_r^k − β2 · Σ_r' q^{rr'} π_i / (R−1) +
    β3 · M_i^r(t) / D_i^r. The second term is divided by its maximum over sites so the three
    terms are all in [0, 1] (deviation: in the paper it is in cost units and swamps the rest)."""
    b1, b2, b3 = problem.beta
    n = len(geo.q)
    with np.errstate(divide="ignore", invalid="ignore"):
        free = np.where(geo.capacity > 0, avail / geo.capacity, 0.0).mean(axis=1)
        data = np.asarray(job.data, dtype=np.float64)
        local = np.where(data > 0, remaining / np.maximum(data, 1), 0.0)
    bw = geo.q.sum(axis=1) * job.param_mb / max(n - 1, 1)
    bw = bw / bw.max() if bw.max() > 0 else bw
    return np.asarray(b1 * free - b2 * bw + b3 * local, dtype=np.float64)


def pa_all(geo: Geometry, job: Job, avail: FloatArray, metric: FloatArray,
           n_max: int) -> tuple[np.ndarray, np.ndarray]:
    """Alg. 2 for every N = 1..n_max at once: for each PS site r̃, fill sites greedily in
    decreasing Q (line 8-11) and price Σ_r q^{r r̃} π_i y_i^r (line 12). Returns the best
    per-slot cost for each N (inf if N workers do not fit) and the PS site achieving it."""
    order = np.argsort(-metric, kind="stable")
    base = np.maximum(assignable(job, avail), 0)
    at_ps = assignable(job, avail, with_ps=True)
    n = len(base)
    counts = np.tile(base, (n, 1))
    counts[np.arange(n), np.arange(n)] = np.maximum(at_ps, 0)
    counts = counts[:, order]                                    # (PS site, fill order)
    unit = geo.q[order][:, :].T * job.param_mb                   # unit[ps, j] = q[order_j, ps]
    cum = np.cumsum(counts, axis=1)
    cum_cost = np.cumsum(counts * unit, axis=1)
    wanted = np.arange(1, n_max + 1)
    j = (cum[:, :, None] < wanted[None, None, :]).sum(axis=1)     # first j with cum >= N
    jj = np.minimum(j, n - 1)
    rows = np.arange(n)[:, None]
    before = np.where(jj > 0, cum[rows, jj - 1], 0)
    cost_before = np.where(jj > 0, cum_cost[rows, jj - 1], 0.0)
    cost = cost_before + unit[rows, jj] * (wanted[None, :] - before)
    cost[(j >= n) | (at_ps[:, None] < 0)] = np.inf
    best = np.argmin(cost, axis=0)
    return cost[best, np.arange(n_max)], best


def pa(geo: Geometry, job: Job, avail: FloatArray, metric: FloatArray, n_workers: int,
       ps_site: int | None = None) -> Deployment | None:
    """Alg. 2 for one N: the cheapest PS site (or the given one) and its greedy worker
    deployment; None if N workers and the PS do not fit in ``avail``."""
    if ps_site is None:
        costs, sites = pa_all(geo, job, avail, metric, n_workers)
        if not math.isfinite(costs[-1]):
            return None
        ps_site = int(sites[-1])
    counts = np.maximum(assignable(job, avail), 0)
    at_ps = assignable(job, avail, with_ps=True)[ps_site]
    if at_ps < 0:
        return None
    counts[ps_site] = at_ps
    order = np.argsort(-metric, kind="stable")
    y = np.zeros(len(counts), dtype=np.int64)
    y[order] = _fill(counts[order], n_workers)
    if y.sum() < n_workers:
        return None
    return Deployment(y, ps_site, float((geo.q[:, ps_site] * job.param_mb * y).sum()))


def _fill(counts: np.ndarray, wanted: int) -> np.ndarray:
    """Take ``wanted`` units greedily from ``counts`` in order (Alg. 2 line 10)."""
    before = np.cumsum(counts) - counts
    return np.asarray(np.minimum(np.maximum(wanted - before, 0), counts), dtype=np.int64)


def site_capacity(job: Job, workers: np.ndarray) -> np.ndarray:
    """⌊ρ_i y_i^r / E_i⌋ per site: the chunks each site can train this slot (2b), as
    ``chunk_capacity`` for each site."""
    caps = np.floor(job.rho * np.asarray(workers, dtype=np.float64) / job.epochs + 1e-9)
    return np.asarray(caps, dtype=np.int64)


def dta(geo: Geometry, job: Job, remaining: np.ndarray, target: np.ndarray,
        cost_only: bool = False) -> tuple[float, list[Transfer]]:
    """Alg. 3: sites train their own remaining data first (g^{rr}); each site whose target
    d_i^r(t) exceeds its local data (H_i^r < 0), in site order, receives chunks from the
    sites with surplus (H_i^r > 0), cheapest q first, never more than its deficit or their
    surplus."""
    local = np.minimum(remaining, target)
    deficit = target - local
    surplus = remaining - local
    moves = [] if cost_only else [Transfer(r, r, int(c)) for r, c in enumerate(local) if c > 0]
    cost = 0.0
    left = int(surplus.sum())
    for d in np.flatnonzero(deficit):                           # line 2-3: H_i^r(t) < 0
        if left == 0:
            break
        order = geo.sources[d]                                  # line 4: by q^{r r_j}
        take = _fill(surplus[order], int(deficit[d]))           # lines 5-9
        surplus[order] -= take
        left -= int(take.sum())
        cost += float(geo.q[order, d] @ take) * job.chunk_mb
        if not cost_only:
            moves += [Transfer(int(s), int(d), int(a)) for s, a in zip(order, take, strict=True)
                      if a > 0]
    return cost, moves


def trim(job: Job, workers: np.ndarray, moves: list[Transfer]) -> np.ndarray:
    """Keep only the workers that train data this slot: y^r = ⌈E_i d^r / ρ_i⌉."""
    trained = np.zeros(len(workers), dtype=np.int64)
    for g in moves:
        trained[g.dst] += g.chunks
    need = np.array([math.ceil(job.epochs * c / job.rho - 1e-9) for c in trained],
                    dtype=np.int64)
    return np.asarray(np.minimum(workers, need), dtype=np.int64)
