"""How the agents decide (§IV-B): each job's own node places its partitions one by one among
its candidates (MARL), or the cluster head places every job of its cluster (centralized RL)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from edgewise.modelparallel.agents import QAgent, Step, encode_state
from edgewise.modelparallel.jct import load_of
from edgewise.modelparallel.problem import (
    ALPHA,
    NET,
    OVERLOAD_MODELS,
    BackgroundTask,
    EdgeNetwork,
    Job,
    TaskPlacement,
)
from edgewise.modelparallel.shields import Layer

__all__ = ["Decision", "Plan", "Round", "cluster_head", "decide_central", "decide_marl"]

Plan = tuple[TaskPlacement, ...]
"""A plan of one round: every job's task placement, in the order of the round's jobs."""


@dataclass(frozen=True, slots=True)
class Round:
    """One scheduling round: the network, the jobs to place in it and the background load,
    with their demands as profiled (what agents and shields see), the overload threshold α
    and the ``overload`` model (`jct.slowdown`). ``run_jobs`` / ``run_background`` are the
    demands as they turn out while the jobs run (`jobs.drifted`); None: as profiled."""

    network: EdgeNetwork
    jobs: tuple[Job, ...]
    background: tuple[BackgroundTask, ...] = ()
    alpha: float = ALPHA
    overload: str = OVERLOAD_MODELS[0]
    run_jobs: tuple[Job, ...] | None = None
    run_background: tuple[BackgroundTask, ...] | None = None

    def base_load(self) -> NDArray[np.float64]:
        """The background's profiled demand on each node, (n, 3)."""
        return load_of(self.network, (), (), self.background)

    def actual(self) -> tuple[tuple[Job, ...], tuple[BackgroundTask, ...]]:
        """The jobs and background tasks with their demands as they turn out."""
        return (self.jobs if self.run_jobs is None else self.run_jobs,
                self.background if self.run_background is None else self.run_background)


@dataclass(frozen=True, slots=True)
class Decision:
    """The joint action of one round: per job its ``proposed`` placement (the agents'
    actions), the deciding agent (node index) and the decisions' trace for learning; ``ops``
    the Q-value look-ups of the busiest decider (deciders run in parallel) and ``seconds``
    its measured wall time. ``executed`` is what runs: the proposal, or the shield's safe
    joint action, with the layers it ``changed``, the jobs it ``deferred`` to the next round
    (no valid host for them), its critical-path checks (``shield_ops``) and wall seconds
    (``shield_seconds``)."""

    proposed: tuple[TaskPlacement, ...]
    deciders: tuple[int, ...]
    steps: tuple[tuple[Step, ...], ...]
    ops: int
    seconds: float
    executed: tuple[TaskPlacement, ...] = ()
    changed: tuple[Layer, ...] = ()
    deferred: tuple[int, ...] = ()
    shield_ops: int = 0
    shield_seconds: float = 0.0

    def __post_init__(self) -> None:
        if not self.executed:
            object.__setattr__(self, "executed", self.proposed)


def cluster_head(network: EdgeNetwork, cluster: int) -> int:
    """The cluster head: the member with the most CPU (§I: relatively high capacity)."""
    return max(network.members(cluster), key=lambda j: (network.nodes[j].cpu, -j))


def _place(job: Job, cands: Sequence[int], agent: QAgent, context: str, rnd: Round,
           view: NDArray[np.float64], rng: np.random.Generator,
           explore: bool) -> tuple[TaskPlacement, tuple[Step, ...]]:
    """Place the job's partitions in order, updating ``view`` with each choice: CPU and
    memory on the host, the transfer from the previous host on both links (§IV-B: "the
    available resources of edges are updated ... until the last layer is assigned")."""
    hosts: list[int] = []
    steps = []
    prev, prev_host, rate = 0, job.origin, job.input_mbps
    for part in job.partitions:
        local = encode_state(part, prev, cands, rnd.network, view, rnd.alpha)
        key = agent.key(local, context)
        slot = agent.act(key, len(cands), rng, explore)
        steps.append(Step(key, slot, len(cands), local))
        host = cands[slot]
        hosts.append(host)
        view[host, :2] += (part.cpu, part.memory_mb)
        if host != prev_host:
            view[[host, prev_host], NET] += rate
        prev, prev_host, rate = slot, host, part.out_mbps
    return TaskPlacement(tuple(hosts)), tuple(steps)


def _context(job: Job, cands: Sequence[int], origins: set[int]) -> str:
    """The other agents' state a node observes: which of its candidates are agents
    scheduling a job of their own this round (CQ-learning's joint state)."""
    return "".join("1" if k != job.origin and k in origins else "0" for k in cands)


def decide_marl(rnd: Round, agents: Sequence[QAgent], rng: np.random.Generator,
                explore: bool) -> Decision:
    """MARL: every job's origin node decides alone among itself and its neighbours, seeing
    the observed load plus only its own earlier choices."""
    base = rnd.base_load()
    origins = {j.origin for j in rnd.jobs}
    places: list[TaskPlacement] = []
    steps: list[tuple[Step, ...]] = []
    ops: dict[int, int] = {}
    secs: dict[int, float] = {}
    for job in rnd.jobs:
        t0 = time.perf_counter()
        cands = rnd.network.candidates(job.origin)
        p, s = _place(job, cands, agents[job.origin], _context(job, cands, origins), rnd,
                      base.copy(), rng, explore)
        places.append(p)
        steps.append(s)
        ops[job.origin] = ops.get(job.origin, 0) + len(cands) * len(job.partitions)
        secs[job.origin] = secs.get(job.origin, 0.0) + time.perf_counter() - t0
    return Decision(tuple(places), tuple(j.origin for j in rnd.jobs), tuple(steps),
                    max(ops.values(), default=0), max(secs.values(), default=0.0))


def decide_central(rnd: Round, agents: Sequence[QAgent], rng: np.random.Generator,
                   explore: bool) -> Decision:
    """Centralized RL: the head of each cluster places all its cluster's jobs one after the
    other, seeing every node of the cluster and every earlier choice."""
    net = rnd.network
    view = rnd.base_load()
    places: list[TaskPlacement] = []
    steps: list[tuple[Step, ...]] = []
    deciders: list[int] = []
    ops: dict[int, int] = {}
    secs: dict[int, float] = {}
    for job in rnd.jobs:
        t0 = time.perf_counter()
        c = net.cluster(job.origin)
        head = cluster_head(net, c)
        cands = (job.origin, *(k for k in net.members(c) if k != job.origin))
        p, s = _place(job, cands, agents[head], "", rnd, view, rng, explore)
        places.append(p)
        steps.append(s)
        deciders.append(head)
        ops[head] = ops.get(head, 0) + len(cands) * len(job.partitions)
        secs[head] = secs.get(head, 0.0) + time.perf_counter() - t0
    return Decision(tuple(places), tuple(deciders), tuple(steps),
                    max(ops.values(), default=0), max(secs.values(), default=0.0))
