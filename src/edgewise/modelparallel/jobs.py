"""Training jobs from real models (§V-A) through `edgewise.nn` graph analysis, and the
background PageRank load of the workload levels 50–100 %.

A model's layer DAG is cut at its candidate partition points; the segments between them are
grouped into **model levels** (§III: "In each model level, a model partition consists of one
or multiple disjoint layers, which can be executed in parallel"): a level is one segment with
weights (a convolution, a dense layer, an LSTM, an Inception module of parallel branches)
with the weight-free segments after it (activation, pooling, flatten), so VGG-16 has 16
levels, GoogLeNet 11, the RNN 4. A job has one partition (task) per level, as the paper's
action places each layer; ``n_partitions`` optionally groups the levels into at most that
many contiguous partitions of balanced FLOPs instead. Per partition and per iteration at
``batch`` samples: ``gflop`` = 3 × forward FLOPs (backward ≈ 2 × forward); ``memory_mb`` =
weights + gradients + momentum (3 × parameter bytes) + every activation of the batch (kept
for the backward pass); ``out_mb`` = the activation of its last layer for the batch. CPU
demand: a training job is one process that keeps ``job_cpu`` host ratio busy; its partitions
share it in proportion to their FLOPs. That fixes the job's data rate, one iteration every
``period_s`` = total GFLOP / (``job_cpu`` · ``HOST_GFLOPS``) seconds, and so its bandwidth
demands: a partition's output traffic (activation forward, gradient back) is
``out_mbps`` = 2 · 8 · ``out_mb`` / ``period_s``, the batch ``input_mbps`` = 8 · ``input_mb`` /
``period_s``.

Demands drift (§V-D: "the resource demands of tasks are time-varying and dynamic and
sometimes cannot be accurately predicted"): in each round a job's and a background task's
CPU and bandwidth demands are their profiled values times a factor drawn uniformly from
[1 − ``DEMAND_DRIFT``, 1 + ``DEMAND_DRIFT``] (`drifted`); memory (weights, optimizer state and
activations of a fixed batch; a worker's configured heap) does not drift.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Hashable
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from edgewise.errors import ConfigError
from edgewise.modelparallel.problem import (
    HOST_GFLOPS,
    BackgroundTask,
    EdgeNetwork,
    Job,
    Partition,
)
from edgewise.nn.cuts import candidate_points, dag_ends, topological_depth

# Models are built and traced (torch) by the functions that profile them, which import
# ``workloads``, ``models`` and ``nn.graph`` themselves: the policies import ``rounds``,
# and through it this module, without torch.
if TYPE_CHECKING:
    from edgewise.modelparallel.workloads import ModelRef

__all__ = [
    "DEMAND_DRIFT",
    "JOBS_PER_CLUSTER",
    "JOB_CPU",
    "PAGERANK_BANDWIDTH_MBPS",
    "PAGERANK_CPU",
    "PAGERANK_MEMORY_MB",
    "ModelProfile",
    "background_tasks",
    "check_model",
    "cluster_jobs",
    "drifted",
    "make_job",
    "max_levels",
    "model_profile",
    "pagerank_jobs",
]

JOB_CPU = 0.4  # host ratio one training job keeps busy (assumption, see docs/srole.md)
JOBS_PER_CLUSTER = 3  # §V-A: three DL training jobs of the same type per cluster
PAGERANK_CPU = 0.05  # host ratio of one PageRank worker (assumption)
PAGERANK_MEMORY_MB = 128.0  # one PageRank worker's heap (assumption)
PAGERANK_BANDWIDTH_MBPS = 10.0  # one PageRank worker's shuffle traffic (assumption)
DEMAND_DRIFT = 0.25  # CPU and bandwidth demands vary ±25 % round to round (assumption)
PAGERANK_WORKERS = 3  # nodes a distributed PageRank job runs on
MB = 1e6


@dataclass(frozen=True, slots=True)
class ModelProfile:
    """A model grouped into partitions: per partition, forward GFLOP, parameter MB and
    activation MB per sample, and the output MB per sample; the input MB per sample."""

    name: str
    labels: tuple[str, ...]
    gflop: tuple[float, ...]
    param_mb: tuple[float, ...]
    act_mb: tuple[float, ...]
    out_mb: tuple[float, ...]
    input_mb: float


def _groups(flops: list[float], k: int) -> list[int]:
    """Indices of the last segment of each of ≤ k contiguous groups of balanced FLOPs."""
    cum = np.cumsum(flops)
    ends = {int(bisect_left(cum.tolist(), cum[-1] * g / k)) for g in range(1, k)}
    return sorted({min(e, len(flops) - 1) for e in ends} | {len(flops) - 1})


def _levels(seg_params: list[float]) -> list[int]:
    """Index of the last segment of each model level: a level starts at a segment with
    weights; weight-free segments join the level before them (leading ones the first)."""
    ends = [k - 1 for k in range(1, len(seg_params)) if seg_params[k] > 0
            and any(w > 0 for w in seg_params[:k])]
    return [*ends, len(seg_params) - 1]


def model_profile(model: ModelRef, n_partitions: int | None = None) -> ModelProfile:
    """The profile of one of `srole_models` or of a workload's model: one partition per
    model level, or with ``n_partitions`` the levels grouped into ≤ ``n_partitions``
    FLOP-balanced partitions.

    Raises
    ------
    ConfigError
        If the model is unknown or cannot be built, or ``n_partitions`` < 1.
    """
    from edgewise.modelparallel.workloads import known, model_key

    if n_partitions is not None and n_partitions < 1:
        raise ConfigError(f"must be at least 1, got {n_partitions}", field="n_partitions")
    known(model)
    return _profile(model_key(model), n_partitions)


@lru_cache(maxsize=16)
def _profile(key: str, n_partitions: int | None) -> ModelProfile:
    from edgewise.modelparallel.workloads import build_keyed
    from edgewise.nn.graph import layer_dag

    name, net, example = build_keyed(key)
    dag = layer_dag(net, example)
    points: list[Hashable] = candidate_points(dag)
    depth = topological_depth(dag)
    cuts = [depth[p] for p in points]
    segs: list[list[Hashable]] = [[] for _ in points[1:]]
    for v, d in depth.items():
        if d > 0:
            segs[bisect_left(cuts, d) - 1].append(v)
    at = dag.nodes
    level_ends = _levels([float(sum(at[v]["param_bytes"] for v in s)) for s in segs])
    ends = level_ends
    if n_partitions is not None:
        level_starts = [0, *(e + 1 for e in level_ends[:-1])]
        level_flops = [float(sum(at[v]["flops"] for s in segs[a:b + 1] for v in s))
                       for a, b in zip(level_starts, level_ends, strict=True)]
        ends = [level_ends[g] for g in _groups(level_flops, n_partitions)]
    starts = [0, *(e + 1 for e in ends[:-1])]
    group = [[v for s in segs[a:b + 1] for v in s] for a, b in zip(starts, ends, strict=True)]
    return ModelProfile(
        name=name, labels=tuple(str(points[e + 1]) for e in ends),
        gflop=tuple(sum(at[v]["flops"] for v in g) / 1e9 for g in group),
        param_mb=tuple(sum(at[v]["param_bytes"] for v in g) / MB for g in group),
        act_mb=tuple(sum(at[v]["output_bytes"] for v in g) / MB for g in group),
        out_mb=tuple(at[points[e + 1]]["output_bytes"] / MB for e in ends),
        input_mb=at[dag_ends(dag)[0]]["output_bytes"] / MB)


def make_job(name: str, model: ModelRef, origin: int, batch: int = 32, n_iterations: int = 50,
             job_cpu: float = JOB_CPU, n_partitions: int | None = None) -> Job:
    """A training job of ``model`` (a SROLE model or a workload) initiated at node
    ``origin`` (see the module docstring): one partition per model level unless
    ``n_partitions`` groups them."""
    from edgewise.modelparallel.workloads import model_label

    if batch < 1:
        raise ConfigError(f"must be at least 1, got {batch}", field="batch")
    prof = model_profile(model, n_partitions)
    total = sum(prof.gflop)
    period = period_s(3.0 * total * batch, job_cpu)
    label = model_label(model)
    parts = tuple(Partition(
        name=f"{label}/{i}", gflop=3.0 * g * batch, cpu=job_cpu * g / total,
        memory_mb=3.0 * p + a * batch, out_mb=o * batch, out_mbps=16.0 * o * batch / period)
        for i, (g, p, a, o) in enumerate(zip(prof.gflop, prof.param_mb, prof.act_mb,
                                              prof.out_mb, strict=True)))
    return Job(name, label, origin, parts, input_mb=prof.input_mb * batch,
               n_iterations=n_iterations, input_mbps=8.0 * prof.input_mb * batch / period)


def period_s(gflop_per_iteration: float, job_cpu: float = JOB_CPU) -> float:
    """Seconds per iteration at the job's data rate: its GFLOP keep ``job_cpu`` host busy."""
    return gflop_per_iteration / (job_cpu * HOST_GFLOPS)


