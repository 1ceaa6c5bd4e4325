"""One large-model pipeline experiment, as `edgewise pipeline scale` and the pipeline-scale
bench run it: profile the devices, take the links from the cluster file or measure them,
plan with a policy on some of the devices, serve, and report per stage."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from edgewise.cluster.model import Role
from edgewise.errors import ConfigError
from edgewise.nn.large import LargeModel, large_spec, prepare
from edgewise.pipeline.policies import get_policy
from edgewise.pipeline.problem import PipelinePlan, PipelineProblem
from edgewise.pipeline.scale import ScaleRun, cluster_problem, profile_gflops, stage_peak
from edgewise.runtime.probe import measure_link_matrix
from edgewise.runtime.ray_cluster import RayRuntime

__all__ = ["MEDIUM", "SCALES", "SMALL", "ScaleSetup", "load_model", "plan_on", "run_json",
           "setup"]

SMALL = {"hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
         "intermediate_size": 128, "image_size": 32, "patch_size": 8, "seq_len": 16,
         "vocab_size": 1000}
"""A small model of the same class (``--small``): for trying the command quickly."""

MEDIUM = {"hidden_size": 256, "num_attention_heads": 8, "intermediate_size": 1024,
          "image_size": 64, "patch_size": 8, "seq_len": 64, "vocab_size": 8000}
"""A sibling with the published depth (ViT-Large's 24 blocks, ViT-Huge's 32, BERT-Large's
24) and a quarter of the width or less, for a host that cannot run the published sizes on
16 testbed devices: a block computes for about 3 ms of one host core (ViT-Large's 24 blocks
0.068 s a request, measured 2026-12-02), so a stage's compute, not Ray's per-call cost
(about 0.7 ms of CPU), decides a pipeline's throughput, as it does at full size on real
devices. Its memory is small: no device is too small for it."""

SCALES = {"full": {}, "medium": MEDIUM, "small": SMALL}
"""Model scales by name: config fields replaced in the published model's."""


def load_model(name: str, directory: Path, *, scale: str = "full", seed: int = 0,
               micro_batch: int = 1) -> LargeModel:
    """The named large model at ``scale`` (``full``, or the sibling ``medium`` or ``small``
    of :data:`SCALES`), weights under ``directory``/name, a request being ``micro_batch``
    inputs."""
    spec = large_spec(name)
    if scale not in SCALES:
        raise ConfigError(f"the model scale is one of {', '.join(SCALES)}, got {scale!r}",
                          field="--model-scale")
    if SCALES[scale]:
        keys = set(spec.kwargs())
        spec = large_spec(name, scale, **{k: v for k, v in SCALES[scale].items() if k in keys})
    return prepare(spec, directory / spec.name, seed, micro_batch=micro_batch)


@dataclass(frozen=True, slots=True)
class ScaleSetup:
    """What every plan on one cluster shares: the model, the dispatcher, each device's
    profiled speed, the link matrix over [dispatcher, devices...] and where it came from."""

    runtime: RayRuntime
    model: LargeModel
    dispatcher: str
    devices: tuple[str, ...]
    gflops: dict[str, float]
    bandwidth_mbps: NDArray[np.float64] | None
    links: str


def setup(runtime: RayRuntime, model: LargeModel, *, measure_links: bool = False,
          repeats: int = 2) -> ScaleSetup:
    """Profile each device type; with ``measure_links``, probe every pair's rate (the plan
    then uses the measured rates instead of the cluster file's)."""
    cluster = runtime.cluster
    managers = cluster.with_role(Role.MANAGER)
    dispatcher = (managers[0] if managers else cluster.devices[-1]).name
    devices = tuple(d.name for d in cluster.devices if d.name != dispatcher)
    gflops = profile_gflops(runtime, model, devices, repeats=repeats)
    bandwidth = None
    if measure_links:
        bandwidth = measure_link_matrix(runtime, [dispatcher, *devices])
    return ScaleSetup(runtime, model, dispatcher, devices, gflops, bandwidth,
                      "measured" if measure_links else "cluster file")


