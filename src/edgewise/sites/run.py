"""Carries an Okita plan out on Ray, slot by slot: chunks moved over the emulated inter-site
links, a parameter server and workers per job on the sites the plan names, synchronous
training of the slot's chunks for E_i epochs, a checkpoint at the slot's end, and migration
by restoring that checkpoint on the new site's devices (§III-A, Fig. 2; §V-A)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import ray
from numpy.typing import NDArray

from edgewise.cluster.model import Cluster, Link
from edgewise.errors import ConfigError, RuntimeFault
from edgewise.nn.data import Dataset, digits_split
from edgewise.runtime.emulation import EmulationConfig
from edgewise.runtime.launch import monitor_handle
from edgewise.runtime.ray_cluster import RayRuntime, start_local
from edgewise.sites.jobstate import ActorSpec, JobState
from edgewise.sites.problem import Plan, SitesProblem
from edgewise.sites.sitemap import SiteDevices, site_cluster, site_devices
from edgewise.sites.slot import ChunkMove, SlotRecord, SlotRunner
from edgewise.sites.store import SiteStore, chunk_frame, split_chunks
from edgewise.sites.validate import check_plan
from edgewise.wire.frames import encode

__all__ = ["ChunkMove", "SiteRunConfig", "SitesRun", "SlotRecord", "execute_plan", "run_plan"]

Events = Callable[[str, dict[str, Any]], None]


@dataclass(frozen=True, slots=True)
class SiteRunConfig:
    """How a plan is trained and emulated.

    ``epochs_per_slot`` None trains each slot's chunks for the job's E_i epochs (the plan's
    capacity constraint 2b assumes it); links between sites get ``inter_site_mbps`` and
    ``inter_site_latency_ms``, links inside a site the ``intra_site_*`` pair; every emulated
    transfer time is multiplied by ``link_time_scale``.
    """

    model: str = "digits-cnn"
    optimizer: Literal["adam", "sgd"] = "adam"
    learning_rate: float = 0.003
    momentum: float = 0.0
    batch_size: int = 32
    seed: int = 0
    epochs_per_slot: int | None = None
    inter_site_mbps: float = 100.0
    inter_site_latency_ms: float = 5.0
    intra_site_mbps: float = 1000.0
    intra_site_latency_ms: float = 0.5
    link_time_scale: float = 1.0
    compression: Literal["lz4", "none"] = "lz4"
    actor_memory_mb: int = 512
    heartbeat_s: float = 1.0

    def actor_spec(self) -> ActorSpec:
        return ActorSpec(self.model, self.seed, self.optimizer, self.learning_rate,
                         self.momentum, self.batch_size, self.compression,
                         self.actor_memory_mb, self.heartbeat_s)


@dataclass(frozen=True, slots=True)
class SitesRun:
    """A plan carried out: a record per (job, slot), every chunk move, and the totals."""

    plan: Plan
    records: tuple[SlotRecord, ...]
    moves: tuple[ChunkMove, ...]
    final_accuracy: dict[str, float]
    checkpoint_bytes_moved: int
    param_bytes_inter_site: int
    store_counts: dict[str, dict[str, int]]
    seconds: float
    untrained_chunks: dict[str, int] = field(default_factory=dict)

    @property
    def migrations(self) -> int:
        """Slots in which a job's PS site or the set of sites hosting its workers differs
        from its previous active slot (a move between sites, not a change of worker count)."""
        return sum(r.migrated for r in self.records)

    @property
    def ps_moves(self) -> int:
        return sum(r.ps_moved for r in self.records)

    @property
    def chunks_moved(self) -> int:
        return sum(m.chunks for m in self.moves)

    @property
    def data_bytes_moved(self) -> int:
        return sum(m.wire_bytes for m in self.moves)


def emulated_cluster(problem: SitesProblem, plan: Plan, config: SiteRunConfig) -> Cluster:
    """The plan's sites as device groups with the config's intra- and inter-site links."""
    inter = Link("*", "*", config.inter_site_mbps, config.inter_site_latency_ms)
    intra = Link("*", "*", config.intra_site_mbps, config.intra_site_latency_ms)
    return site_cluster(problem, plan, inter_site=inter, intra_site=intra)


def _stores(runtime: RayRuntime, sites: list[SiteDevices], config: SiteRunConfig) -> list[Any]:
    return [SiteStore.options(**runtime.actor_options(s.store, 256, f"store-{s.site}")).remote(  # type: ignore[attr-defined]
        s.site, s.store, config.compression, config.link_time_scale) for s in sites]


def _site_arrays(train: Dataset, ids: list[NDArray[np.int64]], chunks: list[int]) -> dict[str, Any]:
    """The samples of ``chunks`` with each sample's chunk number (empty arrays if none)."""
    parts = [ids[c] for c in chunks]
    index = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    numbers = [np.full(len(p), c, np.int64) for p, c in zip(parts, chunks, strict=True)]
    chunk_of = np.concatenate(numbers) if numbers else np.zeros(0, np.int64)
    part = train.take(index)
    return {"x": part.x, "y": part.y, "ids": part.ids, "chunk": chunk_of}


