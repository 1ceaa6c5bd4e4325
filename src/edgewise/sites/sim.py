"""Time-slotted, seeded simulator: drives an online policy slot by slot, applies and checks
its decisions, tells it what they cost, and reports total cost (latency + bandwidth),
makespan and completions."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from edgewise.errors import InfeasibleError
from edgewise.sites.cost import CostBreakdown, entry_bandwidth_cost, plan_cost, response_slots
from edgewise.sites.policies import (
    REGISTRY,
    PolicyFactory,
    SlotFeedback,
    SlotPolicy,
    SlotState,
    get_policy,
)
from edgewise.sites.problem import JobSlot, Plan, SitesProblem

__all__ = ["SimResult", "plan_schedule", "simulate"]


@dataclass(frozen=True, slots=True)
class SimResult:
    """A policy's schedule and what it costs. ``makespan`` counts slots from the first
    arrival to the end of the last completion; ``completion`` maps job → t_i (None when the
    job had not finished after ``max_slots``). ``timings`` holds the policy's own wall-clock
    (``decision_seconds``) and CPU time (``decision_cpu_seconds``) over all its decisions,
    factory included (the two differ on a loaded machine)."""

    policy: str
    plan: Plan
    cost: CostBreakdown
    makespan: int
    completion: dict[str, int | None]
    response: dict[str, int | None]
    slots_run: int
    timings: Mapping[str, float] = field(default_factory=dict, compare=False)

    @property
    def total_cost(self) -> float:
        return self.cost.total

    @property
    def unfinished(self) -> tuple[str, ...]:
        return tuple(n for n, c in self.completion.items() if c is None)


class _Clock:
    """Wall-clock and CPU seconds spent inside the policy."""

    def __init__(self) -> None:
        self.wall = self.cpu = 0.0

    def __enter__(self) -> None:
        self._wall, self._cpu = time.perf_counter(), time.process_time()

    def __exit__(self, *exc: object) -> None:
        self.wall += time.perf_counter() - self._wall
        self.cpu += time.process_time() - self._cpu


def _apply(problem: SitesProblem, entries: tuple[JobSlot, ...], slot: int,
           remaining: dict[str, np.ndarray]) -> float:
    """Check one slot's decisions (data exists, capacities hold), consume the data; the
    decisions' bandwidth cost (Eq. 1)."""
    jobs = {j.name: j for j in problem.jobs}
    used = np.zeros((problem.n_sites, 4))
    cost = 0.0
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
        cost += sum(entry_bandwidth_cost(problem, job, e))
    cap = np.array([s.capacity for s in problem.sites])
    if (used > cap + 1e-6).any():
        raise InfeasibleError(f"slot {slot}: the decisions exceed a site's capacity (2d)")
    return cost


def _resolve(policy: str | PolicyFactory) -> tuple[str, PolicyFactory]:
    """The policy's name (its registered one where it has one) and its factory."""
    if isinstance(policy, str):
        return policy, get_policy(policy)
    named = [n for n, f in REGISTRY.load().items() if f is policy]
    return (named[0] if named else getattr(policy, "__name__", type(policy).__name__)), policy


def _run(problem: SitesProblem, scheduler: SlotPolicy, limit: int, clock: _Clock
         ) -> tuple[list[JobSlot], dict[str, int | None], int]:
    """The slot loop: entries decided, completion per job, the last slot run."""
    remaining: dict[str, np.ndarray] = {}
    completion: dict[str, int | None] = {j.name: None for j in problem.jobs}
    arrivals = sorted(problem.jobs, key=lambda j: (j.arrival, j.name))
    last_arrival = max(j.arrival for j in problem.jobs)
    entries: list[JobSlot] = []
    slot = 0
    for slot in range(limit):
        for job in arrivals:
            if job.arrival == slot:
                remaining[job.name] = np.asarray(job.data, dtype=np.int64).copy()
        active = {n: tuple(int(v) for v in r) for n, r in remaining.items() if r.sum() > 0}
        if not active and slot >= last_arrival:
            break
        with clock:
            decided = scheduler.step(SlotState(slot, active))
        cost = _apply(problem, decided, slot, remaining)
        entries.extend(decided)
        finished = tuple(e.job for e in decided if remaining[e.job].sum() == 0)
        for name in finished:
            completion[name] = slot
        with clock:
            scheduler.learn(SlotFeedback(slot, decided, cost, finished))
    return entries, completion, slot


def simulate(problem: SitesProblem, policy: str | PolicyFactory, *, seed: int = 0,
             max_slots: int | None = None) -> SimResult:
    """Run ``policy`` (a registered name or a factory ``(problem, rng) -> online policy``)
    over the problem's slots, and beyond the horizon T while jobs are unfinished, up to
    ``max_slots`` (default 4T + 500). Deterministic for a seed, apart from ``timings``.
    InfeasibleError if a decision breaks the data or capacity constraints."""
    name, factory = _resolve(policy)
    clock = _Clock()
    with clock:
        scheduler = factory(problem, np.random.default_rng(seed))
    limit = max_slots or 4 * problem.horizon + 500
    entries, completion, last = _run(problem, scheduler, limit, clock)
    plan = Plan(name, tuple(sorted(entries, key=lambda e: (e.slot, e.job))), completion)
    jobs = {j.name: j for j in problem.jobs}
    response = {n: (None if c is None else response_slots(jobs[n], c))
                for n, c in completion.items()}
    done = [c for c in completion.values() if c is not None]
    first = min(j.arrival for j in problem.jobs)
    return SimResult(name, plan, plan_cost(problem, plan, end_slot=last),
                     (max(done) + 1 - first) if done else 0, dict(completion), response,
                     last + 1, {"decision_seconds": clock.wall,
                                "decision_cpu_seconds": clock.cpu})


def plan_schedule(problem: SitesProblem, policy: str | PolicyFactory, *,
                  seed: int = 0) -> Plan:
    """The schedule ``policy`` produces on ``problem`` (pure: same seed, same plan)."""
    return simulate(problem, policy, seed=seed).plan
