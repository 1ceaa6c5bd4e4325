"""The partition-and-placement problem of SEIFER §3 and its plan."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from edgewise.errors import ConfigError
from edgewise.nn.chain import ModelChain

__all__ = ["LAMBDA", "PipelinePlan", "PipelineProblem", "bottleneck_s"]

LAMBDA = 1.44 * 2.1  # SEIFER Eq. 4: ZFP × LZ4 average compression ratio


@dataclass(frozen=True, slots=True)
class PipelineProblem:
    """A chain to place on compute nodes. ``bandwidth_mbps`` is an (n+1)×(n+1) symmetric
    matrix over [dispatcher, node 1, ..., node n] (0 on the diagonal or where no link);
    ``memory_bytes`` is each node's capacity κ; ``gflops`` each node's compute speed (None:
    transfers only, as the paper). ``dispatcher_transfer`` scores the dispatcher's send of
    the model input η(p_0) to the first partition (the deployed pipeline must send it);
    False scores the compute partitions' transfers only, as the paper's §6.1 simulations
    do (Algorithm 1 builds ``bestPath`` with the dispatcher partition Δ but returns
    ``minPath`` without it)."""

    chain: ModelChain
    nodes: tuple[str, ...]
    memory_bytes: tuple[int, ...]
    bandwidth_mbps: NDArray[np.float64] = field(repr=False)
    gflops: tuple[float, ...] | None = None
    compression: float = LAMBDA
    dispatcher: str = "dispatcher"
    dispatcher_transfer: bool = True

    def __post_init__(self) -> None:
        n = len(self.nodes)
        if len(self.memory_bytes) != n:
            raise ConfigError("one memory figure per node", field="memory_bytes")
        if self.bandwidth_mbps.shape != (n + 1, n + 1):
            raise ConfigError(f"bandwidth must be {(n + 1, n + 1)}", field="bandwidth_mbps")
        if self.gflops is not None and len(self.gflops) != n:
            raise ConfigError("one GFLOP/s figure per node", field="gflops")


@dataclass(frozen=True, slots=True)
class PipelinePlan:
    """Partition ``k`` runs segments ``cuts[k] .. cuts[k + 1] - 1`` on node ``nodes[k]``
    (indices into ``problem.nodes``, all distinct); ``cuts[0] == 0`` and ``cuts[-1]`` is the
    number of segments."""

    cuts: tuple[int, ...]
    nodes: tuple[int, ...]
    bottleneck_s: float
    policy: str

    @property
    def n_partitions(self) -> int:
        return len(self.nodes)


def _link_s(problem: PipelineProblem, size_bytes: float, a: int, b: int) -> float:
    bw = problem.bandwidth_mbps[a, b]
    return float("inf") if bw <= 0 else size_bytes / problem.compression * 8 / (bw * 1e6)


def bottleneck_s(problem: PipelineProblem, cuts: tuple[int, ...], nodes: tuple[int, ...],
                 include_compute: bool = False) -> float:
    """The pipeline's bottleneck latency (Eq. 2–3): the slowest transfer — dispatcher to the
    first partition (η(p_0)/λ, unless ``problem.dispatcher_transfer`` is False), and
    between consecutive partitions (η(last cut)/λ) over the link's bandwidth — and, with
    ``include_compute``, the slowest stage's compute time (FLOPs / node GFLOP/s). ``inf``
    if a partition does not fit its node's memory."""
    chain, worst = problem.chain, 0.0
    for k, node in enumerate(nodes):
        if sum(chain.memory_bytes[cuts[k]:cuts[k + 1]]) > problem.memory_bytes[node]:
            return float("inf")
        if k > 0 or problem.dispatcher_transfer:
            src = 0 if k == 0 else nodes[k - 1] + 1
            size = chain.input_bytes if k == 0 else chain.output_bytes[cuts[k] - 1]
            worst = max(worst, _link_s(problem, size, src, node + 1))
        if include_compute and problem.gflops is not None:
            stage = sum(chain.flops[cuts[k]:cuts[k + 1]]) / (problem.gflops[node] * 1e9)
            worst = max(worst, stage)
    return worst