def _check_data(problem: SitesProblem, n_samples: int) -> None:
    """A chunk holds at least one sample: ConfigError for a job with more chunks."""
    for i, job in enumerate(problem.jobs):
        if job.total_chunks > n_samples:
            raise ConfigError(f"{job.total_chunks} chunks, but the digits training set has "
                              f"{n_samples} samples to cut into chunks", field=f"jobs[{i}].data")


def _load_data(problem: SitesProblem, stores: list[Any],
               config: SiteRunConfig) -> dict[str, JobState]:
    """Each job's own copy of the digits training set cut into its Σ_r D_i^r chunks; site r
    starts with D_i^r of them (the data its cameras collected)."""
    train, _ = digits_split(seed=config.seed)
    _check_data(problem, len(train))
    states: dict[str, JobState] = {}
    for i, job in enumerate(problem.jobs):
        ids = split_chunks(len(train), job.total_chunks, config.seed + i) \
            if job.total_chunks else []  # positions in the training set
        bounds = np.cumsum([0, *job.data])
        remaining = [list(range(int(bounds[r]), int(bounds[r + 1])))
                     for r in range(problem.n_sites)]
        ray.get([store.accept.remote(job.name, chunk_frame(_site_arrays(train, ids, chunks),
                                                           config.compression))
                 for store, chunks in zip(stores, remaining, strict=True)])
        states[job.name] = JobState(job, [train.ids[p] for p in ids], remaining)
    return states


def run_plan(runtime: RayRuntime, problem: SitesProblem, plan: Plan,
             config: SiteRunConfig = SiteRunConfig(), *, events: Events | None = None) -> SitesRun:
    """Carry ``plan`` out on ``runtime`` (whose cluster has a Site per scenario site, as
    :func:`emulated_cluster` builds). Raises InfeasibleError for a plan violating (2a)-(2g),
    ConfigError for a cluster that cannot host it, RuntimeFault if an actor fails."""
    check_plan(problem, plan)
    started = time.perf_counter()
    sites = site_devices(runtime.cluster, problem, plan)
    stores = _stores(runtime, sites, config)
    monitor = monitor_handle(runtime, config.heartbeat_s)
    _, val = digits_split(seed=config.seed)
    validation = encode({"x": val.x, "y": val.y, "ids": val.ids})
    runner = SlotRunner(runtime, sites, stores, monitor, validation, config.actor_spec(),
                        config.epochs_per_slot, config.link_time_scale,
                        events or (lambda kind, data: None))
    states: dict[str, JobState] = {}
    try:
        states.update(_load_data(problem, stores, config))
        for slot in range(plan.n_slots):
            runner.run_slot(slot, plan.n_slots, plan.for_slot(slot), states)
        runner.finish(states)
        counts = {s.site: ray.get(h.shipped.remote()) for s, h in zip(sites, stores, strict=True)}
    except ray.exceptions.RayError as exc:
        lines = [ln for ln in str(exc).splitlines() if ln.strip()]
        raise RuntimeFault(f"the run failed: {lines[-1][:300] if lines else exc!r}") from None
    finally:
        runner.teardown(states)
        for h in stores:
            ray.kill(h, no_restart=True)
    return SitesRun(plan, tuple(runner.records), tuple(runner.moves),
                    {n: s.accuracy for n, s in states.items()}, runner.checkpoint_bytes,
                    sum(s.param_bytes_inter_site for s in states.values()), counts,
                    time.perf_counter() - started,
                    {n: sum(len(r) for r in s.remaining) for n, s in states.items()})


def execute_plan(problem: SitesProblem, plan: Plan, config: SiteRunConfig = SiteRunConfig(),
                 *, cluster: Cluster | None = None, events: Events | None = None) -> SitesRun:
    """Start a local Ray emulating ``cluster`` (default: :func:`emulated_cluster`), run the
    plan, shut Ray down. Devices compute at host speed (stretch 1 for the fastest type)."""
    check_plan(problem, plan)
    _check_data(problem, len(digits_split(seed=config.seed)[0]))
    cluster = cluster or emulated_cluster(problem, plan, config)
    site_devices(cluster, problem, plan)  # ConfigError before Ray starts
    fastest = max(d.speed for d in cluster.devices)
    runtime = start_local(cluster, EmulationConfig(host_speed=fastest,
                                                   host_cores=os.cpu_count() or 1))
    try:
        return run_plan(runtime, problem, plan, config, events=events)
    finally:
        runtime.shutdown()
