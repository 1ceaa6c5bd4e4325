"""OASiS baseline (§V-A, [42]): at each arrival, the job's whole schedule (window and
workers per slot) minimising latency cost + resource cost under exponential unit-resource
prices; resources are reserved ahead; data moves per slot as in DTA (Alg. 3)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from edgewise.sites.placement import Geometry, assignable
from edgewise.sites.policies import Rule, SlotState, register
from edgewise.sites.policies.common import emit
from edgewise.sites.problem import Job, JobSlot, SitesProblem

__all__ = ["Oasis", "oasis"]

PRICE_BASE = 16.0     # μ of the price p = τ_i (μ^{utilisation} - 1): free when idle, ~15 τ_i full
MAX_WINDOW = 20       # the longest schedule considered (slots)
MAX_START_DELAY = 10  # how far ahead a job may be postponed when nothing fits now


@dataclass(frozen=True, slots=True)
class _Slot:
    workers: np.ndarray
    ps_site: int


class Oasis(Rule):
    """Price-based online scheduling: it knows resource prices, not bandwidth costs."""

    def __init__(self, problem: SitesProblem, rng: np.random.Generator) -> None:
        self.problem, self.geo = problem, Geometry.of(problem)
        self.jobs = {j.name: j for j in problem.jobs}
        self.used: dict[int, np.ndarray] = {}              # slot -> reserved resources (R×K)
        self.plans: dict[str, dict[int, _Slot]] = {}

    def _avail(self, slot: int) -> np.ndarray:
        return self.geo.capacity - self.used.get(slot, 0.0)

    def _place(self, job: Job, slot: int, n: int) -> tuple[float, _Slot] | None:
        """N workers at the cheapest sites by resource price, the PS at the cheapest site."""
        avail = self._avail(slot)
        util = 1.0 - np.where(self.geo.capacity > 0, avail / np.maximum(self.geo.capacity, 1e-9),
                              1.0)
        unit = job.latency.tau * (PRICE_BASE ** util - 1.0) / np.maximum(self.geo.capacity, 1e-9)
        w_price = unit @ np.asarray(job.worker_demand)
        p_price = unit @ np.asarray(job.ps_demand)
        ps_ok = assignable(job, avail, with_ps=True) >= 0
        if not ps_ok.any():
            return None
        ps = int(np.flatnonzero(ps_ok)[np.argmin(p_price[ps_ok])])
        counts = np.maximum(assignable(job, avail), 0)
        counts[ps] = max(int(assignable(job, avail, with_ps=True)[ps]), 0)
        y = np.zeros(len(counts), dtype=np.int64)
        left = n
        for r in np.argsort(w_price, kind="stable"):
            y[r] = min(int(counts[r]), left)
            left -= int(y[r])
        if left > 0:
            return None
        return float(w_price @ y + p_price[ps]), _Slot(y, ps)

    def _schedule(self, job: Job, remaining: int, now: int) -> dict[int, _Slot] | None:
        """min over start s and length l of f_i(s + l - a_i) + Σ prices of N = ⌈M / (l ρ/E)⌉
        workers in each slot of [s, s + l)."""
        best: tuple[float, dict[int, _Slot]] | None = None
        for start in range(now, now + MAX_START_DELAY):
            for slots in range(1, MAX_WINDOW + 1):
                n = math.ceil(remaining / (slots * job.chunks_per_worker) - 1e-9)
                placed = [self._place(job, u, n) for u in range(start, start + slots)]
                if any(p is None for p in placed):
                    continue
                cost = job.latency(start + slots - job.arrival) + sum(
                    p[0] for p in placed if p is not None)
                if best is None or cost < best[0]:
                    best = (cost, {start + k: p[1] for k, p in enumerate(placed) if p})
            if best is not None:
                return best[1]
        return None

    def _book(self, job: Job, plan: dict[int, _Slot], sign: float) -> None:
        for u, s in plan.items():
            used = self.used.setdefault(u, np.zeros_like(self.geo.capacity))
            used += sign * np.outer(s.workers, job.worker_demand)
            used[s.ps_site] += sign * np.asarray(job.ps_demand)

    def step(self, state: SlotState) -> tuple[JobSlot, ...]:
        t = state.slot
        for name in [n for n in self.plans if n not in state.remaining]:   # finished early
            future = {u: s for u, s in self.plans.pop(name).items() if u >= t}
            self._book(self.jobs[name], future, -1.0)
        out: list[JobSlot] = []
        for name, rem in state.remaining.items():           # arrival order
            job, remaining = self.jobs[name], np.asarray(rem, dtype=np.int64)
            if not any(u >= t for u in self.plans.get(name, {})):
                plan = self._schedule(job, int(remaining.sum()), t)   # new, or overran
                if plan is None:
                    continue
                self.plans[name] = plan
                self._book(job, plan, +1.0)
            now = self.plans[name].get(t)
            if now is not None:
                entry = emit(self.geo, job, t, remaining, now.workers, now.ps_site)
                if entry is not None:
                    out.append(entry)
        return tuple(out)


@register("oasis")
def oasis(problem: SitesProblem, rng: np.random.Generator) -> Oasis:
    """The OASiS baseline."""
    return Oasis(problem, rng)
