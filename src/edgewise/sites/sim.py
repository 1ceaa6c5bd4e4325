"""Time-slotted, seeded simulator: drives an online policy slot by slot, applies and checks
its decisions, and reports total cost (latency + bandwidth), makespan and completions."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from edgewise.errors import InfeasibleError
from edgewise.sites.cost import CostBreakdown, plan_cost, response_slots
from edgewise.sites.policies import SlotState, get_policy
from edgewise.sites.problem import JobSlot, Plan, SitesProblem

__all__ = ["SimResult", "plan_schedule", "simulate"]


@dataclass(frozen=True, slots=True)
class SimResult:
    """A policy's schedule and what it costs. ``makespan`` counts slots from the first
    arrival to the end of the last completion; ``completion`` maps job → t_i (None when the
    job had not finished after ``max_slots``); ``runtime_s`` is the policy's own wall-clock
    time and ``cpu_s`` its CPU time (the two differ on a loaded machine)."""

    policy: str
    plan: Plan
    cost: CostBreakdown
    makespan: int
    completion: dict[str, int | None]
    response: dict[str, int | None]
    runtime_s: float
    slots_run: int
    cpu_s: float = 0.0

    @property
    def total_cost(self) -> float:
        return self.cost.total

    @property
    def unfinished(self) -> tuple[str, ...]:
        return tuple(n for n, c in self.completion.items() if c is None)


def _apply(problem: SitesProblem, entries: tuple[JobSlot, ...], slot: int,
           remaining: dict[str, np.ndarray]) -> None:
    """Check one slot's decisions (data exists, capacities hold) and consume the data."""
    jobs = {j.name: j for j in problem.jobs}
    used = np.zeros((problem.n_sites, 4))
    for e in entries:
        if e.job not in remaining or e.slot != slot:
            raise InfeasibleError(f"{e.job}@{e.slot}: not an active job of slot {slot}")
        job, rem = jobs[e.job], remaining[e.job]
        used += np.outer(e.workers, job.worker_demand)
        used[e.ps_site] += job.ps_demand
        for g in e.transfers:
            rem[g.src] -= g.chunks
        if (rem < 0).any():
            raise InfeasibleError(f"{e.job}@{slot}: trains data it no longer has")
    cap = np.array([s.capacity for s in problem.sites])
    if (used > cap + 1e-6).any():
        raise InfeasibleError(f"slot {slot}: the decisions exceed a site's capacity (2d)")


def simulate(problem: SitesProblem, policy: str, seed: int = 0,
             max_slots: int | None = None) -> SimResult:
    """Run ``policy`` online over the problem's slots, and beyond the horizon T while jobs
    are unfinished, up to ``max_slots`` (default 4T + 500)."""
    rng = np.random.default_rng(seed)
    limit = max_slots or 4 * problem.horizon + 500
    remaining: dict[str, np.ndarray] = {}
    completion: dict[str, int | None] = {j.name: None for j in problem.jobs}
    arrivals = sorted(problem.jobs, key=lambda j: (j.arrival, j.name))
    entries: list[JobSlot] = []
    runtime = cpu = 0.0
    start, start_cpu = time.perf_counter(), time.process_time()
    scheduler = get_policy(policy)(problem, rng)
    runtime += time.perf_counter() - start
    cpu += time.process_time() - start_cpu
    slot = 0
    for slot in range(limit):
        for job in arrivals:
            if job.arrival == slot:
                remaining[job.name] = np.asarray(job.data, dtype=np.int64).copy()
        active = {n: tuple(int(v) for v in r) for n, r in remaining.items() if r.sum() > 0}
        if not active and slot >= max(j.arrival for j in problem.jobs):
            break
        start, start_cpu = time.perf_counter(), time.process_time()
        decided = scheduler.step(SlotState(slot, active))
        runtime += time.perf_counter() - start
        cpu += time.process_time() - start_cpu
        _apply(problem, decided, slot, remaining)
        entries.extend(decided)
        for e in decided:
            if remaining[e.job].sum() == 0:
                completion[e.job] = slot
    plan = Plan(policy, tuple(sorted(entries, key=lambda e: (e.slot, e.job))), completion)
    return _result(problem, plan, (runtime, cpu), slot)


def _result(problem: SitesProblem, plan: Plan, times: tuple[float, float],
            last: int) -> SimResult:
    jobs = {j.name: j for j in problem.jobs}
    response = {n: (None if c is None else response_slots(jobs[n], c))
                for n, c in plan.completion.items()}
    done = [c for c in plan.completion.values() if c is not None]
    first = min(j.arrival for j in problem.jobs)
    makespan = (max(done) + 1 - first) if done else 0
    cost = plan_cost(problem, plan, end_slot=last)
    return SimResult(plan.policy, plan, cost, makespan, dict(plan.completion), response,
                     times[0], last + 1, times[1])


def plan_schedule(problem: SitesProblem, policy: str, seed: int = 0) -> Plan:
    """The schedule ``policy`` produces on ``problem`` (pure: same seed, same plan)."""
    return simulate(problem, policy, seed).plan
