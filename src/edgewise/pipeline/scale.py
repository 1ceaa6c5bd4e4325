"""Models too big for one device, pipelined over many (PipeEdge's setting): each device
type's speed profiled where it runs, the cluster's memory, compute and links as a
placement problem, and a plan served from weight shards with enough requests in flight
to keep every stage busy, its per-stage busy fractions and peak memory measured."""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import ray
import torch
from numpy.typing import NDArray

from edgewise.cluster.model import Cluster
from edgewise.errors import ConfigError
from edgewise.nn.chain import ModelChain
from edgewise.nn.large import LargeModel
from edgewise.nn.slices import state_bytes
from edgewise.pipeline.dispatcher import Dispatcher, Result
from edgewise.pipeline.problem import PipelinePlan, PipelineProblem
from edgewise.pipeline.run import PipelineRun, execute
from edgewise.pipeline.sim import PipelineOutcome, simulate
from edgewise.runtime.ray_cluster import RayRuntime
from edgewise.runtime.slice_profile import MIN_SECONDS, time_slice

__all__ = ["RESERVE_MB", "STEADY_WINDOWS", "WINDOW_PER_STAGE", "Busy", "ScaleRun",
           "cluster_problem", "hop_rates_bps", "point_example", "profile_gflops", "serve",
           "stage_peak", "steady_requests", "steady_span", "whole_model_outputs", "window_for"]

RESERVE_MB = 512
"""Memory a stage's process needs besides its slice (Python, torch, Ray's worker): the
planner offers each device its memory less this."""


def point_example(lm: LargeModel, point: int, seed: int = 0) -> np.ndarray[Any, Any]:
    """A random tensor shaped as the value at candidate point ``point`` (the model's
    input at 0), from the trace's shapes."""
    if point == 0:
        return lm.example.numpy()
    node = {n.name: n for n in lm.partitioned.traced.module.graph.nodes}[
        lm.partitioned.points[point]]
    meta = node.meta.get("val", node.meta.get("tensor_meta"))
    shape = tuple(int(s) for s in meta.shape)
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _one_block(chain: ModelChain, blocks: int) -> tuple[int, int]:
    """Segments from the middle of the chain holding about 1/``blocks`` of its FLOPs."""
    start, total = chain.n_segments // 2, sum(chain.flops)
    end, acc = start, 0.0
    while end < chain.n_segments and acc < total / max(blocks, 1):
        acc, end = acc + chain.flops[end], end + 1
    return start, max(end, start + 1)


def profile_gflops(runtime: RayRuntime, lm: LargeModel, devices: Sequence[str], *,
                   repeats: int = 2, min_seconds: float = MIN_SECONDS) -> dict[str, float]:
    """Each device's speed in GFLOP/s of the chain's FLOPs per wall second, as PipeEdge
    profiles: one device of each type runs about one block of the model (the mean of at
    least ``repeats`` passes over at least ``min_seconds``, after a warm-up:
    ``runtime.slice_profile``) and its type shares the figure."""
    chain = lm.partitioned.chain
    a, b = _one_block(chain, int(lm.spec.kwargs().get("num_hidden_layers", 1)))
    skeleton, ref = lm.payloads((a, b))[0]
    x, flops = point_example(lm, a), sum(chain.flops[a:b])
    memory_mb = 64 + math.ceil(state_bytes(skeleton) / 2**20)
    by_type: dict[str, float] = {}
    out = {}
    for name in devices:
        kind = runtime.cluster.device(name).type
        if kind not in by_type:
            seconds = time_slice(runtime, name, skeleton, ref, x, memory_mb, repeats,
                                 min_seconds)
            by_type[kind] = flops / 1e9 / max(seconds, 1e-9)
        out[name] = by_type[kind]
    return out


def cluster_problem(cluster: Cluster, chain: ModelChain, gflops: Mapping[str, float], *,
                    dispatcher: str, bandwidth_mbps: NDArray[np.float64] | None = None,
                    time_dilation: float = 1.0, reserve_mb: int = RESERVE_MB
                    ) -> PipelineProblem:
    """The placement problem on every device of ``cluster`` but ``dispatcher``: each
    device's memory less ``reserve_mb``, its profiled speed, and the links' rates (the
    cluster file's, or ``bandwidth_mbps`` measured, over [dispatcher, nodes...]) divided by
    ``time_dilation`` so that transfers and compute are both in wall seconds; raw float32
    activations (compression 1)."""
    nodes = tuple(d.name for d in cluster.devices if d.name != dispatcher)
    if not nodes:
        raise ConfigError("the cluster has no device for a stage", field="devices")
    names = (dispatcher, *nodes)
    if bandwidth_mbps is None:
        bandwidth_mbps = np.array([[0.0 if a == b else cluster.link(a, b).bandwidth_mbps
                                    for b in names] for a in names])
    memory = tuple(max(0, cluster.device(n).memory_mb - reserve_mb) * 2**20 for n in nodes)
    return PipelineProblem(chain, nodes, memory, bandwidth_mbps / time_dilation,
                           tuple(float(gflops[n]) for n in nodes), compression=1.0,
                           dispatcher=dispatcher)