def max_levels(n_partitions: int | None = None) -> int:
    """The most partitions a job of any of `srole_models` has (the largest level count)."""
    from edgewise.modelparallel.models import srole_models

    return max(len(model_profile(m, n_partitions).gflop) for m in srole_models())


def check_model(model: ModelRef) -> None:
    """ConfigError naming the known models unless ``model`` is one of SROLE's (§V-A) or a
    workload whose model builds and traces (its profile is computed, and kept)."""
    from edgewise.modelparallel.workloads import known

    known(model)
    if not isinstance(model, str):
        model_profile(model)


def cluster_jobs(network: EdgeNetwork, model: ModelRef, rng: np.random.Generator,
                 per_cluster: int = JOBS_PER_CLUSTER, n_partitions: int | None = None,
                 **kwargs: int | float) -> tuple[Job, ...]:
    """§V-A: ``per_cluster`` jobs of ``model`` in every cluster, each initiated by a
    different randomly chosen node of the cluster."""
    from edgewise.modelparallel.workloads import model_label

    check_model(model)
    jobs = []
    for c in range(network.n_clusters):
        members = network.members(c)
        for k, origin in enumerate(rng.choice(members, size=min(per_cluster, len(members)),
                                              replace=False)):
            jobs.append(make_job(f"{model_label(model)}@c{c}.{k}", model, int(origin),
                                 n_partitions=n_partitions, **kwargs))  # type: ignore[arg-type]
    return tuple(jobs)


