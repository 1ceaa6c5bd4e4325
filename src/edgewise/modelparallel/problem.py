"""SROLE's edge network, training jobs and placements (§III, §IV-B, Table I) and the JCT model.

Units: CPU in *host ratio* (Table I: the share of one host core a container gets; 1.0 = one
core of ``host_gflops`` GFLOP/s), memory in MB (10^6 bytes), bandwidth in Mbps (10^6 bit/s),
data sizes in MB, time in seconds, positions and ranges in metres.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from edgewise.errors import ConfigError

__all__ = ["ALPHA", "HOST_GFLOPS", "BackgroundTask", "EdgeNetwork", "EdgeNode", "Job",
           "Partition", "TaskPlacement", "combined_utilisation", "iteration_time_s",
           "job_completion_time_s", "load_of", "overloaded", "slowdown", "transfer_s",
           "utilisation"]

ALPHA = 0.9  # §V-A: overload threshold α
HOST_GFLOPS = 20.0  # sustained training GFLOP/s of one host core (host ratio 1.0)
SWAP_EXPONENT = 2.0  # memory beyond α thrashes: slowdown (u_mem/α)^2


@dataclass(frozen=True, slots=True)
class EdgeNode:
    """An edge node d_j: capacities C_cpu (host ratio) and C_mem (MB), its position and
    its transmission range (it reaches the nodes within ``range_m``)."""

    name: str
    cpu: float
    memory_mb: float
    x_m: float = 0.0
    y_m: float = 0.0
    range_m: float = math.inf

    def __post_init__(self) -> None:
        if not self.cpu > 0:
            raise ConfigError(f"node {self.name!r}: must be > 0, got {self.cpu}", field="cpu")
        if not self.memory_mb > 0:
            raise ConfigError(f"node {self.name!r}: must be > 0, got {self.memory_mb}",
                              field="memory_mb")


@dataclass(frozen=True, slots=True)
class EdgeNetwork:
    """Edge nodes grouped into clusters (``cluster_of[j]``, §III: 5 nodes each), with a
    symmetric pairwise bandwidth matrix (Mbps; the diagonal is ignored: local is free).

    A node's neighbours are the other nodes of its cluster within its transmission range
    (§I); ``candidates(j)`` is the node itself followed by its neighbours.
    """

    nodes: tuple[EdgeNode, ...]
    bandwidth_mbps: NDArray[np.float64] = field(repr=False, compare=False)
    cluster_of: tuple[int, ...] = ()
    host_gflops: float = HOST_GFLOPS
    _cap: NDArray[np.float64] = field(init=False, repr=False, compare=False)
    _cands: tuple[tuple[int, ...], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        n = len(self.nodes)
        if n == 0:
            raise ConfigError("the network has no node", field="nodes")
        if self.bandwidth_mbps.shape != (n, n):
            raise ConfigError(f"must be {n}x{n}, got {self.bandwidth_mbps.shape}",
                              field="bandwidth_mbps")
        off = self.bandwidth_mbps[~np.eye(n, dtype=bool)]
        if np.any(off <= 0):
            raise ConfigError("every pair of nodes needs a bandwidth > 0", field="bandwidth_mbps")
        if self.cluster_of and len(self.cluster_of) != n:
            raise ConfigError(f"needs {n} entries", field="cluster_of")
        cap = np.array([[d.cpu, d.memory_mb] for d in self.nodes], dtype=np.float64)
        cap.setflags(write=False)
        object.__setattr__(self, "_cap", cap)
        object.__setattr__(self, "_cands", tuple((j, *self._in_range(j)) for j in range(n)))

    @property
    def n(self) -> int:
        return len(self.nodes)

    def cluster(self, j: int) -> int:
        return self.cluster_of[j] if self.cluster_of else 0

    def members(self, cluster: int) -> tuple[int, ...]:
        return tuple(j for j in range(self.n) if self.cluster(j) == cluster)

    @property
    def n_clusters(self) -> int:
        return max(self.cluster_of) + 1 if self.cluster_of else 1

    def neighbours(self, j: int) -> tuple[int, ...]:
        """Nodes of j's cluster within j's transmission range (j excluded)."""
        return self._cands[j][1:]

    def _in_range(self, j: int) -> tuple[int, ...]:
        a = self.nodes[j]
        return tuple(k for k in self.members(self.cluster(j)) if k != j and math.hypot(
            a.x_m - self.nodes[k].x_m, a.y_m - self.nodes[k].y_m) <= a.range_m)

    def candidates(self, j: int) -> tuple[int, ...]:
        """Where node j may place a partition: itself, then its neighbours (§IV-B)."""
        return self._cands[j]

    def capacity(self) -> NDArray[np.float64]:
        """C_k(d_j) as an (n, 2) read-only array: column 0 CPU (host ratio), column 1
        memory (MB)."""
        return self._cap


@dataclass(frozen=True, slots=True)
class Partition:
    """A layer partition (a task): per training iteration ``gflop`` (forward + backward, the
    whole batch); ``cpu`` its CPU demand b_cpu (host ratio kept busy at the job's data rate);
    ``memory_mb`` b_mem (weights, gradients, optimizer state, stored activations);
    ``out_mb`` the activation it sends the next partition (its gradient comes back)."""

    name: str
    gflop: float
    cpu: float
    memory_mb: float
    out_mb: float


@dataclass(frozen=True, slots=True)
class Job:
    """A DL training job initiated at node ``origin``: its partitions in model order, the
    training batch ``input_mb`` the origin sends the first partition, and its iterations."""

    name: str
    model: str
    origin: int
    partitions: tuple[Partition, ...]
    input_mb: float = 0.0
    n_iterations: int = 50

    def __post_init__(self) -> None:
        if not self.partitions:
            raise ConfigError(f"job {self.name!r} has no partition", field="partitions")
        if self.n_iterations < 1:
            raise ConfigError("must be at least 1", field="n_iterations")

    def demand(self) -> NDArray[np.float64]:
        """b_k(l_i) as an (m, 2) array (CPU host ratio, memory MB)."""
        return np.array([[p.cpu, p.memory_mb] for p in self.partitions], dtype=np.float64)


@dataclass(frozen=True, slots=True)
class BackgroundTask:
    """A non-ML task (a PageRank worker, §V-A) pinned to ``node``."""

    node: int
    cpu: float
    memory_mb: float


@dataclass(frozen=True, slots=True)
class TaskPlacement:
    """Where each partition of one job runs: ``nodes[i]`` hosts partition i."""

    nodes: tuple[int, ...]


def load_of(network: EdgeNetwork, jobs: Sequence[Job], placements: Sequence[TaskPlacement],
            background: Sequence[BackgroundTask] = ()) -> NDArray[np.float64]:
    """D_k(d_j) (Eq. 1): the (n, 2) total CPU and memory demand of the tasks on each node."""
    load = np.zeros((network.n, 2))
    for t in background:
        load[t.node] += (t.cpu, t.memory_mb)
    for job, place in zip(jobs, placements, strict=True):
        if len(place.nodes) != len(job.partitions):
            raise ConfigError(f"job {job.name!r}: {len(job.partitions)} partitions, "
                              f"{len(place.nodes)} hosts", field="placement")
        np.add.at(load, list(place.nodes), job.demand())
    return load


def utilisation(network: EdgeNetwork, load: NDArray[np.float64]) -> NDArray[np.float64]:
    """u_k(d_j) = D_k(d_j) / C_k(d_j) (Eq. 1), shape (n, 2)."""
    return np.asarray(load / network.capacity(), dtype=np.float64)


def combined_utilisation(u: NDArray[np.float64]) -> NDArray[np.float64]:
    """u(d_j) = Π_k u_k(d_j) (Eq. 2), shape (n,)."""
    return np.asarray(np.prod(u, axis=-1), dtype=np.float64)


def overloaded(u: NDArray[np.float64], alpha: float = ALPHA) -> NDArray[np.bool_]:
    """Whether u_k(d_j) > α for any k (§III), shape (n,)."""
    return np.asarray(np.any(u > alpha + 1e-12, axis=-1))


def slowdown(u_node: NDArray[np.float64], alpha: float = ALPHA) -> float:
    """How much slower an overloaded node computes: CPU shared beyond α stretches compute by
    u_cpu/α; memory beyond α swaps, (u_mem/α)^2. 1.0 when the node is not overloaded."""
    cpu = max(1.0, float(u_node[0]) / alpha)
    mem: float = max(1.0, float(u_node[1]) / alpha) ** SWAP_EXPONENT
    return cpu * mem


def transfer_s(network: EdgeNetwork, a: int, b: int, size_mb: float) -> float:
    """Seconds to send ``size_mb`` from node a to node b (0 on the same node)."""
    return 0.0 if a == b else size_mb * 8.0 / float(network.bandwidth_mbps[a, b])


def iteration_time_s(job: Job, placement: TaskPlacement, network: EdgeNetwork,
                     load: NDArray[np.float64], alpha: float = ALPHA) -> float:
    """One training iteration of ``job`` under ``placement`` (no pipelining, [8]):
    Σ_i gflop_i / (host_gflops · C_cpu(host_i)) · slowdown(host_i)  (forward + backward)
    + the batch from the origin to the first host + 2 · out_mb_i / bw between consecutive
    hosts (activation forward, its gradient back). ``load`` must include the job itself."""
    u = utilisation(network, load)
    total = transfer_s(network, job.origin, placement.nodes[0], job.input_mb)
    for i, (p, host) in enumerate(zip(job.partitions, placement.nodes, strict=True)):
        speed = network.host_gflops * network.nodes[host].cpu
        total += p.gflop / speed * slowdown(u[host], alpha)
        if i + 1 < len(placement.nodes):
            total += 2.0 * transfer_s(network, host, placement.nodes[i + 1], p.out_mb)
    return total


def job_completion_time_s(job: Job, placement: TaskPlacement, network: EdgeNetwork,
                          load: NDArray[np.float64], alpha: float = ALPHA) -> float:
    """JCT O (§V-C): ``n_iterations`` iterations at the current load."""
    return job.n_iterations * iteration_time_s(job, placement, network, load, alpha)