WINDOW_PER_STAGE = 2
"""Requests in flight per stage at least: one computing, one arriving."""


def window_for(outcome: PipelineOutcome) -> int:
    """Requests in flight that keep the bottleneck busy: Little's law over the plan (one
    request's latency over the bottleneck's time per request) plus two, one queued at the
    bottleneck and one on its way back; and at least :data:`WINDOW_PER_STAGE` per stage plus
    two. The plan's latency leaves out what every hop costs beyond its transfer (Ray's call,
    about 0.7 ms of the sender's and the receiver's CPU, stretched on a slow device, and a
    throttled device's stalls); with about one request per stage those hops starve the
    stages: ViT-Large's medium sibling on 16 testbed devices with the plan's window of 18
    streamed 7.3 results/s with no stage busy more than 66 % of the time (2026-12-02,
    docs/seifer.md)."""
    little = (math.ceil(outcome.latency_s / outcome.bottleneck_s) + 2
              if outcome.bottleneck_s > 0 else 2)
    return max(little, WINDOW_PER_STAGE * len(outcome.plan.nodes) + 2)


@dataclass(frozen=True, slots=True)
class Busy:
    """Steady-state busy fractions of a served plan's resources, over the steady span's
    wall seconds. ``compute[k]``: stage ``k``'s compute seconds. ``link[k]``: stage ``k``'s
    outgoing link (to the next stage; the last stage's back to the dispatcher), the wire
    bits the stage sent over the link's rate, as the plan's problem has it (the testbed
    shapes the link to that rate; the emulator sleeps it), so the link's share of the span
    a stage kept it carrying; transport headers are not counted, so it is a lower bound.
    ``dispatcher_link``: the same for the dispatcher's link into the first stage. A stage
    whose plan is bound by its link is busy when the link is: ``stages`` is the larger of
    the two per stage, ``busiest`` the largest of every resource. A stage restarted
    inside the span counts from its restart, so its figures read low (never below 0)."""

    compute: tuple[float, ...]
    link: tuple[float, ...]
    dispatcher_link: float

    @property
    def stages(self) -> tuple[float, ...]:
        return tuple(max(c, w) for c, w in zip(self.compute, self.link, strict=True))

    @property
    def busiest(self) -> float:
        return max((*self.stages, self.dispatcher_link), default=0.0)


def hop_rates_bps(problem: PipelineProblem, plan: PipelinePlan) -> tuple[float, ...]:
    """Each hop's link rate, bits per second as the problem has it, in pipeline order: the
    dispatcher's into the first stage, each stage's into the next, the last stage's back to
    the dispatcher (0 where the problem has no link)."""
    path = [0, *(n + 1 for n in plan.nodes), 0]
    return tuple(float(problem.bandwidth_mbps[a, b]) * 1e6 for a, b in itertools.pairwise(path))


@dataclass(frozen=True, slots=True)
class ScaleRun:
    """One plan served: the simulated outcome, the run, the window, the largest output
    difference to the whole model, the steady-state busy fractions of its stages and
    links (:class:`Busy`), per stage its peak memory (:func:`stage_peak` of its timing)
    and its device's memory; ``steady_rps``: results per second while the pipeline is
    full; ``span``: the results that bound that span (:func:`steady_span`) and whether it
    leaves out both the fill and the drain."""

    outcome: PipelineOutcome
    run: PipelineRun
    window: int
    max_abs_diff: float
    busy: Busy
    peak_bytes: tuple[int, ...]
    device_bytes: tuple[int, ...]
    steady_rps: float
    span: tuple[int, int, bool]


def stage_peak(timing: Mapping[str, float]) -> tuple[int, str]:
    """A stage's peak memory to set beside its device's, and which reading it is: the
    larger of its process's peak resident memory and, where the stage runs in a cgroup
    with a memory limit (a testbed node), that cgroup's peak. The cgroup counts the
    node's other processes (Ray's raylet and idle workers); the process counts the weight
    shards it maps, whose pages the kernel charges to whoever first read them (on one host,
    the driver that wrote the shards), not to the node."""
    rss = int(timing.get("peak_rss_bytes", 0))
    node = int(timing.get("cgroup_peak_bytes", 0))
    return (node, "cgroup") if node > rss else (rss, "process")


STEADY_WINDOWS = 3
"""Requests a run needs, in windows, for a steady span: one window fills the pipeline, one
streams with every stage fed, one drains it."""


