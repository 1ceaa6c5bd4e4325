"""Scores a method round by round (§IV-B/C): decide, shield, run, reward, learn; offline
pre-training on random networks, then online learning on the evaluated one. Deterministic
from its seed (wall-clock seconds are reported beside, never used)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from edgewise.modelparallel.agents import QAgent
from edgewise.modelparallel.jobs import background_tasks, cluster_jobs
from edgewise.modelparallel.network import pretraining_network
from edgewise.modelparallel.policies import Method, Shield
from edgewise.modelparallel.problem import (
    EdgeNetwork,
    Placement,
    job_completion_time_s,
    load_of,
    overloaded,
    utilisation,
)
from edgewise.modelparallel.schedule import Decision, Round

__all__ = ["GAMMA", "KAPPA", "RHO", "RoundResult", "count_collisions", "outcome", "play_round",
           "pretrain", "random_round", "rewards"]

Layer = tuple[int, int]

RHO, GAMMA, KAPPA = 1.0, 50.0, 100.0  # §V-A (κ = −100 is the penalty; we keep its size)


@dataclass(frozen=True, slots=True)
class RoundResult:
    """What one round did: proposed and executed placements, per job its JCT (s) and
    whether memory was violated, the collisions and unsafe nodes of the proposal, the
    collisions left in the executed joint action, the nodes still overloaded after it, the
    shield's corrections, the decision and shield work
    (ops, deterministic) and wall seconds, and per node utilisation and task count."""

    proposed: tuple[Placement, ...]
    executed: tuple[Placement, ...]
    jct_s: tuple[float, ...]
    memory_violated: tuple[bool, ...]
    collisions: int
    unsafe: int
    collisions_after: int
    overloaded_after: int
    corrected: int
    decision_ops: int
    shield_ops: int
    decision_s: float
    shield_s: float
    utilisation: NDArray[np.float64]
    tasks: tuple[int, ...]


def random_round(network: EdgeNetwork, model: str, workload_pct: float,
                 rng: np.random.Generator, n_partitions: int | None = None) -> Round:
    """A round of §V-A: 3 jobs of ``model`` per cluster at random origins (one partition per
    model level, or ``n_partitions`` groups of levels), and the PageRank background of
    ``workload_pct`` on random nodes."""
    return Round(network, cluster_jobs(network, model, rng, n_partitions=n_partitions),
                 background_tasks(network, workload_pct, rng))


def count_collisions(rnd: Round, placements: Sequence[Placement]) -> tuple[int, int]:
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


def outcome(rnd: Round, dec: Decision, shield: Shield | None) -> tuple[RoundResult, set[Layer]]:
    """Shield the joint action (§IV-C/D) if there is a shield, run every job at the joint
    load and measure; also returns the layers the shield moved."""
    net, base = rnd.network, rnd.base_load()
    collisions, unsafe = count_collisions(rnd, dec.placements)
    executed, s_ops, s_secs = dec.placements, 0, 0.0
    changed: tuple[Layer, ...] = ()
    if shield is not None:
        sh = shield(net, rnd.jobs, dec.placements, base, rnd.alpha)
        executed, changed, s_ops, s_secs = sh.placements, sh.changed, sh.ops, sh.seconds
    load = base + load_of(net, rnd.jobs, executed)
    u = utilisation(net, load)
    tasks = np.zeros(net.n, dtype=int)
    for t in rnd.background:
        tasks[t.node] += 1
    for p in executed:
        np.add.at(tasks, list(p.nodes), 1)
    res = RoundResult(
        dec.placements, executed,
        tuple(job_completion_time_s(j, p, net, load, rnd.alpha)
              for j, p in zip(rnd.jobs, executed, strict=True)),
        tuple(bool(np.any(u[list(p.nodes), 1] > 1.0)) for p in executed),
        collisions, unsafe, count_collisions(rnd, executed)[0],
        int(np.sum(overloaded(u, rnd.alpha) & (tasks > 0))),
        len(changed), dec.ops, s_ops, dec.seconds, s_secs, u, tuple(int(t) for t in tasks))
    return res, set(changed)


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


def play_round(method: Method, rnd: Round, agents: Sequence[QAgent], rng: np.random.Generator,
               *, explore: bool = True, learn: bool = True,
               kappa: float = KAPPA) -> RoundResult:
    """Decide (§IV-B), shield (§IV-C/D), run every job at the joint load, reward and learn."""
    dec = method.decide(rnd, agents, rng, explore)
    res, changed = outcome(rnd, dec, method.shield)
    if learn:
        for j, r in enumerate(rewards(res, rnd, changed, kappa)):
            agents[dec.deciders[j]].learn(dec.steps[j], r)
    return res


def pretrain(method: Method, models: Sequence[str], rng: np.random.Generator,
             rounds: int = 300, workload_pct: float = 100.0,
             kappa: float = KAPPA, n_partitions: int | None = None) -> QAgent:
    """Offline pre-training (§IV-B: "The RL is initially pre-trained and distributed to each
    edge node"): one shared Q-table learns from every agent's decisions, exploring, on a fresh
    `pretraining_network` (§V-A's "RL Training" ranges, 2–10 nodes) each round; it is then
    copied to every node. Jobs as in :func:`random_round` (``n_partitions``)."""
    shared = QAgent()
    for k in range(rounds):
        net = pretraining_network(rng)
        rnd = random_round(net, models[k % len(models)], workload_pct, rng, n_partitions)
        play_round(method, rnd, [shared] * net.n, rng, kappa=kappa)
    return shared
