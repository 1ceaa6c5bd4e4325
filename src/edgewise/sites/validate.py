"""Independent check of a schedule against constraints (2a)-(2g) of problem (2)."""

from __future__ import annotations

from collections import defaultdict

from edgewise.errors import InfeasibleError
from edgewise.sites.problem import Job, JobSlot, Plan, SitesProblem

__all__ = ["check_plan", "violations"]

_EPS = 1e-9


def _entry_shape(problem: SitesProblem, job: Job, e: JobSlot) -> list[str]:
    """(2f), (2g): integer, non-negative y and g on known sites; a slot at or after a_i."""
    out, n = [], problem.n_sites
    where = f"{e.job}@{e.slot}"
    if e.slot < job.arrival:
        out.append(f"{where}: scheduled before its arrival slot {job.arrival}")
    if len(e.workers) != n or any(not isinstance(y, int) or y < 0 for y in e.workers):
        out.append(f"{where}: (2f) workers must be {n} non-negative integers")
    if not 0 <= e.ps_site < n:
        out.append(f"{where}: (2g) PS site {e.ps_site} is not a site")
    for g in e.transfers:
        if not (0 <= g.src < n and 0 <= g.dst < n) or not isinstance(g.chunks, int) \
                or g.chunks < 0:
            out.append(f"{where}: (2f) bad transfer {g}")
    return out


def _entry_work(job: Job, e: JobSlot) -> list[str]:
    """(2b) ρ_i y_i^{r'}(t) >= E_i Σ_r g_i^{rr'}(t); (2c) one PS exactly when training."""
    out, where = [], f"{e.job}@{e.slot}"
    if sum(e.workers) == 0:
        out.append(f"{where}: (2c) a PS without workers (an idle slot needs no entry)")
    received: dict[int, int] = defaultdict(int)
    for g in e.transfers:
        received[g.dst] += g.chunks
    for dst, chunks in received.items():
        if 0 <= dst < len(e.workers) and job.rho * e.workers[dst] + _EPS < job.epochs * chunks:
            out.append(f"{where}: (2b) site {dst} trains {chunks} chunks with "
                       f"{e.workers[dst]} workers (capacity ρ/E = {job.chunks_per_worker:g})")
    return out


def _data(problem: SitesProblem, plan: Plan) -> list[str]:
    """(2a) every chunk of every site trained exactly once: Σ_t Σ_r' g^{rr'}(t) = D_i^r."""
    out = []
    for job in problem.jobs:
        used = [0] * problem.n_sites
        for e in plan.for_job(job.name):
            for g in e.transfers:
                if 0 <= g.src < problem.n_sites:
                    used[g.src] += g.chunks
        if sum(used) != job.total_chunks:
            out.append(f"{job.name}: (2a) trains {sum(used)} chunks of {job.total_chunks}")
        for r, (u, d) in enumerate(zip(used, job.data, strict=True)):
            if u != d:
                out.append(f"{job.name}: (2a) site {r} supplies {u} chunks, has {d}")
    return out


def _capacity(problem: SitesProblem, plan: Plan, jobs: dict[str, Job]) -> list[str]:
    """(2d) Σ_i m_i^k y_i^r(t) + n_i^k s_i^r(t) <= C_r^k for every site, type and slot."""
    used: dict[tuple[int, int], list[float]] = defaultdict(lambda: [0.0] * 4)
    for e in plan.entries:
        job = jobs[e.job]
        for r, y in enumerate(e.workers):
            for k in range(4):
                used[(e.slot, r)][k] += job.worker_demand[k] * y
        if 0 <= e.ps_site < problem.n_sites:
            for k in range(4):
                used[(e.slot, e.ps_site)][k] += job.ps_demand[k]
    out = []
    for (slot, r), load in sorted(used.items()):
        cap = problem.sites[r].capacity
        for k in range(4):
            if load[k] > cap[k] + 1e-6:
                out.append(f"slot {slot} site {r}: (2d) resource {k} uses {load[k]:g} "
                           f"> capacity {cap[k]:g}")
    return out


def _completion(problem: SitesProblem, plan: Plan) -> list[str]:
    """(2e) t_i is the last slot with workers."""
    out = []
    for job in problem.jobs:
        slots = [e.slot for e in plan.for_job(job.name) if sum(e.workers) > 0]
        expected = max(slots) if slots else None
        got = plan.completion.get(job.name)
        if job.total_chunks and got != expected:
            out.append(f"{job.name}: (2e) completion {got}, last slot with workers {expected}")
    return out


def violations(problem: SitesProblem, plan: Plan) -> list[str]:
    """Every violated constraint of (2a)-(2g), one line each; empty when the plan is valid."""
    jobs = {j.name: j for j in problem.jobs}
    out: list[str] = []
    seen: set[tuple[str, int]] = set()
    for e in plan.entries:
        if e.job not in jobs:
            out.append(f"{e.job}@{e.slot}: unknown job")
            continue
        if (e.job, e.slot) in seen:
            out.append(f"{e.job}@{e.slot}: two entries for one slot")
        seen.add((e.job, e.slot))
        out += _entry_shape(problem, jobs[e.job], e) + _entry_work(jobs[e.job], e)
    if any("unknown job" in v for v in out):
        return out
    return out + _data(problem, plan) + _capacity(problem, plan, jobs) + \
        _completion(problem, plan)


def check_plan(problem: SitesProblem, plan: Plan) -> None:
    """Raise InfeasibleError listing the violated constraints, if any."""
    found = violations(problem, plan)
    if found:
        shown = "; ".join(found[:5]) + (f" (+{len(found) - 5} more)" if len(found) > 5 else "")
        raise InfeasibleError(f"plan {plan.policy!r} violates problem (2): {shown}")