def steady_span(window: int, requests: int) -> tuple[int, int, bool]:
    """The results between which the pipeline is full: from the ``window``-th result (every
    request in flight has entered) to the one whose return lets the last request in
    (``requests - 1 - window``); after it the first stages run dry while the last ones
    drain. With fewer than :data:`STEADY_WINDOWS` windows of requests there is no such
    span: the ``window``-th (at most the middle) to the last, flagged ``False``. A run of
    24 requests with a window of 34 (ViT-Large's sibling on 16 testbed devices, 2026-12-03)
    read the first eight stages 0.0 busy: they had finished before the span began."""
    first, last = window, requests - 1 - window
    if requests >= STEADY_WINDOWS * window and last > first:
        return first, last, True
    return min(window, requests // 2), requests - 1, False


def steady_requests(problem: PipelineProblem, plan: PipelinePlan, at_least: int) -> int:
    """Requests a run of ``plan`` serves so that :func:`steady_span` finds a full span:
    ``at_least``, and :data:`STEADY_WINDOWS` of the plan's windows."""
    return max(at_least, STEADY_WINDOWS * window_for(simulate(problem, lambda *_: plan)))


class _Steady:
    """An ``on_result`` hook: the stages' compute seconds and every hop's wire bytes when
    the pipeline is full and at the last result, with the wall clock. A mark that finds a
    stage down (killed, not yet restarted) is taken at the next result instead, and the
    span runs between the results the marks were taken at."""

    def __init__(self, full_at: int, last: int, rates_bps: Sequence[float]) -> None:
        self.full_at, self.last, self.rates_bps = full_at, last, tuple(rates_bps)
        self.marks: list[tuple[int, float, list[dict[str, float]], list[int]]] = []

    def __call__(self, dispatcher: Dispatcher, result: Result) -> None:
        due = self.full_at if not self.marks else self.last if len(self.marks) == 1 else None
        if due is None or result.request_id < due:
            return
        try:
            timings, hops = dispatcher.stage_timings(), dispatcher.hop_counts()
        except ray.exceptions.RayActorError:
            return  # a stage is down, its restart not yet done: mark at the next result
        self.marks.append((result.request_id, time.perf_counter(), timings,
                           [int(h["wire_bytes"]) for h in hops]))

    def span(self, planned: tuple[int, int, bool]) -> tuple[int, int, bool]:
        """The results the marks were taken at (``planned`` until both are)."""
        if len(self.marks) < 2:
            return planned
        return self.marks[0][0], self.marks[1][0], planned[2]

    def rate(self) -> float:
        """Results per second between the two marks (0 without both)."""
        if len(self.marks) < 2:
            return 0.0
        (first, t0, *_), (last, t1, *_) = self.marks
        return (last - first) / max(t1 - t0, 1e-9)

    def busy(self) -> Busy:
        n = len(self.rates_bps) - 1
        if len(self.marks) < 2:
            return Busy((0.0,) * n, (0.0,) * n, 0.0)
        (_, t0, a, bytes0), (_, t1, b, bytes1) = self.marks
        span_s = max(t1 - t0, 1e-9)
        compute = tuple(round(max(y["compute_s"] - x["compute_s"], 0.0) / span_s, 4)
                        for x, y in zip(a, b, strict=True))
        link = tuple(round(max(w1 - w0, 0) * 8 / rate / span_s, 4) if rate > 0 else 0.0
                     for w0, w1, rate in zip(bytes0, bytes1, self.rates_bps, strict=True))
        return Busy(compute, link[1:], link[0])


def serve(runtime: RayRuntime, lm: LargeModel, problem: PipelineProblem, plan: PipelinePlan,
          inputs: Sequence[np.ndarray[Any, Any]], reference: Sequence[np.ndarray[Any, Any]],
          *, on_result: Callable[[Dispatcher, Result], None] | None = None,
          **options: Any) -> ScaleRun:
    """Serve ``inputs`` through ``plan``, each stage loading only its slice; compare with
    ``reference`` (the whole model's outputs, computed off the devices)."""
    outcome = simulate(problem, lambda _p, _r: plan)
    window = int(options.pop("window", window_for(outcome)))
    span = steady_span(window, len(inputs))
    steady = _Steady(span[0], span[1], hop_rates_bps(problem, plan))

    def hook(dispatcher: Dispatcher, result: Result) -> None:
        steady(dispatcher, result)
        if on_result is not None:
            on_result(dispatcher, result)

    run = execute(runtime, problem, plan, model=None, inputs=inputs, on_result=hook,
                  payloads=lm.payloads, window=window, **options)
    diff = max((float(np.max(np.abs(got - want))) for got, want in
                zip(run.outputs, reference, strict=True)), default=0.0)
    devices = [runtime.cluster.device(problem.nodes[i]) for i in plan.nodes]
    return ScaleRun(outcome, run, window, diff, steady.busy(),
                    tuple(stage_peak(t)[0] for t in run.stage_timings),
                    tuple(d.memory_mb * 2**20 for d in devices), steady.rate(),
                    steady.span(span))


@torch.no_grad()
def whole_model_outputs(lm: LargeModel, inputs: Sequence[np.ndarray[Any, Any]]
                        ) -> list[np.ndarray[Any, Any]]:
    """The reference: the whole model, built once here (off the devices), on each input."""
    model = lm.reference()
    return [model(torch.from_numpy(np.ascontiguousarray(x))).numpy() for x in inputs]
