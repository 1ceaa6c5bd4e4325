"""FIFO baseline (§V-A): jobs start in arrival order, each with a fixed number of workers
drawn in [1, 0.5 A_i(a_i)], placed once by Q_i^r(t); a job that cannot start blocks the
queue behind it."""

from __future__ import annotations

import numpy as np

from edgewise.sites.placement import Geometry, assignable
from edgewise.sites.policies import Rule, SlotState, register
from edgewise.sites.policies.fixed import FixedRun, start_fixed
from edgewise.sites.problem import JobSlot, SitesProblem

__all__ = ["Fifo", "fifo"]


class Fifo(Rule):
    """First in, first out, with fixed deployments."""

    def __init__(self, problem: SitesProblem, rng: np.random.Generator) -> None:
        self.problem, self.geo, self.rng = problem, Geometry.of(problem), rng
        self.jobs = {j.name: j for j in problem.jobs}
        self.running: dict[str, FixedRun] = {}

    def step(self, state: SlotState) -> tuple[JobSlot, ...]:
        avail = self.geo.capacity.copy()
        for run in self.running.values():
            run.reserve(avail)
        for name, rem in state.remaining.items():               # arrival order
            if name in self.running:
                continue
            job = self.jobs[name]
            free = int(np.maximum(assignable(job, avail), 0).sum())   # A_i(a_i)
            if free < 1:
                break
            n = int(self.rng.integers(1, max(1, free // 2) + 1))
            started = start_fixed(self.problem, self.geo, job, np.asarray(rem), avail, n)
            if started is None:
                break
            started.reserve(avail)
            self.running[name] = started
        return _advance(self.running, state.slot)


def _advance(running: dict[str, FixedRun], slot: int) -> tuple[JobSlot, ...]:
    out = [e for run in running.values() if (e := run.step(slot)) is not None]
    for name in [n for n, run in running.items() if run.done]:
        del running[name]
    return tuple(out)


@register("fifo")
def fifo(problem: SitesProblem, rng: np.random.Generator) -> Fifo:
    """The FIFO baseline."""
    return Fifo(problem, rng)
