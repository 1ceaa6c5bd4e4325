"""One scheduling round carried out in the environment (§IV-B/C): run the executed joint
action at the joint load, measure it, and reward the agents. Deterministic."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from edgewise.modelparallel.jobs import background_tasks, cluster_jobs
from edgewise.modelparallel.problem import (
    ALPHA,
    EdgeNetwork,
    TaskPlacement,
    job_completion_time_s,
    load_of,
    overloaded,
    utilisation,
)
from edgewise.modelparallel.schedule import Decision, Round
from edgewise.modelparallel.shields import Layer

__all__ = ["GAMMA", "KAPPA", "RHO", "RoundResult", "count_collisions", "outcome",
           "random_round", "rewards"]

RHO, GAMMA, KAPPA = 1.0, 50.0, 100.0  # §V-A (κ = −100 is the penalty; we keep its size)


@dataclass(frozen=True, slots=True)
class RoundResult:
    """What one round did: proposed and executed placements, per job its JCT (s) and
    whether memory was violated, the collisions and unsafe nodes of the proposal, the
    collisions left in the executed joint action, the nodes still overloaded after it, the
    shield's corrections, the decision and shield work (ops, deterministic), and per node
    utilisation and task count. Wall-clock seconds are kept apart (the decision's)."""

    proposed: tuple[TaskPlacement, ...]
    executed: tuple[TaskPlacement, ...]
    jct_s: tuple[float, ...]
    memory_violated: tuple[bool, ...]
    collisions: int
    unsafe: int
    collisions_after: int
    overloaded_after: int
    corrected: int
    decision_ops: int
    shield_ops: int
    utilisation: NDArray[np.float64]
    tasks: tuple[int, ...]


def random_round(network: EdgeNetwork, model: str, workload_pct: float,
                 rng: np.random.Generator, n_partitions: int | None = None,
                 alpha: float = ALPHA) -> Round:
    """A round of §V-A: 3 jobs of ``model`` per cluster at random origins (one partition per
    model level, or ``n_partitions`` groups of levels), and the PageRank background of
    ``workload_pct`` on random nodes."""
    return Round(network, cluster_jobs(network, model, rng, n_partitions=n_partitions),
                 background_tasks(network, workload_pct, rng), alpha)


def count_collisions(rnd: Round, placements: Sequence[TaskPlacement]) -> tuple[int, int]:
    """(collisions, unsafe): overloaded nodes hosting layers of ≥ 2 jobs (action collisions,
    §I), and overloaded nodes hosting any layer (unsafe actions)."""
    u = utilisation(rnd.network, rnd.base_load() + load_of(rnd.network, rnd.jobs, placements))
    over = overloaded(u, rnd.alpha)
    jobs_on: dict[int, set[int]] = {}
    for j, p in enumerate(placements):
        for h in p.nodes:
            jobs_on.setdefault(h, set()).add(j)
    unsafe = [h for h in jobs_on if over[h]]
    return sum(len(jobs_on[h]) >= 2 for h in unsafe), len(unsafe)


def outcome(rnd: Round, dec: Decision) -> RoundResult:
    """Run every job of the round where ``dec.executed`` puts it, at the joint load, and
    measure (JCT, memory, collisions before and after shielding, utilisation, tasks)."""
    net, base = rnd.network, rnd.base_load()
    collisions, unsafe = count_collisions(rnd, dec.proposed)
    load = base + load_of(net, rnd.jobs, dec.executed)
    u = utilisation(net, load)
    tasks = np.zeros(net.n, dtype=int)
    for t in rnd.background:
        tasks[t.node] += 1
    for p in dec.executed:
        np.add.at(tasks, list(p.nodes), 1)
    return RoundResult(
        dec.proposed, dec.executed,
        tuple(job_completion_time_s(j, p, net, load, rnd.alpha)
              for j, p in zip(rnd.jobs, dec.executed, strict=True)),
        tuple(bool(np.any(u[list(p.nodes), 1] > 1.0)) for p in dec.executed),
        collisions, unsafe, count_collisions(rnd, dec.executed)[0],
        int(np.sum(overloaded(u, rnd.alpha) & (tasks > 0))),
        len(dec.changed), dec.ops, dec.shield_ops, u, tuple(int(t) for t in tasks))


def rewards(res: RoundResult, rnd: Round, changed: set[Layer],
            kappa: float = KAPPA) -> list[list[float]]:
    """§IV-C: −κ for each decision the shield replaced; at a job's last decision −γ if its
    memory is violated, else ρ/√O with O its JCT."""
    out = []
    for j, job in enumerate(rnd.jobs):
        r = [-kappa if (j, i) in changed else 0.0 for i in range(len(job.partitions))]
        r[-1] += -GAMMA if res.memory_violated[j] else RHO / math.sqrt(res.jct_s[j])
        out.append(r)
    return out
