"""The execution model of SROLE's environment: load and utilisation of the three resources
(Eq. 1–2), the overload test (§III), validity (§IV-B), and the job completion time.

A job's demands are rates at its data rate: its partitions' CPU, their memory, and on each
link the traffic of every transfer between two of its consecutive partitions placed on
different nodes (and of the batch from its origin to the first partition). Alone, a task
computes at its node's CPU speed and a transfer runs at the slower of its two links; what
the other users of a node (other jobs, background tasks) do to it is the overload model
(``stretches``):

- ``processor-sharing`` (default): the resource is shared max-min fairly among its users,
  as a CPU quota shares a core among processes and a shaped link among flows: a job's
  task or transfer gets what the others leave of the capacity, and at least an equal share
  with them — it takes min(1 / (1 − u_o), n_o + 1) times longer, u_o the others' demand over
  the capacity and n_o their number (one job's own partitions never run at once: no
  pipelining);
- ``quadratic``: (u/α)² from α on, u the total demand over the capacity (the earlier code's
  rule for memory, for comparison);
- ``invalid``: a job using a resource above capacity cannot run (fails, is re-placed).

Memory above capacity makes a schedule invalid in every model (§IV-B: a schedule "violating
the memory limit requirement is not valid").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from edgewise.errors import ConfigError
from edgewise.modelparallel.problem import (
    ALPHA,
    CPU,
    MEM,
    NET,
    OVERLOAD_MODELS,
    BackgroundTask,
    EdgeNetwork,
    Job,
    TaskPlacement,
)

__all__ = ["Occupancy", "combined_utilisation", "invalid_reason", "iteration_time_s",
           "job_completion_time_s", "job_load", "job_users", "load_of", "occupancy", "overloaded",
           "pair_rates_mbps", "stretches", "transfer_s", "utilisation"]

OVERLOAD = OVERLOAD_MODELS[0]


def job_load(job: Job, nodes: Sequence[int], n: int) -> NDArray[np.float64]:
    """The (n, 3) demand of one job placed on ``nodes``: CPU and memory on each host,
    bandwidth on both ends of every transfer that crosses a link."""
    if len(nodes) != len(job.partitions):
        raise ConfigError(f"job {job.name!r}: {len(job.partitions)} partitions, "
                          f"{len(nodes)} hosts", field="placement")
    rows = [[0.0, 0.0, 0.0] for _ in range(n)]  # plain floats: a job has few partitions
    prev, rate = job.origin, job.input_mbps
    for p, host in zip(job.partitions, nodes, strict=True):
        row = rows[host]
        row[CPU] += p.cpu
        row[MEM] += p.memory_mb
        if host != prev:
            row[NET] += rate
            rows[prev][NET] += rate
        prev, rate = host, p.out_mbps
    return np.array(rows, dtype=np.float64)


def load_of(network: EdgeNetwork, jobs: Sequence[Job], placements: Sequence[TaskPlacement],
            background: Sequence[BackgroundTask] = ()) -> NDArray[np.float64]:
    """D_k(d_j) (Eq. 1): the (n, 3) total demand of the tasks and transfers on each node."""
    load = np.zeros((network.n, 3))
    for t in background:
        load[t.node] += (t.cpu, t.memory_mb, t.bandwidth_mbps)
    for job, place in zip(jobs, placements, strict=True):
        load += job_load(job, place.nodes, network.n)
    return load


def job_users(job: Job, nodes: Sequence[int], n: int) -> NDArray[np.float64]:
    """(n, 3): 1 where the job uses a node's CPU and memory (a layer) or its link (a
    transfer), else 0: the job counts once however many of its partitions are there."""
    used = job_load(job, nodes, n) > 0
    used[list(nodes), :2] = True
    return used.astype(np.float64)


@dataclass(frozen=True, slots=True)
class Occupancy:
    """Who uses each node: the (n, 3) demand (Eq. 1's D_k) and the (n, 3) number of its
    users (jobs and background tasks) of each resource."""

    load: NDArray[np.float64]
    users: NDArray[np.float64]


def occupancy(network: EdgeNetwork, jobs: Sequence[Job], placements: Sequence[TaskPlacement],
              background: Sequence[BackgroundTask] = ()) -> Occupancy:
    """The demand and the users of every node when ``jobs`` run where ``placements`` say,
    over ``background``."""
    users = np.zeros((network.n, 3))
    for t in background:
        users[t.node] += (t.cpu > 0, t.memory_mb > 0, t.bandwidth_mbps > 0)
    for job, place in zip(jobs, placements, strict=True):
        users += job_users(job, place.nodes, network.n)
    return Occupancy(load_of(network, jobs, placements, background), users)


def utilisation(network: EdgeNetwork, load: NDArray[np.float64]) -> NDArray[np.float64]:
    """u_k(d_j) = D_k(d_j) / C_k(d_j) (Eq. 1), shape (n, 3)."""
    return np.asarray(load / network.capacity(), dtype=np.float64)


def combined_utilisation(u: NDArray[np.float64]) -> NDArray[np.float64]:
    """u(d_j) = Π_k u_k(d_j) (Eq. 2), shape (n,)."""
    return np.asarray(np.prod(u, axis=-1), dtype=np.float64)


def overloaded(u: NDArray[np.float64], alpha: float = ALPHA) -> NDArray[np.bool_]:
    """Whether u_k(d_j) > α for any k (§III), shape (n,)."""
    return np.asarray(np.any(u > alpha + 1e-12, axis=-1))


def stretches(job: Job, placement: TaskPlacement, network: EdgeNetwork, occ: Occupancy,
              alpha: float = ALPHA, model: str = OVERLOAD) -> NDArray[np.float64]:
    """(n, 3): how many times longer than alone the job's work on each node's resource takes
    under the overload ``model`` (module docstring); ``occ`` includes the job."""
    if model == "processor-sharing":
        own = job_load(job, placement.nodes, network.n)
        u_o = np.maximum(0.0, (occ.load - own) / network.capacity())
        n_o = np.maximum(0.0, occ.users - job_users(job, placement.nodes, network.n))
        with np.errstate(divide="ignore"):
            residual = np.where(u_o < 1.0, 1.0 / np.maximum(1e-12, 1.0 - u_o), np.inf)
        return np.asarray(np.where(n_o > 0, np.minimum(residual, n_o + 1.0), 1.0))
    if model == "quadratic":
        return np.asarray(np.maximum(1.0, utilisation(network, occ.load) / alpha) ** 2)
    if model == "invalid":
        return np.ones((network.n, 3))
    raise ConfigError(f"unknown overload model {model!r}; known: {', '.join(OVERLOAD_MODELS)}",
                      field="overload")


def transfer_s(network: EdgeNetwork, a: int, b: int, size_mb: float,
               stretch: NDArray[np.float64] | None = None) -> float:
    """Seconds to send ``size_mb`` from node a to node b (0 on the same node): at the
    slower link's bandwidth, stretched by the busier link (``stretch``, (n, 3), from
    `stretches`; None: alone)."""
    if a == b:
        return 0.0
    factor = 1.0 if stretch is None else max(float(stretch[a, NET]), float(stretch[b, NET]))
    return size_mb * 8.0 / network.pair_mbps(a, b) * factor


def iteration_time_s(job: Job, placement: TaskPlacement, network: EdgeNetwork, occ: Occupancy,
                     alpha: float = ALPHA, model: str = OVERLOAD) -> float:
    """One training iteration of ``job`` under ``placement`` (no pipelining, [8]):
    Σ_i gflop_i / (host_gflops · C_cpu(host_i)) · stretch_cpu(host_i)  (forward + backward)
    + the batch from the origin to the first host + 2 · out_mb_i between consecutive hosts
    (activation forward, its gradient back), each transfer at its shared rate
    (`transfer_s`). ``occ`` must include the job itself."""
    stretch = stretches(job, placement, network, occ, alpha, model)
    total = transfer_s(network, job.origin, placement.nodes[0], job.input_mb, stretch)
    for i, (p, host) in enumerate(zip(job.partitions, placement.nodes, strict=True)):
        speed = network.host_gflops * network.nodes[host].cpu
        total += p.gflop / speed * float(stretch[host, CPU])
        if i + 1 < len(placement.nodes):
            total += 2.0 * transfer_s(network, host, placement.nodes[i + 1], p.out_mb, stretch)
    return total


def job_completion_time_s(job: Job, placement: TaskPlacement, network: EdgeNetwork,
                          occ: Occupancy, alpha: float = ALPHA,
                          model: str = OVERLOAD) -> float:
    """JCT O (§V-C): ``n_iterations`` iterations at the current occupancy."""
    return job.n_iterations * iteration_time_s(job, placement, network, occ, alpha, model)


def invalid_reason(job: Job, placement: TaskPlacement, network: EdgeNetwork,
                   load: NDArray[np.float64], model: str = OVERLOAD) -> str | None:
    """Why the job cannot run at ``load``: "memory" if a host's memory demand exceeds its
    capacity (§IV-B, every model); under the ``invalid`` model "cpu" or "bandwidth" if a
    host or a link its transfers use is above capacity; None if it can run."""
    u = utilisation(network, load)
    hosts = sorted(set(placement.nodes))
    if np.any(u[hosts, MEM] > 1.0 + 1e-9):
        return "memory"
    if model != "invalid":
        return None
    if np.any(u[hosts, CPU] > 1.0 + 1e-9):
        return "cpu"
    own = job_load(job, placement.nodes, network.n)[:, NET] > 0
    return "bandwidth" if np.any(u[own, NET] > 1.0 + 1e-9) else None


def pair_rates_mbps(job: Job, placement: TaskPlacement, network: EdgeNetwork, occ: Occupancy,
                    alpha: float = ALPHA, model: str = OVERLOAD) -> NDArray[np.float64]:
    """The rate of the job's transfer between each pair of nodes at ``occ`` (the rates
    `transfer_s` uses), shape (n, n); the diagonal is infinite (local)."""
    stretch = stretches(job, placement, network, occ, alpha, model)[:, NET]
    cap = network.capacity()[:, NET]
    rates = np.minimum.outer(cap, cap) / np.maximum.outer(stretch, stretch)
    np.fill_diagonal(rates, np.inf)
    return np.asarray(rates, dtype=np.float64)
