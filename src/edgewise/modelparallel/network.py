"""Random edge networks with Table I's resources: clusters of 5 nodes placed by proximity."""

from __future__ import annotations

import numpy as np

from edgewise.errors import ConfigError
from edgewise.modelparallel.problem import EdgeNetwork, EdgeNode

__all__ = ["CLUSTER_SIZE", "HOST_GHZ", "PRETRAIN", "PRETRAIN_NODES", "TABLE_I",
           "pretraining_network", "random_network"]

CLUSTER_SIZE = 5  # §V-A: each cluster has 5 edge nodes
# Table I: memory MB, CPU host-ratio range, bandwidth Mbps, for each environment.
TABLE_I: dict[str, tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]] = {
    "container": ((768, 1024, 1536, 2048, 4096), (0.3, 1.0), (50, 100, 200, 500, 1000)),
    "real": ((1024, 2048, 4096), (0.25, 0.5, 1.0), (160, 800)),  # 20 and 100 MBps
}
AREA_M = 100.0  # a cluster's nodes lie in a square of this side
RANGE_M = (60.0, 120.0)  # transmission range, uniform
# §V-A "RL Training": nodes, CPU GHz, memory MB, bandwidth MBps, each uniform in its range.
PRETRAIN_NODES = (2, 10)
PRETRAIN = {"cpu_ghz": (0.5, 2.0), "memory_mb": (64.0, 4096.0),
            "bandwidth_mbyteps": (128.0, 1000.0)}
HOST_GHZ = 2.5  # clock of one m5ad.4xlarge core (§V-A's host): host ratio = GHz / HOST_GHZ


def random_network(n_edges: int, rng: np.random.Generator,
                   environment: str = "container") -> EdgeNetwork:
    """``n_edges`` nodes (a multiple of 5) in clusters of 5; memory, CPU and each node's link
    bandwidth from Table I (§V-A: "the resources of the devices were assigned in a
    round-robin way": round-robin over the memory and over the bandwidth values; CPU, a
    continuous range in the container environment, uniform in it, or from its set for the
    real one).

    Raises
    ------
    ConfigError
        If ``n_edges`` is not a positive multiple of 5 or the environment is unknown.
    """
    if n_edges < CLUSTER_SIZE or n_edges % CLUSTER_SIZE:
        raise ConfigError(f"must be a positive multiple of {CLUSTER_SIZE}, got {n_edges}",
                          field="n_edges")
    if environment not in TABLE_I:
        raise ConfigError(f"unknown environment {environment!r}; known: "
                          f"{', '.join(TABLE_I)}", field="environment")
    mems, cpus, bws = TABLE_I[environment]
    nodes = []
    for j in range(n_edges):
        cpu = (float(rng.uniform(cpus[0], cpus[1])) if environment == "container"
               else float(rng.choice(cpus)))
        x = float(rng.uniform(0.0, AREA_M)) + (j // CLUSTER_SIZE) * 10 * AREA_M  # far apart
        y = float(rng.uniform(0.0, AREA_M))
        nodes.append(EdgeNode(f"edge-{j}", cpu=round(cpu, 3), memory_mb=float(mems[j % len(mems)]),
                              bandwidth_mbps=float(bws[j % len(bws)]), x_m=x, y_m=y,
                              range_m=float(rng.uniform(RANGE_M[0], RANGE_M[1]))))
    return EdgeNetwork(tuple(nodes), cluster_of=tuple(j // CLUSTER_SIZE for j in range(n_edges)))


def pretraining_network(rng: np.random.Generator) -> EdgeNetwork:
    """One cluster for offline pre-training, drawn as §V-A ("RL Training") says: "we consider
    the number of edge nodes in the range of [2,10]. For each edge node, CPU is chosen randomly
    from range [0.5,2] GHz, memory is randomly chosen from range [64,4096] MB and the bandwidth
    across pair of edge nodes is randomly chosen from range [128,1000] MBps". CPU becomes a host
    ratio at ``HOST_GHZ`` per host core; bandwidth is drawn per node, for its link (a pair's
    lone transfer runs at the slower link); positions and ranges as in `random_network`."""
    n = int(rng.integers(PRETRAIN_NODES[0], PRETRAIN_NODES[1] + 1))
    nodes = []
    for j in range(n):
        ghz = float(rng.uniform(*PRETRAIN["cpu_ghz"]))
        nodes.append(EdgeNode(f"edge-{j}", cpu=round(ghz / HOST_GHZ, 3),
                              memory_mb=float(rng.uniform(*PRETRAIN["memory_mb"])),
                              bandwidth_mbps=8.0 * float(rng.uniform(
                                  *PRETRAIN["bandwidth_mbyteps"])),  # MBps -> Mbps
                              x_m=float(rng.uniform(0.0, AREA_M)),
                              y_m=float(rng.uniform(0.0, AREA_M)),
                              range_m=float(rng.uniform(RANGE_M[0], RANGE_M[1]))))
    return EdgeNetwork(tuple(nodes), cluster_of=(0,) * n)
