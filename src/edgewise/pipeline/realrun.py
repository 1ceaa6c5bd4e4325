"""The real-pipeline part of `edgewise bench seifer`: plan, deploy and stream on emulated links."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import yaml
from torch import nn

from edgewise.cluster.examples import example_path
from edgewise.cluster.model import Cluster, Role
from edgewise.cluster.schema import cluster_from_dict
from edgewise.nn.graph import candidate_points, layer_dag, to_chain
from edgewise.pipeline.problem import PipelineProblem
from edgewise.pipeline.run import Dispatcher, PipelineRun, Result, execute
from edgewise.pipeline.sim import PipelineOutcome, simulate
from edgewise.runtime.ray_cluster import RayRuntime, start_local
from edgewise.wire.activation import ActivationCodec

__all__ = ["BENCH_CLUSTER", "BenchPipeline", "Planned", "bench_inputs", "bench_model",
           "bench_problem", "plan_bench_pipeline", "real_pipeline_figures",
           "run_bench_pipeline"]

BENCH_CLUSTER: dict[str, Any] = yaml.safe_load(example_path("seifer-bench.yaml").read_text())
"""Four Jetson Nanos behind SEIFER-like wireless links and a Pi 5 dispatcher (the shipped
``seifer-bench.yaml``)."""
NODE_MEMORY_BYTES = 800_000  # forces at least three partitions of the bench model


def bench_model(seed: int = 0) -> nn.Sequential:
    """A small CNN on 3×64×64 images, split at its layers (11 segments)."""
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(),
        nn.Conv2d(16, 32, 3, padding=1, stride=2), nn.ReLU(),
        nn.Conv2d(32, 64, 3, padding=1, stride=2), nn.ReLU(),
        nn.Conv2d(64, 64, 3, padding=1, stride=2), nn.ReLU(),
        nn.Flatten(), nn.Linear(64 * 8 * 8, 32), nn.ReLU(),
    ).eval()


def bench_problem(cluster: Cluster, model: nn.Sequential) -> PipelineProblem:
    """The placement problem of ``model`` (one segment per layer) on the bench cluster (or
    any cluster whose manager device dispatches): raw float32 activations (compression 1),
    the memory cap per node, the dispatcher first."""
    dag = layer_dag(model, torch.zeros(1, 3, 64, 64))
    chain = to_chain("bench-cnn", dag, candidate_points(dag))
    if chain.n_segments != len(model):
        raise RuntimeError(f"expected one segment per layer, got {chain.n_segments}")
    managers = cluster.with_role(Role.MANAGER)
    dispatcher = (managers[0] if managers else cluster.devices[-1]).name
    nodes = tuple(d.name for d in cluster.devices if d.name != dispatcher)
    names = (dispatcher, *nodes)
    bw = np.array([[0.0 if a == b else cluster.link(a, b).bandwidth_mbps for b in names]
                   for a in names])
    return PipelineProblem(chain, nodes, (NODE_MEMORY_BYTES,) * len(nodes), bw,
                           compression=1.0, dispatcher=dispatcher)


def bench_inputs(requests: int, seed: int = 0) -> list[np.ndarray[Any, Any]]:
    """``requests`` random 1×3×64×64 images for the bench model (seeded)."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((1, 3, 64, 64)).astype(np.float32) for _ in range(requests)]


def plan_bench_pipeline(cluster: Cluster, seed: int = 0) -> Planned:
    """The bench model planned on ``cluster`` by bottleneck-search (transfers only, raw
    float32 activations)."""
    model = bench_model(seed)
    problem = bench_problem(cluster, model)
    return Planned(model, problem, simulate(problem, "bottleneck-search", seed=seed))


def run_bench_pipeline(runtime: RayRuntime, planned: Planned, seed: int = 0,
                       requests: int = 60,
                       on_result: Callable[[Dispatcher, Result], None] | None = None,
                       **dispatcher_options: Any) -> BenchPipeline:
    """Stream ``requests`` images through the planned pipeline on ``runtime`` and check the
    outputs against the unpartitioned model."""
    inputs = bench_inputs(requests, seed)
    dispatcher_options.setdefault("codec", ActivationCodec("none"))
    run = execute(runtime, planned.problem, planned.outcome.plan, model=planned.model,
                  inputs=inputs, on_result=on_result, **dispatcher_options)
    with torch.no_grad():
        reference = planned.model(torch.from_numpy(np.concatenate(inputs))).numpy()
    correct = len(run.outputs) == requests and bool(
        np.allclose(np.concatenate(run.outputs), reference, atol=1e-5))
    return BenchPipeline(planned.problem, planned.outcome, run, correct)


@dataclass(frozen=True, slots=True)
class Planned:
    """The bench model, its placement problem and the plan bottleneck-search made."""

    model: nn.Sequential
    problem: PipelineProblem
    outcome: PipelineOutcome

    @property
    def devices(self) -> list[str]:
        """The stages' devices, in pipeline order."""
        return [self.problem.nodes[i] for i in self.outcome.plan.nodes]


@dataclass(frozen=True, slots=True)
class BenchPipeline:
    """The bench pipeline run: its problem, the simulated plan, what the run measured and
    whether every output equals the unpartitioned model's."""

    problem: PipelineProblem
    outcome: PipelineOutcome
    run: PipelineRun
    outputs_correct: bool


def real_pipeline_figures(seed: int = 0, requests: int = 60) -> dict[str, Any]:
    """The bench pipeline on the emulated bench cluster: the measured throughput against
    the plan's bound 1 / bottleneck."""
    cluster = cluster_from_dict(BENCH_CLUSTER, source="bench")
    planned = plan_bench_pipeline(cluster, seed)
    runtime = start_local(cluster)
    try:
        done = run_bench_pipeline(runtime, planned, seed, requests)
    finally:
        runtime.shutdown()
    plan, run = done.outcome.plan, done.run
    bound = 1.0 / plan.bottleneck_s
    return {"pipeline_stages": plan.n_partitions, "pipeline_devices": planned.devices,
            "pipeline_bound_rps": round(bound, 3),
            "pipeline_throughput_rps": round(run.throughput_rps, 3),
            "pipeline_throughput_ratio_to_bound": round(run.throughput_rps / bound, 4),
            "pipeline_latency_p50_s": round(run.latency_p50_s, 4),
            "pipeline_outputs_correct": done.outputs_correct}