def plan_on(s: ScaleSetup, count: int, policy: str, seed: int = 0
            ) -> tuple[PipelineProblem, PipelinePlan]:
    """The problem on the first ``count`` devices and ``policy``'s plan for it."""
    if not 1 <= count <= len(s.devices):
        raise ConfigError(f"--devices must be 1..{len(s.devices)}, got {count}",
                          field="devices")
    dilation = 1.0 if s.bandwidth_mbps is not None else s.runtime.time_dilation
    problem = cluster_problem(s.runtime.cluster, s.model.partitioned.chain, s.gflops,
                              dispatcher=s.dispatcher, bandwidth_mbps=s.bandwidth_mbps,
                              time_dilation=dilation)
    keep = list(range(count + 1))  # the dispatcher and the first ``count`` devices
    problem = replace(problem, nodes=problem.nodes[:count],
                      memory_bytes=problem.memory_bytes[:count],
                      gflops=None if problem.gflops is None else problem.gflops[:count],
                      bandwidth_mbps=problem.bandwidth_mbps[np.ix_(keep, keep)])
    return problem, get_policy(policy)(problem, np.random.default_rng(seed))


def _memory(done: ScaleRun, k: int, timing: dict[str, float]) -> dict[str, Any]:
    """Stage ``k``'s peak memory beside its device's (``scale.stage_peak``: its process's
    or its node's cgroup's, the larger), which of the two that is, its process's, and on a
    memory-limited node how often the node met its limit; from the stage's ``timing``."""
    out: dict[str, Any] = {
        "peak_memory_bytes": done.peak_bytes[k], "device_memory_bytes": done.device_bytes[k],
        "peak_memory_ratio": round(done.peak_bytes[k] / done.device_bytes[k], 4)}
    if timing:
        out |= {"peak_memory_source": stage_peak(timing)[1],
                "peak_rss_bytes": int(timing.get("peak_rss_bytes", 0))}
    if "cgroup_limit_hits" in timing:
        out["cgroup_limit_hits"] = int(timing["cgroup_limit_hits"])
    return out


def run_json(s: ScaleSetup, problem: PipelineProblem, plan: PipelinePlan,
             done: ScaleRun) -> dict[str, Any]:
    """One served plan as JSON: the plan, the links it used, the measured against the
    planned throughput, the dispatcher's link's busy fraction, and per stage its device,
    parameters, busy fractions (compute, outgoing link, the larger), the plan's compute
    and link seconds a request (wall seconds, as the problem has them), peak memory beside
    the device's."""
    dilation = s.runtime.time_dilation
    out = done.outcome
    planned_link = (*out.transfer_s[1:], out.return_s)  # each stage's outgoing link
    busy, stages = done.busy, []
    for k, node in enumerate(plan.nodes):
        timing = done.run.stage_timings[k] if k < len(done.run.stage_timings) else {}
        measured = k < len(busy.compute)
        stages.append({
            "device": problem.nodes[node], "segments": [plan.cuts[k], plan.cuts[k + 1]],
            "parameters": int(timing.get("parameters", 0)),
            "busy_fraction": busy.stages[k] if measured else None,
            "compute_busy_fraction": busy.compute[k] if measured else None,
            "link_busy_fraction": busy.link[k] if measured else None,
            "planned_compute_s": round(out.compute_s[k], 6),
            "planned_link_s": round(planned_link[k], 6),
            **_memory(done, k, timing)})
    bound = done.outcome.throughput_rps
    micro_batch = int(s.model.example.shape[0])
    return {
        "policy": plan.policy, "devices": len(problem.nodes), "stages_used": len(plan.nodes),
        "links": s.links, "micro_batch": micro_batch,
        "cuts": list(plan.cuts), "window": done.window, "requests": len(done.run.outputs),
        "in_order": done.run.request_ids == sorted(done.run.request_ids),
        "duplicates": len(done.run.request_ids) - len(set(done.run.request_ids)),
        "duplicates_suppressed": done.run.duplicates, "restarts": done.run.restarts,
        "outputs_max_abs_diff": done.max_abs_diff,
        "planned_throughput_rps": round(bound, 4),
        "throughput_rps": round(done.run.throughput_rps, 4),
        "steady_throughput_rps": round(done.steady_rps, 4),
        "steady_inputs_per_s": round(done.steady_rps * micro_batch, 4),
        "steady_ratio_to_plan": round(done.steady_rps / bound, 4) if bound else None,
        "steady_span_results": list(done.span[:2]), "steady_span_full": done.span[2],
        "dispatcher_link_busy_fraction": busy.dispatcher_link,
        "planned_dispatcher_link_s": round(out.transfer_s[0], 6),
        "busiest_fraction": busy.busiest,
        "time_dilation": dilation, "stages": stages}


def stage_devices(problem: PipelineProblem, plan: PipelinePlan) -> Sequence[str]:
    return [problem.nodes[i] for i in plan.nodes]
