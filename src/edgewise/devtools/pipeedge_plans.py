"""The planned figures of docs/seifer.md beside PipeEdge's: ViT-Large, ViT-Huge and
BERT-Large traced on ``meta``, the shipped 16-device clusters, each device at ``UTIL`` of
its catalog peak GFLOP/s (an assumption, not a measurement), the cluster files' links;
every policy's bottleneck on the first 1, 4 and 16 devices, and its decision seconds.

Run: ``python -m edgewise.devtools.pipeedge_plans`` (one JSON line per model)."""

from __future__ import annotations

import dataclasses
import json
import time

import numpy as np

from edgewise.cluster.examples import example_path
from edgewise.cluster.schema import load_cluster
from edgewise.errors import ConfigError, InfeasibleError
from edgewise.nn.chain import ModelChain
from edgewise.nn.large import large_spec, model_builder
from edgewise.nn.partition import partition_model
from edgewise.nn.slices import empty_parameters
from edgewise.pipeline.policies import get_policy
from edgewise.pipeline.problem import PipelineProblem
from edgewise.pipeline.scale import cluster_problem

UTIL = 0.25
POLICIES = ("pipeedge", "bottleneck-search", "seifer", "joint-greedy", "even")


def _chain(name: str) -> ModelChain:
    spec = large_spec(name)
    with empty_parameters():
        model = model_builder(spec)()
    example = spec.example()
    return partition_model(name, model, example.to("meta") if example.is_floating_point()
                           else example).chain


def _first(problem: PipelineProblem, k: int) -> PipelineProblem:
    keep = list(range(k + 1))
    gflops = None if problem.gflops is None else problem.gflops[:k]
    return dataclasses.replace(problem, nodes=problem.nodes[:k],
                               memory_bytes=problem.memory_bytes[:k], gflops=gflops,
                               bandwidth_mbps=problem.bandwidth_mbps[np.ix_(keep, keep)])


def main() -> None:
    for model in ("vit-large", "vit-huge", "bert-large"):
        chain = _chain(model)
        out: dict[str, object] = {"segments": chain.n_segments,
                                  "gflop": round(sum(chain.flops) / 1e9, 1),
                                  "memory_mb": round(sum(chain.memory_bytes) / 2**20)}
        for kind, counts in (("homogeneous", (1, 4, 16)), ("heterogeneous", (16,))):
            cluster = load_cluster(example_path(f"pipeline-16-{kind}.yaml"))
            speeds = {d.name: d.peak_gflops * UTIL for d in cluster.devices}
            problem = cluster_problem(cluster, chain, speeds, dispatcher="gateway")
            plans: dict[str, object] = {}
            for k in counts:
                for policy in POLICIES:
                    started = time.perf_counter()
                    try:
                        plan = get_policy(policy)(_first(problem, k), np.random.default_rng(0))
                    except (InfeasibleError, ConfigError) as exc:
                        plans[f"{policy}@{k}"] = str(exc)
                        continue
                    plans[f"{policy}@{k}"] = {
                        "bottleneck_s": round(plan.bottleneck_s, 4),
                        "stages": plan.n_partitions,
                        "decision_s": round(time.perf_counter() - started, 2)}
            out[kind] = plans
        print(json.dumps({model: out}), flush=True)


if __name__ == "__main__":
    main()
