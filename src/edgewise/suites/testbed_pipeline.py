"""SEIFER's pipeline on a testbed: the bench CNN placed by bottleneck-search, streamed over
kernel-shaped links between cgroup-limited devices; its throughput against the plan's bound
with, per stage, where it loses; then a whole device killed under load (nothing may be lost
or delivered twice)."""

from __future__ import annotations

from typing import Any

from edgewise.bench import Figures
from edgewise.pipeline.dispatcher import Dispatcher, Result
from edgewise.pipeline.realrun import BenchPipeline, plan_bench_pipeline, run_bench_pipeline
from edgewise.runtime.faults import FaultInjector
from edgewise.runtime.ray_cluster import RayRuntime

__all__ = ["pipeline_figures", "pipeline_kill_figures"]


def _wire_bytes(counts: dict[str, int], a: str, b: str) -> int:
    return counts.get(f"{a}<->{b}:wire_bytes", counts.get(f"{b}<->{a}:wire_bytes", 0))


def _stages(done: BenchPipeline, dispatcher: str, dilation: float,
            link_ratios: dict[tuple[str, str], float]) -> list[dict[str, Any]]:
    """Per stage: the plan's time for its input transfer, the bytes that crossed that link
    per request against the plan's, the link's own TCP goodput ratio where it was measured
    and the transfer time those two give, and the stage's measured compute per request
    (device time), which the plan leaves out (SEIFER's Eq. 2 scores transfers only)."""
    outcome, run = done.outcome, done.run
    devices = [done.problem.nodes[i] for i in outcome.plan.nodes]
    chain, cuts = done.problem.chain, outcome.plan.cuts
    out = []
    for k, device in enumerate(devices):
        before = dispatcher if k == 0 else devices[k - 1]
        planned = chain.input_bytes if k == 0 else chain.output_bytes[cuts[k] - 1]
        timing = run.stage_timings[k] if k < len(run.stage_timings) else {}
        processed = max(timing.get("processed", 0.0), 1.0)
        sent = _wire_bytes(run.bytes, before, device) / max(len(run.outputs), 1)
        goodput = link_ratios.get((before, device))
        at_goodput = None if not goodput or not planned else \
            outcome.transfer_s[k] * sent / planned / goodput
        out.append({
            "stage": k, "device": device, "from": before,
            "predicted_transfer_s": round(outcome.transfer_s[k], 4),
            "wire_bytes_per_request": round(sent), "planned_bytes_per_request": planned,
            "link_goodput_ratio": goodput,
            "transfer_s_at_measured_goodput": None if at_goodput is None else round(
                at_goodput, 4),
            "compute_device_s_per_request": round(
                timing.get("compute_s", 0.0) / processed / dilation, 5)})
    return out


def pipeline_figures(runtime: RayRuntime, *, requests: int, seed: int,
                     link_ratios: dict[tuple[str, str], float] | None = None) -> Figures:
    """Plan on the runtime's cluster, stream ``requests`` images, compare with the bound."""
    planned = plan_bench_pipeline(runtime.cluster, seed)
    done = run_bench_pipeline(runtime, planned, seed, requests)
    dilation, run, plan = runtime.time_dilation, done.run, done.outcome.plan
    bound = 1.0 / plan.bottleneck_s  # requests per device second
    return {
        "pipeline_throughput_ratio_to_bound": round(run.throughput_rps * dilation / bound, 4),
        "pipeline_bound_rps": round(bound, 3),
        "pipeline_throughput_device_rps": round(run.throughput_rps * dilation, 3),
        "pipeline_throughput_rps": round(run.throughput_rps, 3),
        "pipeline_latency_p50_device_s": round(run.latency_p50_s / dilation, 4),
        "pipeline_latency_p50_s": round(run.latency_p50_s, 4),
        "pipeline_predicted_latency_s": round(done.outcome.latency_s, 4),
        "pipeline_outputs_correct": done.outputs_correct,
        "pipeline_devices": planned.devices,
        "pipeline_stages": _stages(done, done.problem.dispatcher or "", dilation,
                                   link_ratios or {}),
    }


def pipeline_kill_figures(runtime: RayRuntime, faults: FaultInjector, *, requests: int,
                          seed: int) -> Figures:
    """Kill the middle stage's whole device a fifth into the stream: every request must
    come back once, in order, equal to the unpartitioned model's output."""
    planned = plan_bench_pipeline(runtime.cluster, seed)
    victim = planned.devices[len(planned.devices) // 2]
    killed: list[float] = []

    def kill(dispatcher: Dispatcher, result: Result) -> None:
        if result.request_id == requests // 5 and not killed:
            killed.append(faults.kill_device(victim).at)

    done = run_bench_pipeline(runtime, planned, seed, requests, on_result=kill)
    ids = done.run.request_ids
    return {
        "node_kill_pipeline_requests_lost": requests - len(set(ids)),
        "node_kill_pipeline_requests_duplicated": len(ids) - len(set(ids)),
        "node_kill_pipeline_in_order": ids == sorted(ids),
        "node_kill_pipeline_outputs_correct": done.outputs_correct,
        "node_kill_pipeline_device": victim,
        "node_kill_pipeline_restarts": done.run.restarts,
        "node_kill_pipeline_resends": done.run.resends,
    }
