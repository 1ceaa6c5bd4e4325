"""Okita (Alg. 1): per slot, a tentative schedule per job (enumerated worker counts, OSF), the
priority O_i(t) of Eq. 4, and a migrate-or-delay choice when resources conflict."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from edgewise.sites.placement import (
    Geometry,
    assignable,
    deploy_metric,
    dta,
    pa,
    pa_all,
    site_capacity,
)
from edgewise.sites.policies import Rule, SlotState, register
from edgewise.sites.policies.common import charge, emit, fits
from edgewise.sites.problem import Job, JobSlot, SitesProblem

__all__ = ["Okita", "Tentative", "okita"]

_DTA_CANDIDATES = 4  # OSF (with DTA) is evaluated for the best worker counts by PA + latency


@dataclass(frozen=True, slots=True)
class Tentative:
    """A one-shot schedule: l_i slots with N_i workers placed as ``workers`` / ``ps_site``,
    its bandwidth cost (l_i · PA cost + DTA cost) and total with f_i(t + l_i - a_i)."""

    slots: int
    workers: np.ndarray
    ps_site: int
    bandwidth: float
    total: float


class Okita(Rule):
    """Alg. 1 with PA (Alg. 2) and DTA (Alg. 3); α and β come from the problem."""

    def __init__(self, problem: SitesProblem, rng: np.random.Generator) -> None:
        self.problem, self.geo = problem, Geometry.of(problem)
        self.jobs = {j.name: j for j in problem.jobs}

    def best(self, job: Job, remaining: np.ndarray, t: int, avail: np.ndarray) -> Tentative | None:
        """Alg. 1 lines 5-9: enumerate N_i(t), l_i = ⌈E_i M_i(t) / ρ_i / N_i⌉, OSF each, keep
        the cheapest bandwidth + latency. Only the smallest N of each l is a candidate (a
        larger N with the same l costs more in PA); DTA is priced for the best few, over the
        whole window (the deployment is assumed unchanged during it, §IV-A). Windows
        that end after T are dropped while some window ends in time (t_i ∈ 𝒯, (2e))."""
        left = int(remaining.sum())
        per = job.chunks_per_worker
        n_max = min(math.ceil(left / per), int(np.maximum(assignable(job, avail), 0).sum()))
        if n_max < 1:
            return None
        metric = deploy_metric(self.problem, self.geo, job, remaining, avail)
        costs, ps_sites = pa_all(self.geo, job, avail, metric, n_max)
        cands: dict[int, tuple[float, int]] = {}
        for n in range(1, n_max + 1):
            slots = math.ceil(left / (n * per) - 1e-9)
            if math.isfinite(costs[n - 1]) and slots not in cands:
                cands[slots] = (slots * costs[n - 1] + job.latency(t + slots - job.arrival), n)
        within = {s: c for s, c in cands.items() if t + s <= self.problem.horizon}
        ranked = sorted((within or cands).items(), key=lambda kv: kv[1][0])[:_DTA_CANDIDATES]
        best: Tentative | None = None
        for slots, (partial, n) in ranked:
            placed = pa(self.geo, job, avail, metric, n, int(ps_sites[n - 1]))
            if placed is None:
                continue
            window = slots * site_capacity(job, placed.workers)     # unchanged deployment
            moved, _ = dta(self.geo, job, remaining, window, True)
            total = partial + moved
            if best is None or total < best.total:
                best = Tentative(slots, placed.workers, placed.ps_site,
                                 total - job.latency(t + slots - job.arrival), total)
        return best

    def priority(self, state: SlotState) -> dict[str, float]:
        """O_i(t) of Eq. 4: α1 τ_i (t - a_i) / max_j τ_j (t - a_j) - α2 M_i(t) / Σ_r D_i^r.
        For a piecewise f_i the first term is (t - a_i) / c_i before the step c_i and 0 after
        (§V-C: the closer to the step, the higher the priority; once passed, no urgency)."""
        a1, a2 = self.problem.alpha
        t = state.slot
        waits = {n: self.jobs[n].latency.tau * (t - self.jobs[n].arrival) for n in state.remaining}
        top = max(waits.values(), default=0.0)
        out = {}
        for name, rem in state.remaining.items():
            job = self.jobs[name]
            if job.latency.kind == "piecewise":
                dt = t - job.arrival
                urgency = dt / job.latency.c if job.latency.c > 0 and dt < job.latency.c else 0.0
            else:
                urgency = waits[name] / top if top > 0 else 0.0
            out[name] = a1 * urgency - a2 * sum(rem) / max(job.total_chunks, 1)
        return out

    def step(self, state: SlotState) -> tuple[JobSlot, ...]:
        """Alg. 1 lines 3-29 for slot t."""
        t, geo = state.slot, self.geo
        rem = {n: np.asarray(r, dtype=np.int64) for n, r in state.remaining.items()}
        plans = {n: self.best(self.jobs[n], r, t, geo.capacity) for n, r in rem.items()}
        prio = self.priority(state)
        avail = geo.capacity.copy()
        out: list[JobSlot] = []
        for name in sorted(rem, key=lambda n: -prio[n]):       # stable: arrival order on ties
            job, plan = self.jobs[name], plans[name]
            if plan is None or not fits(job, avail, plan.workers, plan.ps_site):
                plan = self._resolve(job, rem[name], t, avail, plan)
            if plan is None:
                continue                                        # delay training (line 19)
            entry = emit(geo, job, t, rem[name], plan.workers, plan.ps_site)
            if entry is not None:
                charge(job, avail, np.asarray(entry.workers), entry.ps_site)
                out.append(entry)
        return tuple(out)

    def _resolve(self, job: Job, remaining: np.ndarray, t: int, avail: np.ndarray,
                 plan: Tentative | None) -> Tentative | None:
        """Alg. 1 lines 14-20: migrate (OSF over the available resources) unless delaying
        the tentative schedule by one slot costs less (and still ends by T); None: delay."""
        moved = self.best(job, remaining, t, avail)
        if moved is None:
            return None
        if plan is None:
            return moved
        if t + 1 + plan.slots > self.problem.horizon:
            return moved            # a delay would end after T: t_i must stay in 𝒯 (2e)
        delay = plan.bandwidth + job.latency(t + 1 + plan.slots - job.arrival)
        return moved if moved.total <= delay else None


@register("okita")
def okita(problem: SitesProblem, rng: np.random.Generator) -> Okita:
    """The online algorithm Okita (Alg. 1-3)."""
    return Okita(problem, rng)
