"""DRF baseline (§V-A): each starting job gets a fixed number of workers that equalises
dominant shares (multi-resource max-min fairness [39]) among the active jobs, placed once by
Q_i^r(t); jobs that cannot start wait without blocking others."""

from __future__ import annotations

import numpy as np

from edgewise.sites.placement import Geometry
from edgewise.sites.policies import Rule, SlotState, register
from edgewise.sites.policies.fifo import _advance
from edgewise.sites.policies.fixed import FixedRun, start_fixed
from edgewise.sites.problem import Job, JobSlot, SitesProblem

__all__ = ["Drf", "drf", "fair_workers"]


def fair_workers(job: Job, total: np.ndarray, n_active: int) -> int:
    """The most workers n (at least 1) whose dominant share max_k (n m^k + n_ps^k) / C^k
    stays within the equal share 1 / |active jobs| of the whole system."""
    m, ps = np.asarray(job.worker_demand), np.asarray(job.ps_demand)
    pos = m > 0
    room = total[pos] / n_active - ps[pos]
    return max(1, int(np.floor((room + 1e-9) / m[pos]).min()))


class Drf(Rule):
    """Dominant resource fairness with fixed deployments."""

    def __init__(self, problem: SitesProblem, rng: np.random.Generator) -> None:
        self.problem, self.geo = problem, Geometry.of(problem)
        self.jobs = {j.name: j for j in problem.jobs}
        self.running: dict[str, FixedRun] = {}

    def step(self, state: SlotState) -> tuple[JobSlot, ...]:
        avail = self.geo.capacity.copy()
        for run in self.running.values():
            run.reserve(avail)
        total = self.geo.capacity.sum(axis=0)
        n_active = len(state.remaining)
        for name, rem in state.remaining.items():     # waiting jobs: dominant share 0 each
            if name in self.running:
                continue
            job = self.jobs[name]
            n = fair_workers(job, total, n_active)
            started = start_fixed(self.problem, self.geo, job, np.asarray(rem), avail, n)
            if started is not None:
                started.reserve(avail)
                self.running[name] = started
        return _advance(self.running, state.slot)


@register("drf")
def drf(problem: SitesProblem, rng: np.random.Generator) -> Drf:
    """The DRF baseline."""
    return Drf(problem, rng)
