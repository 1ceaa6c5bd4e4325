"""Carry a partition-and-placement plan out on Ray (SEIFER §4.3–4.4): a dispatcher feeds a
chain of stage actors, collects results in request order, survives stage failures and
switches models without dropping a request."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from torch import nn

from edgewise.errors import ConfigError, InfeasibleError
from edgewise.pipeline.dispatcher import DEFAULT_WINDOW, Dispatcher, Result
from edgewise.pipeline.problem import PipelinePlan, PipelineProblem
from edgewise.pipeline.sim import PipelineOutcome, simulate
from edgewise.runtime.ray_cluster import RayRuntime

__all__ = ["Dispatcher", "PipelineRun", "Result", "check_memory", "execute", "resend_after_s",
           "stream"]

RESEND_FLOOR_S = 30.0
"""The dispatcher's default resend deadline: the least a request waits before it is
re-sent with every stage healthy."""
RESEND_MARGIN = 4.0
"""How many times its planned wait a request may take before it is re-sent: the plan's
speeds are profiled, and a testbed node served 0.98 requests/s where its profile said
0.73 (2026-12-02), so the margin is wide."""


def resend_after_s(outcome: PipelineOutcome, window: int) -> float:
    """The resend deadline for a plan and window: a request waits behind up to ``window``
    others at the bottleneck and then crosses the pipeline (Little's law), times
    :data:`RESEND_MARGIN`, and never below :data:`RESEND_FLOOR_S`. A fixed 30 s would
    re-send requests that are only queued once a request takes seconds (a micro-batch of
    8 ViT inputs on one Pi), doubling the load it waits on."""
    planned_wait_s = window * outcome.bottleneck_s + outcome.latency_s
    return max(RESEND_FLOOR_S, RESEND_MARGIN * planned_wait_s)


@dataclass(frozen=True, slots=True)
class PipelineRun:
    """What :func:`execute` measured: outputs in request order, throughput over the
    streaming phase (deployment excluded), end-to-end latency percentiles, bytes sent
    (``Dispatcher.byte_counts``) and fault handling counts."""

    outputs: list[np.ndarray[Any, Any]] = field(repr=False)
    request_ids: list[int] = field(repr=False)
    versions: list[int] = field(repr=False)
    seconds: float
    throughput_rps: float
    latency_p50_s: float
    latency_p95_s: float
    latency_p99_s: float
    bytes: dict[str, int] = field(repr=False)
    restarts: int
    resends: int
    duplicates: int
    stage_timings: tuple[dict[str, float], ...] = field(default=(), repr=False)


def stream(dispatcher: Dispatcher, inputs: Iterable[np.ndarray[Any, Any]], *,
           on_result: Callable[[Dispatcher, Result], None] | None = None) -> PipelineRun:
    """Stream ``inputs`` through a deployed pipeline and measure it (see :func:`execute`);
    ``restarts``, ``resends``, ``duplicates`` and ``bytes`` count from the dispatcher's start."""
    results: list[Result] = []
    start = time.perf_counter()
    for result in dispatcher.run(inputs):
        results.append(result)
        if on_result is not None:
            on_result(dispatcher, result)
    seconds = time.perf_counter() - start
    latencies = np.array([r.latency_s for r in results] or [0.0])
    p50, p95, p99 = (float(v) for v in np.percentile(latencies, [50, 95, 99]))
    return PipelineRun(
        [r.output for r in results], [r.request_id for r in results],
        [r.version for r in results], seconds,
        len(results) / seconds if seconds > 0 else 0.0, p50, p95, p99,
        dispatcher.byte_counts(), dispatcher.restarts, dispatcher.resends, dispatcher.duplicates,
        tuple(dispatcher.stage_timings()),
    )


def check_memory(runtime: RayRuntime, problem: PipelineProblem, plan: PipelinePlan) -> None:
    """Refuse, before anything starts, a plan whose partition does not fit its device's
    memory in the runtime's cluster (InfeasibleError naming the device and the bytes)."""
    chain = problem.chain
    for k, node in enumerate(plan.nodes):
        device = runtime.cluster.device(problem.nodes[node])
        need = sum(chain.memory_bytes[plan.cuts[k]:plan.cuts[k + 1]])
        have = int(device.memory_mb * 2**20)
        if need > have:
            raise InfeasibleError(f"stage {k} of {chain.name!r} needs {need} bytes; device "
                                  f"{device.name!r} has {have} bytes")


def execute(runtime: RayRuntime, problem: PipelineProblem, plan: PipelinePlan, /, *,
            model: nn.Module | None, inputs: Iterable[np.ndarray[Any, Any]],
            on_result: Callable[[Dispatcher, Result], None] | None = None,
            **dispatcher_options: Any) -> PipelineRun:
    """Carry ``plan`` out: deploy ``model`` split at ``plan.cuts`` on the plan's nodes, stream
    ``inputs`` through it, measure, and tear the pipeline down.

    Parameters
    ----------
    runtime : RayRuntime
        The Ray instance hosting the cluster; its devices include the plan's nodes.
    problem : PipelineProblem
        The problem the plan solves: its ``nodes`` name the devices, its ``dispatcher`` is
        where the dispatcher's endpoint runs when the cluster has such a device.
    plan : PipelinePlan
        The plan a policy made; partition ``k`` runs segments ``cuts[k] .. cuts[k + 1] - 1``
        on ``problem.nodes[plan.nodes[k]]``.
    model : nn.Module or None
        The model whose segments the problem's chain describes (for the default splitter,
        an ``nn.Sequential`` with one child per segment); None when the dispatcher option
        ``payloads`` gives each stage its slice.
    inputs : iterable of ndarray
        One request each.
    on_result : Callable or None
        Called with the dispatcher and each result as it is yielded, in order (a hook to
        switch models or inject faults mid-stream).
    **dispatcher_options
        Keyword arguments of :class:`Dispatcher` (``codec``, ``window``, ``restart``...).

    Returns
    -------
    PipelineRun
        Outputs in request order, throughput over the streaming phase (deployment
        excluded), latency percentiles, bytes, restarts.

    Raises
    ------
    ConfigError
        A node of the plan is not a device of the runtime's cluster.
    InfeasibleError
        A partition does not fit its device's memory (checked before anything starts).
    """
    devices = [problem.nodes[i] for i in plan.nodes]
    known = set(runtime.cluster.device_names)
    missing = [d for d in devices if d not in known]
    if missing:
        raise ConfigError(f"the cluster has no device {missing[0]!r} of the plan", field="nodes")
    check_memory(runtime, problem, plan)
    if problem.dispatcher in known:
        dispatcher_options.setdefault("dispatcher_device", problem.dispatcher)
    window = int(dispatcher_options.get("window", DEFAULT_WINDOW))
    dispatcher_options.setdefault("request_timeout_s", resend_after_s(
        simulate(problem, lambda *_: plan), window))
    dispatcher = Dispatcher(runtime, model, devices, plan.cuts, **dispatcher_options)
    try:
        return stream(dispatcher, inputs, on_result=on_result)
    finally:
        dispatcher.close()
