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

from edgewise.pipeline.dispatcher import Dispatcher, Result
from edgewise.runtime.ray_cluster import RayRuntime

__all__ = ["Dispatcher", "PipelineRun", "Result", "run_pipeline", "stream"]


@dataclass(frozen=True, slots=True)
class PipelineRun:
    """What :func:`run_pipeline` measured: outputs in request order, throughput over the
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


def stream(dispatcher: Dispatcher, inputs: Iterable[np.ndarray[Any, Any]], *,
           on_result: Callable[[Dispatcher, Result], None] | None = None) -> PipelineRun:
    """Stream ``inputs`` through a deployed pipeline and measure it (see :func:`run_pipeline`);
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
    )


def run_pipeline(runtime: RayRuntime, model: nn.Module, plan_devices: Iterable[str],
                 cuts: Iterable[int], inputs: Iterable[np.ndarray[Any, Any]], *,
                 on_result: Callable[[Dispatcher, Result], None] | None = None,
                 **dispatcher_options: Any) -> PipelineRun:
    """Deploy ``model`` split at ``cuts`` on ``plan_devices``, stream ``inputs`` through it,
    measure, and tear the pipeline down.

    Parameters
    ----------
    runtime : RayRuntime
        The Ray instance hosting the cluster.
    model : nn.Module
        The model to partition.
    plan_devices : sequence of str
        Device of each partition; from a plan, ``[problem.nodes[i] for i in plan.nodes]``.
    cuts : sequence of int
        Partition boundaries, ``plan.cuts`` for a chain whose segments are the children.
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
    """
    dispatcher = Dispatcher(runtime, model, plan_devices, cuts, **dispatcher_options)
    try:
        return stream(dispatcher, inputs, on_result=on_result)
    finally:
        dispatcher.close()
