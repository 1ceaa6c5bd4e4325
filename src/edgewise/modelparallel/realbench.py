"""The real-execution part of `edgewise bench srole`: a placement trained for real, its
measured iteration time against the environment's prediction (SROLE §V-A, "each run ... 50
iterations")."""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from itertools import pairwise
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from edgewise.bench import BenchContext, Figures
from edgewise.modelparallel.jct import iteration_time_s, occupancy
from edgewise.modelparallel.jobs import JOB_CPU, period_s
from edgewise.modelparallel.models import srole_models
from edgewise.modelparallel.network import random_network
from edgewise.modelparallel.policies import get_method, trained
from edgewise.modelparallel.problem import EdgeNetwork, Job, Partition, TaskPlacement
from edgewise.modelparallel.run import MPRun, execute, network_cluster, network_emulation
from edgewise.modelparallel.schedule import Round
from edgewise.modelparallel.training import pretrain
from edgewise.modelparallel.workloads import ModelRef
from edgewise.nn.data import digits_split
from edgewise.nn.graph import layer_dag
from edgewise.nn.models import make_optimizer
from edgewise.runtime.ray_cluster import start_local

__all__ = ["BENCH_BATCH", "BENCH_WIDTH", "bench_model", "calibrate_host_gflops",
           "digits_batches", "real_figures", "sequential_job", "sequential_levels",
           "spread_placement", "srole_placement"]

MB = 1e6


def bench_model(seed: int = 0, width: int = 16) -> nn.Sequential:
    """``DigitsCNN``'s layers as one ``nn.Sequential`` (9 children), weights from ``seed``:
    conv, relu, conv, relu, max-pool, flatten, dense, relu, dense."""
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Conv2d(1, width, 3, padding=1), nn.ReLU(),
        nn.Conv2d(width, 2 * width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(2 * width * 4 * 4, 64), nn.ReLU(), nn.Linear(64, 10),
    )


def digits_batches(batch_size: int, iterations: int,
                   seed: int = 0) -> Iterator[tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]]:
    """``iterations`` training batches of the digits train split, epoch by epoch in an order
    drawn from ``seed``: images (B, 1, 8, 8) float32 and labels (B,) int64."""
    train, _ = digits_split(seed=0)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(train))
    at = 0
    for _ in range(iterations):
        if at + batch_size > len(order):
            order, at = rng.permutation(len(train)), 0
        index = order[at:at + batch_size]
        at += batch_size
        yield train.x[index], train.y[index]


def sequential_levels(model: nn.Sequential) -> tuple[int, ...]:
    """Child boundaries of ``model``'s levels, by ``jobs.model_profile``'s rule: a level starts
    at a child with weights; weight-free children (activation, pooling, flatten) join the
    level before them. ``bench_model``: (0, 2, 6, 8, 9), four levels."""
    weighted = [any(True for _ in child.parameters()) for child in model]
    starts = [k for k in range(1, len(model)) if weighted[k] and any(weighted[:k])]
    return (0, *starts, len(model))


