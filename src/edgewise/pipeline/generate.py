"""Random SEIFER instances (§6.1): a random geometric WiFi cluster with random memories."""

from __future__ import annotations

import math

import numpy as np

from edgewise.cluster.topology import seifer_bandwidth_mbps, seifer_positions
from edgewise.nn.chain import ModelChain
from edgewise.pipeline.problem import PipelineProblem

__all__ = ["MB", "random_instance"]

MB = 2**20
"""Bytes per MB of node memory (the paper's 64–512 MB capacities)."""


def random_instance(n_nodes: int, chain: ModelChain, rng: np.random.Generator, *,
                    memory_mb: tuple[float, float] = (64.0, 512.0),
                    gflops: tuple[float, float] | None = None) -> PipelineProblem:
    """SEIFER §6.1's random cluster for ``chain``.

    The dispatcher and ``n_nodes`` nodes are placed around the router with
    :func:`~edgewise.cluster.topology.seifer_positions` (each coordinate uniform on
    ``(-B, -1) ∪ (1, B)``, Eq. 13–14); each device's radio gets Eq. 12's bandwidth for its
    distance, and a pair talks through the router at the slower of the two (as
    :func:`~edgewise.cluster.topology.random_geometric`). Node memory is uniform in
    ``memory_mb`` (whole bytes); ``gflops``, if given, uniform in that range.

    Parameters
    ----------
    n_nodes : int
        Compute nodes (the dispatcher is extra, at index 0 of the bandwidth matrix).
    chain : ModelChain
        The model to place.
    rng : numpy.random.Generator
        Source of positions and memories.
    memory_mb : tuple of float
        Range of node memory in MB (2**20 bytes); equal bounds give homogeneous nodes.
    gflops : tuple of float or None
        Range of node compute speed, or None for transfer-only (the paper's Eq. 2).

    Returns
    -------
    PipelineProblem

    Examples
    --------
    >>> chain = ModelChain("m", 10, (5, 1), (1, 1), (1.0, 1.0))
    >>> p = random_instance(3, chain, np.random.default_rng(0))
    >>> p.bandwidth_mbps.shape, bool((p.bandwidth_mbps == p.bandwidth_mbps.T).all())
    ((4, 4), True)
    """
    if n_nodes < 1:
        raise ValueError(f"n_nodes must be ≥ 1, got {n_nodes}")
    xy = seifer_positions(n_nodes + 1, rng)
    radio = np.array([seifer_bandwidth_mbps(float(math.hypot(x, y))) for x, y in xy])
    bandwidth = np.minimum.outer(radio, radio)
    np.fill_diagonal(bandwidth, 0.0)
    low, high = memory_mb
    memory = tuple(int(m * MB) for m in rng.uniform(low, high, size=n_nodes))
    speed = None if gflops is None else tuple(
        float(g) for g in rng.uniform(gflops[0], gflops[1], size=n_nodes))
    names = tuple(f"n{i:02d}" for i in range(n_nodes))
    return PipelineProblem(chain, names, memory, bandwidth, speed)
