"""One scheduling round carried out in the environment (§IV-B/C): run the executed joint
action at the demands as they turn out, measure it, and reward the agents. Deterministic.

A job whose schedule is invalid does not run: memory above capacity on a host (§IV-B, every
overload model), or under the ``invalid`` model any resource above capacity. It fails this
round and is placed again in the next one (``sim.simulate``); its agent gets −γ. A job the
shield deferred (no valid host) waits for the next round too, without running.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from edgewise.modelparallel.jct import (
    Occupancy,
    invalid_reason,
    job_completion_time_s,
    load_of,
    occupancy,
    overloaded,
    utilisation,
)
from edgewise.modelparallel.jobs import DEMAND_DRIFT, background_tasks, cluster_jobs, drifted
from edgewise.modelparallel.problem import (
    ALPHA,
    OVERLOAD_MODELS,
    BackgroundTask,
    EdgeNetwork,
    Job,
    TaskPlacement,
)
from edgewise.modelparallel.schedule import Decision, Round
from edgewise.modelparallel.shields import Layer

if TYPE_CHECKING:  # a type only: a policy's import of rounds loads no torch
    from edgewise.modelparallel.workloads import ModelRef

__all__ = ["GAMMA", "KAPPA", "RHO", "Conditions", "RoundResult", "count_collisions", "outcome",
           "random_round", "rewards"]

RHO, GAMMA, KAPPA = 1.0, 50.0, 100.0  # §V-A (κ = −100 is the penalty; we keep its size)


@dataclass(frozen=True, slots=True)
class RoundResult:
    """What one round did: proposed and executed placements; per job its JCT (s; NaN if it
    did not run), why it did not run (``failed``: "memory", "cpu", "bandwidth" — an invalid
    schedule — or "deferred" by the shield; None: it ran) and ``would_be_s``, its JCT had
    the whole joint action run under processor sharing (how long the round occupies its
    cluster); the collisions and unsafe nodes of the proposal, the collisions left in the
    executed joint action, the nodes overloaded in it, the shield's corrections, the
    decision and shield work (ops, deterministic), and per node utilisation and task count.
    Wall-clock seconds are kept apart (the decision's)."""

    proposed: tuple[TaskPlacement, ...]
    executed: tuple[TaskPlacement, ...]
    jct_s: tuple[float, ...]
    failed: tuple[str | None, ...]
    would_be_s: tuple[float, ...]
    collisions: int
    unsafe: int
    collisions_after: int
    overloaded_after: int
    corrected: int
    decision_ops: int
    shield_ops: int
    utilisation: NDArray[np.float64]
    tasks: tuple[int, ...]

    @property
    def memory_violated(self) -> tuple[bool, ...]:
        """Per job: whether it was run with a host's memory above capacity (and failed)."""
        return tuple(f == "memory" for f in self.failed)

    def ran(self) -> list[float]:
        """The JCTs of the jobs that ran."""
        return [t for t, f in zip(self.jct_s, self.failed, strict=True) if f is None]


@dataclass(frozen=True, slots=True)
class Conditions:
    """What the environment is like (the defaults' sources are in docs/srole.md): the
    overload threshold α (§V-A), the overload model (`jct.slowdown`), the background's
    intensity (× each PageRank worker's default CPU and bandwidth demand) and the demands'
    drift (`jobs.drifted`; 0: demands as profiled)."""

    alpha: float = ALPHA
    overload: str = OVERLOAD_MODELS[0]
    intensity: float = 1.0
    drift: float = DEMAND_DRIFT

    def round_of(self, network: EdgeNetwork, jobs: tuple[Job, ...],
                 background: tuple[BackgroundTask, ...], rng: np.random.Generator) -> Round:
        """A round of these jobs over this background, their demands drifted from ``rng``."""
        run_jobs, run_bg = drifted(jobs, background, rng, self.drift) if self.drift else (
            None, None)
        return Round(network, jobs, background, self.alpha, self.overload, run_jobs, run_bg)


def random_round(network: EdgeNetwork, model: ModelRef, workload_pct: float,
                 rng: np.random.Generator, n_partitions: int | None = None,
                 conditions: Conditions | None = None) -> Round:
    """A round of §V-A: 3 jobs of ``model`` per cluster at random origins (one partition per
    model level, or ``n_partitions`` groups of levels), the PageRank background of
    ``workload_pct`` on random nodes, under ``conditions`` (background intensity, drift)."""
    env = Conditions() if conditions is None else conditions
    jobs = cluster_jobs(network, model, rng, n_partitions=n_partitions)
    background = background_tasks(network, workload_pct, rng, env.intensity)
    return env.round_of(network, jobs, background, rng)


def count_collisions(network: EdgeNetwork, jobs: Sequence[Job],
                     placements: Sequence[TaskPlacement], background: Sequence[BackgroundTask],
                     alpha: float) -> tuple[int, int]:
    """(collisions, unsafe): overloaded nodes hosting layers of ≥ 2 jobs (action collisions,
    §I), and overloaded nodes hosting any layer (unsafe actions)."""
    u = utilisation(network, load_of(network, jobs, placements, background))
    over = overloaded(u, alpha)
    jobs_on: dict[int, set[int]] = {}
    for j, p in enumerate(placements):
        for h in p.nodes:
            jobs_on.setdefault(h, set()).add(j)
    unsafe = [h for h in jobs_on if over[h]]
    return sum(len(jobs_on[h]) >= 2 for h in unsafe), len(unsafe)


def outcome(rnd: Round, dec: Decision) -> RoundResult:
    """Run the round's jobs where ``dec.executed`` puts them, at their demands as they turn
    out (``rnd.actual()``): the jobs the shield deferred stay out, the jobs with an invalid
    schedule fail, the others run at the load of those that run."""
    net, (jobs, bg) = rnd.network, rnd.actual()
    out = set(dec.deferred)
    attempted = [j for j in range(len(jobs)) if j not in out]

    def occ(which: Sequence[int]) -> Occupancy:
        return occupancy(net, [jobs[j] for j in which], [dec.executed[j] for j in which], bg)

    joint = occ(attempted).load
    failed = ["deferred" if j in out else invalid_reason(jobs[j], dec.executed[j], net, joint,
                                                         rnd.overload)
              for j in range(len(jobs))]
    ran = [j for j in attempted if failed[j] is None]
    final, everyone = occ(ran), occ(range(len(jobs)))
    u = utilisation(net, joint)
    tasks = np.zeros(net.n, dtype=int)
    for t in bg:
        tasks[t.node] += 1
    for j in attempted:
        np.add.at(tasks, list(dec.executed[j].nodes), 1)
    return RoundResult(
        dec.proposed, dec.executed,
        tuple(job_completion_time_s(jobs[j], dec.executed[j], net, final, rnd.alpha,
                                    rnd.overload) if failed[j] is None else math.nan
              for j in range(len(jobs))),
        tuple(failed),
        tuple(job_completion_time_s(jobs[j], dec.executed[j], net, everyone, rnd.alpha)
              for j in range(len(jobs))),
        *count_collisions(net, jobs, dec.proposed, bg, rnd.alpha),
        count_collisions(net, [jobs[j] for j in attempted], [dec.executed[j] for j in attempted],
                         bg, rnd.alpha)[0],
        int(np.sum(overloaded(u, rnd.alpha) & (tasks > 0))),
        len(dec.changed), dec.ops, dec.shield_ops, u, tuple(int(t) for t in tasks))


def rewards(res: RoundResult, rnd: Round, dec: Decision,
            kappa: float = KAPPA) -> list[list[float]]:
    """§IV-C: −κ for each decision the shield replaced (every decision of a job it
    deferred); at a job's last decision −γ if its schedule was invalid (§IV-B), else ρ/√O
    with O its JCT (nothing more for a deferred job, which has not run)."""
    changed: set[Layer] = set(dec.changed)
    out = []
    for j, job in enumerate(rnd.jobs):
        deferred = res.failed[j] == "deferred"
        r = [-kappa if deferred or (j, i) in changed else 0.0
             for i in range(len(job.partitions))]
        if res.failed[j] is None:
            r[-1] += RHO / math.sqrt(res.jct_s[j])
        elif not deferred:
            r[-1] -= GAMMA
        out.append(r)
    return out