def sequential_job(model: nn.Sequential, cuts: Sequence[int], example: torch.Tensor,
                   batch: int, origin: int, name: str = "digits-cnn",
                   job_cpu: float = JOB_CPU, n_iterations: int = 50) -> Job:
    """The environment's ``Job`` for ``model`` split at child boundaries ``cuts``, by the
    conventions of ``jobs.make_job`` on the same graph analysis (``layer_dag``): per partition
    ``gflop`` = 3 × forward FLOPs × ``batch``, ``memory_mb`` = 3 × parameters + every
    activation of the batch, ``out_mb`` = its last activation for the batch, ``cpu`` the
    job's ``job_cpu`` shared by FLOPs; ``input_mb`` = the batch of inputs; the bandwidth
    demands at the job's data rate (``jobs.period_s``)."""
    dag = layer_dag(model, example)
    sums = np.zeros((len(model), 3))  # per child: flops, param bytes, activation bytes
    last_out = np.zeros(len(model))
    for _, node in dag.nodes(data=True):
        if node["op"] != "call_module":
            continue
        child = int(str(node["target"]).split(".")[0])
        sums[child] += (node["flops"], node["param_bytes"], node["output_bytes"])
        last_out[child] = node["output_bytes"]
    source = dag.nodes[dag.graph["source"]]
    total = float(sums[:, 0].sum())
    period = period_s(3.0 * total * batch / 1e9, job_cpu)
    parts = []
    for k, (a, b) in enumerate(pairwise(cuts)):
        flops, params, acts = sums[a:b].sum(axis=0)
        out_mb = float(last_out[b - 1]) * batch / MB
        parts.append(Partition(f"{name}/{k}", gflop=3.0 * flops * batch / 1e9,
                               cpu=job_cpu * flops / total,
                               memory_mb=(3.0 * params + acts * batch) / MB,
                               out_mb=out_mb, out_mbps=16.0 * out_mb / period))
    input_mb = float(source["output_bytes"]) * batch / MB
    return Job(name, name, origin, tuple(parts), input_mb=input_mb, n_iterations=n_iterations,
               input_mbps=8.0 * input_mb / period)


def calibrate_host_gflops(model: nn.Module, job: Job,
                          batch: tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]], *,
                          optimizer: str = "adam", lr: float = 0.005, steps: int = 10) -> float:
    """The host core's training rate on this model, GFLOP/s: the job's GFLOP per iteration
    over the CPU seconds (``time.thread_time``, one torch thread, as the stage actors run) of
    one unsplit forward + backward + ``optimizer`` step on ``batch`` in this process, after
    two warm-up steps. Measured on a copy: the model is left untouched."""
    net = copy.deepcopy(model)
    opt = make_optimizer(optimizer, net, lr)
    x, y = torch.from_numpy(batch[0]), torch.from_numpy(batch[1])
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        cpu0 = time.thread_time()
        for i in range(steps + 2):
            if i == 2:
                cpu0 = time.thread_time()
            opt.zero_grad()
            F.cross_entropy(net(x), y).backward()  # type: ignore[no-untyped-call]
            opt.step()
        seconds = (time.thread_time() - cpu0) / steps
    finally:
        torch.set_num_threads(threads)
    return sum(p.gflop for p in job.partitions) / seconds


def spread_placement(network: EdgeNetwork, job: Job) -> TaskPlacement:
    """A fixed placement that exercises compute and transfers: partition 0 on the job's
    origin, partition i on the i-th of its other candidates (§IV-B: itself, then its
    neighbours), in order of node index, wrapping round when there are fewer candidates."""
    others = [j for j in network.candidates(job.origin) if j != job.origin]
    hosts = [job.origin, *(others[i % len(others)] if others else job.origin
                           for i in range(len(job.partitions) - 1))]
    return TaskPlacement(tuple(hosts))


BENCH_WIDTH, BENCH_BATCH = 32, 128
OPTIMIZER, LR = "adam", 0.005


def srole_placement(network: EdgeNetwork, job: Job, seed: int = 0, method: str = "srole-c",
                    rounds: int = 300, models: Sequence[ModelRef] | None = None
                    ) -> TaskPlacement:
    """The placement ``method`` executes for ``job`` alone on ``network``: its agent
    pre-trained offline as the simulator does (``sim.pretrain``, ``rounds`` random rounds of
    jobs of ``models``, default the SROLE models; a workload's job: its own model, as
    `modelparallel place` pre-trains), then its trained policy (``policies.trained``:
    greedy, shielded)."""
    chosen = get_method(method)
    agent = pretrain(chosen, list(models or srole_models()), np.random.default_rng([seed, 100]),
                     rounds=rounds)
    plan = trained(chosen, agent)(Round(network, (job,)), np.random.default_rng([seed, 101]))
    return plan[0]


