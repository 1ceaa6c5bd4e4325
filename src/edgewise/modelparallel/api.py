"""The manager's SROLE endpoint (place a round of jobs on a random edge network) and its
``modelparallel`` job: the digits CNN's levels placed on the cluster's devices by the
method's agents, then trained for real stage to stage."""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import torch
from fastapi import APIRouter

from edgewise.cluster.model import Cluster, Role
from edgewise.errors import ConfigError, InfeasibleError
from edgewise.modelparallel.api_schemas import (
    JobPlacement,
    ModelParallelJobSpec,
    PlaceRequest,
    PlaceResponse,
)
from edgewise.modelparallel.models import srole_models
from edgewise.modelparallel.network import random_network
from edgewise.modelparallel.policies import get_method
from edgewise.modelparallel.problem import EdgeNetwork, EdgeNode, Job, TaskPlacement
from edgewise.modelparallel.realbench import (
    bench_model,
    digits_batches,
    sequential_job,
    sequential_levels,
    srole_placement,
)
from edgewise.modelparallel.rounds import random_round
from edgewise.modelparallel.run import ModelParallelTrainer, stage_runs
from edgewise.modelparallel.training import play_round, pretrain
from edgewise.nn.data import digits_split
from edgewise.runtime.jobs import ApiContext, JobContext, JobKind, Planned, ProblemApi

__all__ = ["API", "MODELPARALLEL_KIND", "cluster_network", "place_request", "router"]


def place_request(request: PlaceRequest) -> PlaceResponse:
    """``/modelparallel/place``: pre-train, then one greedy round (run by the limiter)."""
    method = get_method(request.method)
    started = time.perf_counter()
    agent = pretrain(method, srole_models(), np.random.default_rng(request.seed),
                     request.rounds, n_partitions=request.partitions)
    rng = np.random.default_rng([request.seed, 1])
    net = random_network(request.edges, rng)
    rnd = random_round(net, request.model, request.workload, rng, request.partitions)
    res = play_round(method, rnd, [agent.copy() for _ in range(net.n)], rng, explore=False,
                     learn=False)
    jobs = [JobPlacement(job=j.name, origin=j.origin, proposed=list(p.nodes),
                         executed=list(e.nodes), jct_s=None if failed else float(t),
                         failed=bool(failed))
            for j, p, e, t, failed in zip(rnd.jobs, res.proposed, res.executed, res.jct_s,
                                          res.failed, strict=True)]
    return PlaceResponse(method=request.method, jobs=jobs, collisions=res.collisions,
                         collisions_after_shield=res.collisions_after,
                         shield_corrections=res.corrected,
                         decided_in_s=time.perf_counter() - started)


def router(context: ApiContext) -> APIRouter:
    """``/modelparallel/place``."""
    routes = APIRouter(prefix="/modelparallel", tags=["modelparallel"])

    @routes.post("/place")
    def place(request: PlaceRequest) -> PlaceResponse:
        """Place one round of jobs (3 per cluster of 5 nodes) with a method's agents: the
        proposed and the shielded placements and each job's completion time; 413 past
        the planning limits."""
        return context.limited(place_request, request)

    return routes


# the modelparallel job
def cluster_network(cluster: Cluster, stretch: dict[str, float] | None,
                    memory_cap_mb: float | None) -> EdgeNetwork:
    """The cluster as SROLE's edge network: one node per device, its CPU the share of a host
    core it computes at (1 / its emulation stretch), its memory (at most the cap), its link
    the slowest of the cluster's links from it; one cluster, every node in range of every
    other."""
    fastest = max(d.speed for d in cluster.devices)
    cap = memory_cap_mb if memory_cap_mb is not None else math.inf
    names = cluster.device_names

    def link_mbps(device: str) -> float:
        others = [cluster.link(device, o).bandwidth_mbps for o in names if o != device]
        return min(others) if others else cluster.default_link.bandwidth_mbps

    nodes = tuple(EdgeNode(d.name, 1.0 / stretch[d.name] if stretch else d.speed / fastest,
                           float(min(d.memory_mb, cap)), link_mbps(d.name))
                  for d in cluster.devices)
    return EdgeNetwork(nodes)


def _origin(spec: ModelParallelJobSpec, cluster: Cluster) -> int:
    names = list(cluster.device_names)
    if spec.origin is not None:
        if spec.origin not in names:
            raise ConfigError(f"no such device in the cluster: {spec.origin!r}", field="origin")
        return names.index(spec.origin)
    workers = cluster.with_role(Role.WORKER)
    return names.index(workers[0].name) if workers else 0


