"""SROLE's edge network, training jobs and task placements (§III, §IV-B, Table I).

Units: CPU in *host ratio* (Table I: the share of one host core a container gets; 1.0 = one
core of ``host_gflops`` GFLOP/s), memory in MB (10^6 bytes), bandwidth in Mbps (10^6 bit/s),
data sizes in MB, time in seconds, positions and ranges in metres. The three resource types
of §III ("CPU, memory, and bandwidth") are the columns of every load or capacity array, in
the order of ``RESOURCES``. The execution model (load, utilisation, JCT) is in ``jct``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from edgewise.errors import ConfigError

__all__ = ["ALPHA", "CPU", "HOST_GFLOPS", "MEM", "NET", "OVERLOAD_MODELS", "RESOURCES",
           "BackgroundTask", "EdgeNetwork", "EdgeNode", "Job", "Partition", "TaskPlacement"]

ALPHA = 0.9  # §V-A: overload threshold α
HOST_GFLOPS = 20.0  # sustained training GFLOP/s of one host core (host ratio 1.0), assumption
RESOURCES = ("cpu", "memory", "bandwidth")  # §III; column k of load and capacity arrays
CPU, MEM, NET = 0, 1, 2
OVERLOAD_MODELS = ("processor-sharing", "quadratic", "invalid")
"""How a node above capacity slows its tasks (`jct.slowdown`); the first is the default."""


@dataclass(frozen=True, slots=True)
class EdgeNode:
    """An edge node d_j: capacities C_cpu (host ratio), C_mem (MB) and C_bw (Mbps, its link,
    Table I), its position and its transmission range (it reaches the nodes within
    ``range_m``)."""

    name: str
    cpu: float
    memory_mb: float
    bandwidth_mbps: float = 1000.0
    x_m: float = 0.0
    y_m: float = 0.0
    range_m: float = math.inf

    def __post_init__(self) -> None:
        for name in ("cpu", "memory_mb", "bandwidth_mbps"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"node {self.name!r}: must be > 0, got "
                                  f"{getattr(self, name)}", field=name)


@dataclass(frozen=True, slots=True)
class EdgeNetwork:
    """Edge nodes grouped into clusters (``cluster_of[j]``, §III: 5 nodes each). A transfer
    between two nodes goes over both nodes' links, so it runs at most at the slower link's
    bandwidth; transfers that share a link share it (`jct.transfer_s`).

    A node's neighbours are the other nodes of its cluster within its transmission range
    (§I); ``candidates(j)`` is the node itself followed by its neighbours.
    """

    nodes: tuple[EdgeNode, ...]
    cluster_of: tuple[int, ...] = ()
    host_gflops: float = HOST_GFLOPS
    _cap: NDArray[np.float64] = field(init=False, repr=False, compare=False)
    _cands: tuple[tuple[int, ...], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        n = len(self.nodes)
        if n == 0:
            raise ConfigError("the network has no node", field="nodes")
        if self.cluster_of and len(self.cluster_of) != n:
            raise ConfigError(f"needs {n} entries", field="cluster_of")
        cap = np.array([[d.cpu, d.memory_mb, d.bandwidth_mbps] for d in self.nodes],
                       dtype=np.float64)
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
        """C_k(d_j) as an (n, 3) read-only array: CPU (host ratio), memory (MB), bandwidth
        (Mbps)."""
        return self._cap

    def pair_mbps(self, a: int, b: int) -> float:
        """The bandwidth of a lone transfer between a and b: the slower of the two links."""
        return float(min(self._cap[a, NET], self._cap[b, NET]))


@dataclass(frozen=True, slots=True)
class Partition:
    """A layer partition (a task): per training iteration ``gflop`` (forward + backward, the
    whole batch); ``cpu`` its CPU demand b_cpu (host ratio kept busy at the job's data rate);
    ``memory_mb`` b_mem (weights, gradients, optimizer state, stored activations);
    ``out_mb`` the activation it sends the next partition (its gradient comes back) and
    ``out_mbps`` that traffic's rate at the job's data rate: the bandwidth it demands on
    both nodes' links when the next partition runs elsewhere."""

    name: str
    gflop: float
    cpu: float
    memory_mb: float
    out_mb: float
    out_mbps: float = 0.0


@dataclass(frozen=True, slots=True)
class Job:
    """A DL training job initiated at node ``origin``: its partitions in model order, the
    training batch ``input_mb`` the origin sends the first partition (at ``input_mbps`` at
    the job's data rate), and its iterations."""

    name: str
    model: str
    origin: int
    partitions: tuple[Partition, ...]
    input_mb: float = 0.0
    n_iterations: int = 50
    input_mbps: float = 0.0

    def __post_init__(self) -> None:
        if not self.partitions:
            raise ConfigError(f"job {self.name!r} has no partition", field="partitions")
        if self.n_iterations < 1:
            raise ConfigError("must be at least 1", field="n_iterations")

    def demand(self) -> NDArray[np.float64]:
        """b_k(l_i) as an (m, 3) array: CPU, memory, and the bandwidth of the layer's two
        transfers (its input and its output, at the job's data rate) — what it demands of a
        link when its neighbours in the chain run elsewhere (Eq. 3's b_bw)."""
        ins = [self.input_mbps, *(p.out_mbps for p in self.partitions[:-1])]
        return np.array([[p.cpu, p.memory_mb, i + p.out_mbps]
                         for p, i in zip(self.partitions, ins, strict=True)], dtype=np.float64)


@dataclass(frozen=True, slots=True)
class BackgroundTask:
    """A non-ML task (a PageRank worker, §V-A) pinned to ``node``, with its demands."""

    node: int
    cpu: float
    memory_mb: float
    bandwidth_mbps: float = 0.0


@dataclass(frozen=True, slots=True)
class TaskPlacement:
    """Where each partition (task) of one job runs: ``nodes[i]`` hosts partition i."""

    nodes: tuple[int, ...]