def pagerank_jobs(workload_pct: float) -> int:
    """§V-A: 100 % is 6 PageRank jobs per cluster, each 10 % less is one fewer (50 % → 1)."""
    if not 50 <= workload_pct <= 100:
        raise ConfigError(f"must be in [50, 100], got {workload_pct}", field="workload")
    return round(workload_pct / 10) - 4


def background_tasks(network: EdgeNetwork, workload_pct: float, rng: np.random.Generator,
                     intensity: float = 1.0) -> tuple[BackgroundTask, ...]:
    """The PageRank jobs of a workload level in every cluster, each distributed over
    ``PAGERANK_WORKERS`` random nodes of its cluster, one worker per node; ``intensity``
    scales each worker's CPU and bandwidth demand (1.0: the defaults)."""
    tasks = []
    for c in range(network.n_clusters):
        members = network.members(c)
        for _ in range(pagerank_jobs(workload_pct)):
            k = min(PAGERANK_WORKERS, len(members))
            for node in rng.choice(members, size=k, replace=False):
                tasks.append(BackgroundTask(int(node), intensity * PAGERANK_CPU,
                                            PAGERANK_MEMORY_MB,
                                            intensity * PAGERANK_BANDWIDTH_MBPS))
    return tuple(tasks)


def drifted(jobs: tuple[Job, ...], background: tuple[BackgroundTask, ...],
            rng: np.random.Generator, spread: float = DEMAND_DRIFT
            ) -> tuple[tuple[Job, ...], tuple[BackgroundTask, ...]]:
    """The demands of one round as they turn out: every job's and task's CPU and bandwidth
    demand times its own factors, uniform in [1 − spread, 1 + spread]; memory unchanged."""
    draws = iter(rng.uniform(1.0 - spread, 1.0 + spread,
                             size=(len(jobs) + len(background), 2)).tolist())
    out_jobs = []
    for job in jobs:
        c, b = next(draws)
        out_jobs.append(replace(job, input_mbps=b * job.input_mbps, partitions=tuple(
            Partition(p.name, p.gflop, c * p.cpu, p.memory_mb, p.out_mb, b * p.out_mbps)
            for p in job.partitions)))
    out_bg = []
    for t in background:
        c, b = next(draws)
        out_bg.append(BackgroundTask(t.node, c * t.cpu, t.memory_mb, b * t.bandwidth_mbps))
    return tuple(out_jobs), tuple(out_bg)
