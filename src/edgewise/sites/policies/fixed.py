"""A fixed deployment for the FIFO and DRF baselines (§V-A): workers and PS placed once by
Q_i^r(t) at the start, and the job's data dispatched evenly to the worker sites, greedily."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from edgewise.sites.placement import Geometry, deploy_metric, dta, pa, site_capacity
from edgewise.sites.policies.common import charge
from edgewise.sites.problem import Job, JobSlot, SitesProblem, Transfer

__all__ = ["FixedRun", "start_fixed"]


@dataclass(slots=True)
class FixedRun:
    """A running job: its fixed workers and PS, and the chunks still to train per
    (src, dst) pair, local ones first, then in the order DTA chose them."""

    job: Job
    workers: np.ndarray
    ps_site: int
    pools: list[list[int]] = field(default_factory=list)   # [src, dst, chunks]

    def reserve(self, avail: np.ndarray) -> None:
        charge(self.job, avail, self.workers, self.ps_site)

    def step(self, slot: int) -> JobSlot | None:
        """Each site trains up to ⌊ρ y / E⌋ chunks of its pool this slot."""
        cap = site_capacity(self.job, self.workers)
        moves: list[Transfer] = []
        for pool in self.pools:
            src, dst, left = pool
            take = min(left, int(cap[dst]))
            if take > 0:
                cap[dst] -= take
                pool[2] -= take
                moves.append(Transfer(src, dst, take))
        self.pools = [p for p in self.pools if p[2] > 0]
        trained = site_capacity(self.job, self.workers) - cap
        kept = np.minimum(self.workers, np.ceil(trained * self.job.epochs / self.job.rho - 1e-9))
        if not moves:
            return None
        return JobSlot(self.job.name, slot, tuple(int(v) for v in kept), self.ps_site,
                       tuple(moves))

    @property
    def done(self) -> bool:
        return not self.pools


def _even(total: int, cap: np.ndarray) -> np.ndarray:
    """Split ``total`` chunks over sites in proportion to their per-slot capacity (largest
    remainder), so every worker site finishes at about the same slot."""
    share = total * cap / cap.sum()
    out: np.ndarray = np.floor(share).astype(np.int64)
    for r in np.argsort(-(share - out), kind="stable")[: total - int(out.sum())]:
        out[r] += 1
    return out


def start_fixed(problem: SitesProblem, geo: Geometry, job: Job, remaining: np.ndarray,
                avail: np.ndarray, n_workers: int) -> FixedRun | None:
    """Place ``n_workers`` (or fewer, down to 1, if they do not fit) by PA with Q_i^r(t) at
    the start, and dispatch all remaining data evenly over the worker sites (DTA greedy)."""
    metric = deploy_metric(problem, geo, job, remaining, avail)
    useful = math.ceil(int(remaining.sum()) / job.chunks_per_worker)
    for n in range(min(n_workers, useful), 0, -1):
        placed = pa(geo, job, avail, metric, n)
        if placed is not None:
            break
    else:
        return None
    target = _even(int(remaining.sum()), site_capacity(job, placed.workers).astype(np.float64))
    _, moves = dta(geo, job, remaining, target)
    pools = [[g.src, g.dst, g.chunks] for g in moves]
    return FixedRun(job, placed.workers, placed.ps_site, pools)
