"""The real-pipeline part of `edgewise bench seifer`: plan, deploy and stream on emulated links."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from edgewise.cluster.model import Cluster
from edgewise.cluster.schema import cluster_from_dict
from edgewise.nn.graph import candidate_points, layer_dag, to_chain
from edgewise.pipeline.problem import PipelineProblem
from edgewise.pipeline.run import execute
from edgewise.pipeline.sim import simulate
from edgewise.runtime.ray_cluster import start_local
from edgewise.wire.activation import ActivationCodec

__all__ = ["BENCH_CLUSTER", "bench_inputs", "bench_model", "bench_problem",
           "real_pipeline_figures"]

# Four Jetson Nanos on a wireless LAN like SEIFER's (5 Mbit/s, about its Eq. 18 mean of
# 4.8) with a few faster pairs, and a Raspberry Pi 5 as the dispatcher.
BENCH_CLUSTER: dict[str, Any] = {
    "name": "seifer-bench",
    "default_link": {"bandwidth_mbps": 5, "latency_ms": 0.5},
    "devices": [{"name": f"nano-{i}", "type": "jetson-nano"} for i in range(4)]
    + [{"name": "dispatcher", "type": "raspberry-pi-5", "roles": ["manager"]}],
    "links": [
        {"between": ["dispatcher", "nano-2"], "bandwidth_mbps": 15, "latency_ms": 0.5},
        {"between": ["nano-2", "nano-0"], "bandwidth_mbps": 20, "latency_ms": 0.5},
        {"between": ["nano-0", "nano-3"], "bandwidth_mbps": 10, "latency_ms": 0.5},
    ],
}
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
    """The placement problem of ``model`` (one segment per layer) on the bench cluster: raw
    float32 activations (compression 1), the memory cap per node, the dispatcher first."""
    dag = layer_dag(model, torch.zeros(1, 3, 64, 64))
    chain = to_chain("bench-cnn", dag, candidate_points(dag))
    if chain.n_segments != len(model):
        raise RuntimeError(f"expected one segment per layer, got {chain.n_segments}")
    nodes = tuple(d.name for d in cluster.devices if d.name != "dispatcher")
    names = ("dispatcher", *nodes)
    bw = np.array([[0.0 if a == b else cluster.link(a, b).bandwidth_mbps for b in names]
                   for a in names])
    return PipelineProblem(chain, nodes, (NODE_MEMORY_BYTES,) * len(nodes), bw,
                           compression=1.0)


def bench_inputs(requests: int, seed: int = 0) -> list[np.ndarray[Any, Any]]:
    """``requests`` random 1×3×64×64 images for the bench model (seeded)."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((1, 3, 64, 64)).astype(np.float32) for _ in range(requests)]


def real_pipeline_figures(seed: int = 0, requests: int = 60) -> dict[str, Any]:
    """Plan with bottleneck-search (transfers only, no compression: raw float32
    activations), stream ``requests`` images and compare the measured throughput with the
    plan's bound 1 / bottleneck."""
    cluster = cluster_from_dict(BENCH_CLUSTER, source="bench")
    model = bench_model(seed)
    problem = bench_problem(cluster, model)
    plan = simulate(problem, "bottleneck-search", seed=seed).plan
    inputs = bench_inputs(requests, seed)
    runtime = start_local(cluster)
    try:
        run = execute(runtime, problem, plan, model=model, inputs=inputs,
                      codec=ActivationCodec("none"))
    finally:
        runtime.shutdown()
    with torch.no_grad():
        reference = model(torch.from_numpy(np.concatenate(inputs))).numpy()
    correct = bool(np.allclose(np.concatenate(run.outputs), reference, atol=1e-5))
    bound = 1.0 / plan.bottleneck_s
    return {"pipeline_stages": plan.n_partitions,
            "pipeline_devices": [problem.nodes[i] for i in plan.nodes],
            "pipeline_bound_rps": round(bound, 3),
            "pipeline_throughput_rps": round(run.throughput_rps, 3),
            "pipeline_throughput_ratio_to_bound": round(run.throughput_rps / bound, 4),
            "pipeline_latency_p50_s": round(run.latency_p50_s, 4),
            "pipeline_outputs_correct": correct}