def _figures(prefix: str, run: MPRun, job: Job, placement: TaskPlacement,
             env: EdgeNetwork) -> dict[str, float]:
    """Measured against predicted for one placement: iteration, compute and transfer."""
    occ = occupancy(env, [job], [placement])
    predicted = iteration_time_s(job, placement, env, occ)
    transfer = iteration_time_s(job, placement, replace(env, host_gflops=math.inf), occ)
    measured, compute = run.mean_iteration_s, predicted - transfer

    def pred(name: str) -> str:
        return "predicted_" + (prefix + name).removeprefix("real_")

    return {
        f"{prefix}iteration_time_s": round(measured, 4),
        pred("iteration_time_s"): round(predicted, 4),
        f"{prefix}iteration_time_error": round(abs(measured - predicted) / measured, 4),
        f"{prefix}compute_s_per_iteration": round(run.mean_compute_s, 4),
        pred("compute_s_per_iteration"): round(compute, 4),
        f"{prefix}compute_time_error": round(abs(run.mean_compute_s - compute)
                                             / run.mean_compute_s, 4),
        f"{prefix}transfer_s_per_iteration": round(run.mean_transfer_s, 4),
        pred("transfer_s_per_iteration"): round(transfer, 4),
        f"{prefix}distinct_nodes": float(len(set(placement.nodes))),
        f"{prefix}stages": float(len(run.devices)),
    }


_MEASURED = ("iteration_time_s", "iteration_time_error", "compute_s_per_iteration",
             "compute_time_error", "transfer_s_per_iteration")


def real_figures(ctx: BenchContext) -> Figures:
    """Train the bench CNN for real on a 5-node Table I network (seed) where
    :func:`spread_placement` puts its four levels (keys ``real_*``) and, unless quick,
    where SROLE-C places them (``real_srole_*``), one stage actor per run of consecutive
    levels on one node; compare the mean iteration times with the environment's
    ``iteration_time_s`` for the same job, placements and nodes, the host's GFLOP/s
    calibrated by :func:`calibrate_host_gflops` (see docs/srole-runtime.md). Measured
    figures (and predictions from the calibrated rate) go to ``ctx.timings``."""
    rng = np.random.default_rng(ctx.seed)
    network = random_network(5, rng, "container")
    most = max(len(network.neighbours(j)) for j in range(network.n))
    origin = int(rng.choice([j for j in range(network.n) if len(network.neighbours(j)) == most]))
    model = bench_model(ctx.seed, BENCH_WIDTH)
    cuts = sequential_levels(model)
    job = sequential_job(model, cuts, torch.zeros(1, 1, 8, 8), BENCH_BATCH, origin)
    batches = list(digits_batches(BENCH_BATCH, 8 if ctx.quick else 20, ctx.seed))
    ctx.progress("calibrating the host's GFLOP/s; placing with SROLE-C", 0.05)
    config = network_emulation(network)
    host_gflops = calibrate_host_gflops(model, job, batches[0], optimizer=OPTIMIZER, lr=LR)
    env = replace(network, host_gflops=host_gflops / (config.host_speed or 1.0))
    placements = {"real_": spread_placement(network, job)}
    if not ctx.quick:
        placements["real_srole_"] = srole_placement(network, job, ctx.seed)
    ctx.timings["real_host_gflops"] = round(host_gflops, 2)
    out: Figures = {"real_levels": float(len(job.partitions)),
                    "real_iterations": float(len(batches))}
    runtime = start_local(network_cluster(network), config)
    try:
        for k, (prefix, placement) in enumerate(placements.items()):
            ctx.progress(f"training on emulated nodes {placement.nodes}", 0.2 + 0.4 * k)
            run = execute(runtime, Round(network, (job,)), (placement,), model=model,
                          cuts=cuts, batches=batches, optimizer=OPTIMIZER, lr=LR)[0]
            for key, value in _figures(prefix, run, job, placement, env).items():
                measured = key.startswith("predicted_") or key.removeprefix(
                    prefix) in _MEASURED
                (ctx.timings if measured else out)[key] = value
            out |= {f"{prefix}loss_first": round(run.losses[0], 4),
                    f"{prefix}loss_last": round(run.losses[-1], 4)}
    finally:
        runtime.shutdown()
    ctx.progress("done", 1.0)
    return out
