"""Simulating a partition-and-placement plan (SEIFER §3, Eq. 2–3): per stage, the time of its
input transfer and of its compute; the bottleneck, steady-state throughput and one request's
latency through the pipeline.

A policy plans, :func:`simulate` scores the plan from the problem alone, deterministically.
As the problem models it, every link and every node is a pipeline resource busy for its own
time per request, so the pipeline admits one request per bottleneck (Eq. 3) in steady state,
and a request crosses every stage once (its latency is the sum of the times on its way).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from edgewise.errors import InfeasibleError
from edgewise.pipeline.policies import Policy, get_policy
from edgewise.pipeline.problem import PipelinePlan, PipelineProblem

__all__ = ["PipelineOutcome", "check_plan", "simulate", "stage_times"]

Seed = int | np.random.Generator


@dataclass(frozen=True, slots=True)
class PipelineOutcome:
    """A plan simulated on its problem.

    ``transfer_s[k]`` is the send of partition ``k``'s input over the link into its node
    (``k = 0``: the dispatcher's η(p_0), 0 when the problem does not score it, as the paper's
    §6.1); ``compute_s[k]`` its segments' FLOPs over the node's GFLOP/s (0 without
    ``gflops``, as the paper's Eq. 2); ``return_s`` the last partition's output sent back to
    the dispatcher (0 when the dispatcher is outside the scoring). ``bottleneck_s`` is Eq. 3,
    the slowest of the transfers and computes (the result's return is not in Eq. 3);
    ``throughput_rps`` = 1 / bottleneck (inf for a plan that sends and computes nothing);
    ``latency_s`` the sum of every time on one request's way, return included.
    ``timings`` holds the policy's wall-clock ``decision_seconds``."""

    policy: str
    plan: PipelinePlan
    transfer_s: tuple[float, ...]
    compute_s: tuple[float, ...]
    return_s: float
    memory_bytes: tuple[int, ...]
    bottleneck_s: float
    throughput_rps: float
    latency_s: float
    timings: Mapping[str, float] = field(default_factory=dict, compare=False)


def check_plan(problem: PipelineProblem, plan: PipelinePlan) -> None:
    """InfeasibleError unless ``plan`` cuts the whole chain into contiguous partitions on
    distinct nodes of ``problem`` that each hold their partition's memory."""
    cuts, nodes, n_seg = plan.cuts, plan.nodes, problem.chain.n_segments
    if len(cuts) != len(nodes) + 1 or not nodes:
        raise InfeasibleError(f"{len(nodes)} partitions need {len(nodes) + 1} cuts, got {cuts}")
    if cuts[0] != 0 or cuts[-1] != n_seg or any(b <= a for a, b in itertools.pairwise(cuts)):
        raise InfeasibleError(f"cuts {cuts} must rise strictly from 0 to {n_seg}")
    if len(set(nodes)) != len(nodes) or not all(0 <= v < len(problem.nodes) for v in nodes):
        raise InfeasibleError(f"nodes {nodes} must be distinct indices of the "
                              f"{len(problem.nodes)} nodes")
    for k, v in enumerate(nodes):
        need = sum(problem.chain.memory_bytes[cuts[k]:cuts[k + 1]])
        if need > problem.memory_bytes[v]:
            raise InfeasibleError(f"partition {k} needs {need} B, node {problem.nodes[v]} "
                                  f"has {problem.memory_bytes[v]} B")


def _send_s(problem: PipelineProblem, size_bytes: int, a: int, b: int) -> float:
    """Seconds to send ``size_bytes`` (compressed by λ, Eq. 4) from vertex ``a`` to ``b`` of
    the bandwidth matrix (0: the dispatcher); inf where there is no link."""
    mbps = float(problem.bandwidth_mbps[a, b])
    return float("inf") if mbps <= 0 else size_bytes / problem.compression * 8 / (mbps * 1e6)


def stage_times(problem: PipelineProblem, plan: PipelinePlan
                ) -> tuple[tuple[float, ...], tuple[float, ...], float]:
    """(transfer_s, compute_s, return_s) of :class:`PipelineOutcome` for a checked plan."""
    chain, cuts, nodes = problem.chain, plan.cuts, plan.nodes
    hosts = [0, *(v + 1 for v in nodes)]  # bandwidth-matrix vertices, dispatcher first
    transfers = []
    for k in range(len(nodes)):
        size = chain.input_bytes if k == 0 else chain.output_bytes[cuts[k] - 1]
        scored = k > 0 or problem.dispatcher_transfer
        transfers.append(_send_s(problem, size, hosts[k], hosts[k + 1]) if scored else 0.0)
    speeds = problem.gflops
    compute = tuple(0.0 if speeds is None else
                    sum(chain.flops[cuts[k]:cuts[k + 1]]) / (speeds[v] * 1e9)
                    for k, v in enumerate(nodes))
    back = _send_s(problem, chain.output_bytes[-1], hosts[-1], 0) \
        if problem.dispatcher_transfer else 0.0
    return tuple(transfers), compute, back


def _resolve(policy: str | Policy) -> Callable[[PipelineProblem, np.random.Generator],
                                               PipelinePlan]:
    return get_policy(policy) if isinstance(policy, str) else policy


def simulate(problem: PipelineProblem, policy: str | Policy, *, seed: Seed = 0
             ) -> PipelineOutcome:
    """Plan ``problem`` with ``policy`` (a registered name or a ``(problem, rng) -> plan``
    callable) and simulate the plan.

    Parameters
    ----------
    problem : PipelineProblem
        The chain and the cluster.
    policy : str or callable
        The policy, by name (:data:`~edgewise.pipeline.policies.REGISTRY`) or as a function.
    seed : int or numpy.random.Generator
        Seed of the policy's generator, or the generator itself (as networkx's ``seed``),
        so that several policies can share one stream.

    Returns
    -------
    PipelineOutcome
        Deterministic for a seed, apart from ``timings``.

    Raises
    ------
    InfeasibleError
        The policy finds no plan, or returns one that does not fit (:func:`check_plan`).
    """
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    started = time.perf_counter()
    plan = _resolve(policy)(problem, rng)
    decided = time.perf_counter() - started
    check_plan(problem, plan)
    transfer, compute, back = stage_times(problem, plan)
    bottleneck = max((*transfer, *compute))
    memory = tuple(sum(problem.chain.memory_bytes[a:b])
                   for a, b in itertools.pairwise(plan.cuts))
    return PipelineOutcome(
        plan.policy, plan, transfer, compute, back, memory, bottleneck,
        float("inf") if bottleneck == 0 else 1.0 / bottleneck,
        sum(transfer) + sum(compute) + back, {"decision_seconds": decided})
