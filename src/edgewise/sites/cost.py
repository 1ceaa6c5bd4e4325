"""Total cost of a schedule (2): latency cost f_i(t_i - a_i) plus bandwidth cost B_i (Eq. 1)."""

from __future__ import annotations

from dataclasses import dataclass

from edgewise.sites.problem import Job, JobSlot, Plan, SitesProblem

__all__ = ["CostBreakdown", "entry_bandwidth_cost", "plan_cost", "response_slots"]


@dataclass(frozen=True, slots=True)
class CostBreakdown:
    """Σ_i f_i(t_i - a_i), Σ_i B_i split into data transfer and parameter exchange, and the
    total; per-job totals by name."""

    latency: float
    data_transfer: float
    parameter_exchange: float
    per_job: dict[str, float]

    @property
    def bandwidth(self) -> float:
        return self.data_transfer + self.parameter_exchange

    @property
    def total(self) -> float:
        return self.latency + self.bandwidth


def response_slots(job: Job, completion: int) -> int:
    """t_i - a_i with t_i counted at the end of the completion slot: a job that arrives and
    finishes in the same slot has response time 1 (as f_i(t + l_i - a_i) in Alg. 1 line 9)."""
    return completion + 1 - job.arrival


def entry_bandwidth_cost(problem: SitesProblem, job: Job, e: JobSlot) -> tuple[float, float]:
    """Eq. 1 for one slot: (Σ q^{rr'} δ_i g_i^{rr'}(t), Σ_r q^{r,ps} π_i y_i^r(t))."""
    q = problem.q
    data = sum(q[g.src][g.dst] * job.chunk_mb * g.chunks for g in e.transfers)
    params = sum(q[r][e.ps_site] * job.param_mb * y for r, y in enumerate(e.workers))
    return data, params


def plan_cost(problem: SitesProblem, plan: Plan, end_slot: int | None = None) -> CostBreakdown:
    """Objective (2) of ``plan``. An unfinished job is charged f_i at ``end_slot`` (default:
    the plan's last slot), so a schedule never gains by leaving work undone."""
    jobs = {j.name: j for j in problem.jobs}
    last = plan.n_slots - 1 if end_slot is None else end_slot
    per_job = {name: 0.0 for name in jobs}
    data_total = param_total = 0.0
    for e in plan.entries:
        data, params = entry_bandwidth_cost(problem, jobs[e.job], e)
        data_total += data
        param_total += params
        per_job[e.job] += data + params
    latency = 0.0
    for name, job in jobs.items():
        done = plan.completion.get(name)
        f = job.latency(response_slots(job, last if done is None else done))
        latency += f
        per_job[name] += f
    return CostBreakdown(latency, data_total, param_total, per_job)