def _job(spec: ModelParallelJobSpec, cluster: Cluster) -> tuple[torch.nn.Sequential, Job]:
    model = bench_model(spec.seed)
    job = sequential_job(model, sequential_levels(model),
                         torch.zeros(spec.batch_size, 1, 8, 8), spec.batch_size,
                         _origin(spec, cluster), n_iterations=spec.iterations)
    return model, job


def _check(spec: ModelParallelJobSpec, cluster: Cluster) -> None:
    _job(spec, cluster)


def _plan(spec: ModelParallelJobSpec, ctx: JobContext) -> Planned:
    model, job = _job(spec, ctx.cluster)
    network = cluster_network(ctx.cluster, ctx.runtime.stretch, spec.memory_cap_mb)
    placement = srole_placement(network, job, spec.seed, spec.method, spec.rounds)
    rows = [[k, p.name, network.nodes[n].name, round(p.memory_mb, 2), round(p.gflop, 4)]
            for k, (p, n) in enumerate(zip(job.partitions, placement.nodes, strict=True))]
    view = {"method": spec.method, "origin": network.nodes[job.origin].name,
            "hosts": [network.nodes[n].name for n in placement.nodes],
            "tables": [{"title": "partitions: which device hosts each level",
                        "columns": ["partition", "name", "device", "memory MB",
                                    "GFLOP per iteration"], "rows": rows}]}
    return Planned(view, (model, job, network, placement))


def _trainer(spec: ModelParallelJobSpec, ctx: JobContext, model: Any, job: Job,
             network: EdgeNetwork, placement: TaskPlacement) -> ModelParallelTrainer:
    """One stage actor per run of partitions on one device, reserving their memory."""
    cuts, memory = sequential_levels(model), [max(1, math.ceil(p.memory_mb))
                                              for p in job.partitions]
    for j in set(placement.nodes):
        need = sum(m for m, host in zip(memory, placement.nodes, strict=True) if host == j)
        if need > network.nodes[j].memory_mb:
            raise InfeasibleError(f"{network.nodes[j].name} offers "
                                  f"{network.nodes[j].memory_mb:g} MB; its partitions need {need}")
    runs = stage_runs(placement)
    return ModelParallelTrainer(
        ctx.runtime, model, [cuts[a] for a, _ in runs] + [cuts[-1]],
        [network.nodes[placement.nodes[a]].name for a, _ in runs], optimizer="adam",
        lr=spec.learning_rate, memory_mb=[sum(memory[a:b]) for a, b in runs],
        origin=network.nodes[job.origin].name)


def _accuracy(model: torch.nn.Module, weights: dict[str, torch.Tensor]) -> float:
    model.load_state_dict(weights)
    val = digits_split()[1]
    with torch.no_grad():
        predicted = model(torch.from_numpy(val.x)).argmax(dim=1).numpy()
    return float(np.mean(predicted == val.y))


def _execute(spec: ModelParallelJobSpec, planned: Planned, ctx: JobContext) -> dict[str, Any]:
    model, job, network, placement = planned.payload
    trainer = _trainer(spec, ctx, model, job, network, placement)
    try:
        seconds = []
        for i, (x, y) in enumerate(digits_batches(spec.batch_size, spec.iterations, spec.seed)):
            ctx.check_stop()
            loss, wall = trainer.step(x, y)
            seconds.append(wall)
            ctx.metric("loss", loss, step=i + 1)
            ctx.metric("iteration_s", wall, step=i + 1)
            ctx.progress((i + 1) / spec.iterations, iteration=i + 1, loss=loss)
        accuracy = _accuracy(model, trainer.state_dict())
    finally:
        trainer.close()
    ctx.metric("val_accuracy", accuracy, step=spec.iterations)
    kept = seconds[1:] or seconds
    return {"val_accuracy": accuracy, "mean_iteration_s": float(np.mean(kept)),
            "stages": len(stage_runs(placement))}


def _example(cluster: Cluster) -> dict[str, Any]:
    spec = ModelParallelJobSpec(memory_cap_mb=100.0, iterations=30, rounds=50)
    return spec.model_dump(mode="json")


MODELPARALLEL_KIND = JobKind(
    name="modelparallel", spec=ModelParallelJobSpec, example=_example, plan=_plan,
    execute=_execute, check=_check,
    description="SROLE model-parallel training: the CNN's levels placed on devices by "
                "shielded RL agents, trained stage to stage")

API = ProblemApi("modelparallel", router, kinds=(MODELPARALLEL_KIND,))
"""SROLE's offer to the manager (entry point ``edgewise.problems``)."""
