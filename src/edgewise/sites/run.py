"""Carries an Okita plan out on Ray, slot by slot (§III-A, Fig. 2; §V-A).

Chunks move over the emulated inter-site links between the sites' chunk stores (the
:class:`SiteStore` actors); each job gets a parameter server and workers on the sites the
plan names, trains the slot's chunks synchronously for E_i epochs, checkpoints at the
slot's end, and migrates by restoring that checkpoint on the new site's devices.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
import ray
from numpy.typing import NDArray

from edgewise.cluster.model import Cluster, Link
from edgewise.errors import RuntimeFault
from edgewise.nn.workload import Workload
from edgewise.runtime.emulation import EmulationConfig
from edgewise.runtime.launch import MemberSpec, monitor_handle
from edgewise.runtime.limiting import Limiter, run_inline
from edgewise.runtime.ray_cluster import RayRuntime, start_local
from edgewise.runtime.shaping import ByteCounter, ShapedLink
from edgewise.runtime.transport import carry
from edgewise.sites.chunks import check_data, chunk_frame, load_data
from edgewise.sites.jobdata import JobData, checked_workloads, job_data
from edgewise.sites.jobstate import JobState
from edgewise.sites.problem import Plan, SitesProblem
from edgewise.sites.sitemap import SiteDevices, site_cluster, site_devices
from edgewise.sites.slot import ChunkMove, SlotRecord, SlotRunner, SlotSettings
from edgewise.sites.validate import check_plan
from edgewise.wire.frames import Codec, decode, encode

__all__ = ["ChunkMove", "SiteRunConfig", "SiteStore", "SitesRun", "SlotRecord",
           "emulated_cluster", "execute", "execute_emulated"]

Events = Callable[[str, dict[str, Any]], None]
Arrays = dict[str, NDArray[Any]]


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

    def slot_settings(self) -> SlotSettings:
        """What the slots are trained with (every actor built alike)."""
        members = MemberSpec(self.model, self.seed, self.optimizer, self.learning_rate,
                             self.momentum, self.compression, self.actor_memory_mb,
                             self.heartbeat_s)
        return SlotSettings(members, self.batch_size, self.epochs_per_slot,
                            self.link_time_scale)


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


@ray.remote(max_concurrency=8)  # type: ignore[call-overload]
class SiteStore:
    """A site's chunk store (its HDFS node, §V-A): its data chunks, shipped to other sites
    over the emulated inter-site link (the data transmission phase, Fig. 2) and served to
    the site's workers. Holds chunks per job as arrays (x, y, ids, chunk); no pickled
    payloads: chunks arrive and leave as transport frames. Counts the bytes it shipped per
    link."""

    def __init__(self, site: str, device: str, compression: Codec = "lz4",
                 time_scale: float = 1.0) -> None:
        self.site, self.device, self.compression = site, device, compression
        self.time_scale = time_scale
        self.held: dict[str, Arrays] = {}
        self.jobs: dict[str, str] = {}  # worker name -> its job
        self.counter = ByteCounter()

    def accept(self, job: str, frame: bytes) -> int:
        """Store the chunks in ``frame`` for ``job``; returns the samples now held for it."""
        arrays = {k: v.copy() for k, v in decode(frame).arrays.items()}
        have = self.held.get(job)
        if have is not None:
            arrays = {k: np.concatenate([have[k], arrays[k]]) for k in arrays}
        self.held[job] = arrays
        return len(arrays["ids"])

    def chunks(self, job: str) -> list[int]:
        """The chunk numbers held for ``job``, sorted."""
        have = self.held.get(job)
        return [] if have is None else sorted({int(c) for c in have["chunk"]})

    def ship(self, job: str, chunks: list[int], link: Link, to: Any) -> int:
        """Remove ``chunks`` of ``job`` from this site and send them over ``link`` to the
        store ``to`` (waits what the transport emulates of the link, counts the bytes; the
        frame itself travels from this device to the other); returns the frame's size."""
        have = self.held.get(job)
        wanted = np.asarray(chunks, np.int64)
        if have is None or not np.isin(wanted, have["chunk"]).all():
            raise KeyError(f"site {self.site} does not hold chunks {chunks} of {job}")
        mask = np.isin(have["chunk"], wanted)
        out = {k: v[mask] for k, v in have.items()}
        self.held[job] = {k: v[~mask] for k, v in have.items()}
        frame = chunk_frame(out, self.compression)
        shaped = ShapedLink(link, time_scale=self.time_scale)
        carry(shaped, len(frame), self.counter, raw_bytes=sum(int(v.nbytes) for v in out.values()))
        ray.get(to.accept.remote(job, frame))
        return len(frame)

    def expect(self, worker: str, job: str) -> None:
        """``worker`` trains ``job``: its :meth:`shard` requests read that job's chunks."""
        self.jobs[worker] = job

    def drop(self, job: str, chunks: list[int]) -> int:
        """Forget ``chunks`` of ``job`` (trained); returns the samples still held for it."""
        have = self.held.get(job)
        if have is None:
            return 0
        keep = ~np.isin(have["chunk"], np.asarray(chunks, np.int64))
        self.held[job] = {k: v[keep] for k, v in have.items()}
        return int(keep.sum())

    def shard(self, worker: str, positions: NDArray[np.int64]) -> bytes:
        """The samples of ``worker``'s job with ids ``positions`` (all held here) as one frame
        (the interface :class:`edgewise.runtime.worker.Worker` loads its shard through)."""
        have = self.held.get(self.jobs.get(worker, ""))
        if have is None:
            raise KeyError(f"site {self.site} holds no data for worker {worker}")
        index = {int(s): k for k, s in enumerate(have["ids"])}
        missing = [int(s) for s in positions if int(s) not in index]
        if missing:
            raise KeyError(f"site {self.site} does not hold samples {missing[:5]} for {worker}")
        take = np.asarray([index[int(s)] for s in positions], np.int64)
        return encode({k: have[k][take] for k in ("x", "y", "ids")},
                      compression=self.compression)

    def shipped(self) -> dict[str, int]:
        """Frames and bytes shipped to other sites, in total and per link."""
        return self.counter.snapshot_dict()


def emulated_cluster(problem: SitesProblem, plan: Plan, config: SiteRunConfig) -> Cluster:
    """The plan's sites as device groups with the config's intra- and inter-site links."""
    inter = Link("*", "*", config.inter_site_mbps, config.inter_site_latency_ms)
    intra = Link("*", "*", config.intra_site_mbps, config.intra_site_latency_ms)
    return site_cluster(problem, plan, inter_site=inter, intra_site=intra)


def _stores(runtime: RayRuntime, sites: list[SiteDevices], config: SiteRunConfig) -> list[Any]:
    return [SiteStore.options(**runtime.actor_options(s.store, 256, f"store-{s.site}")).remote(  # type: ignore[attr-defined]
        s.site, s.store, config.compression, config.link_time_scale) for s in sites]


def _checked_data(problem: SitesProblem, seed: int, workloads: Mapping[str, Workload] | None,
                  limited: Limiter) -> dict[str, JobData]:
    """Each job's data, its workload (``workloads``' by job name, else its scenario entry's)
    dry-run through ``limited`` first; ConfigError for a bad workload or too few samples."""
    data = job_data(problem, seed, limited(checked_workloads, problem, seed, workloads))
    _check_sizes(problem, data)
    return data


def _check_sizes(problem: SitesProblem, data: Mapping[str, JobData]) -> None:
    check_data(problem, {n: len(d.train) for n, d in data.items()},
               own={n for n, d in data.items() if d.workload is not None})


def execute(runtime: RayRuntime, problem: SitesProblem, plan: Plan, /, *,
            config: SiteRunConfig = SiteRunConfig(), events: Events | None = None,
            data: Mapping[str, JobData] | None = None,
            workloads: Mapping[str, Workload] | None = None,
            limited: Limiter = run_inline) -> SitesRun:
    """Carry ``plan`` (a schedule a policy made, e.g. ``simulate(problem, policy).plan``) out
    on ``runtime``, whose cluster has a Site per scenario site (as :func:`emulated_cluster`
    builds). ``events(kind, data)`` hears of every slot, transfer, epoch and job slot.
    ``data`` is each job's (``job_data``; read here when not given: each job trains
    ``workloads``' entry by its name (built already, e.g. from a manager's HTTP spec), else
    the workload its scenario entry names, else the digits CNN; the workloads are dry-run
    first through ``limited``, the manager's child process). Raises InfeasibleError for a
    plan violating (2a)-(2g), ConfigError for a cluster that cannot host it or a job's bad
    workload (before any actor starts), RuntimeFault if an actor fails."""
    check_plan(problem, plan)
    if data is None:
        data = _checked_data(problem, config.seed, workloads, limited)
    else:
        _check_sizes(problem, data)
    started = time.perf_counter()
    sites = site_devices(runtime.cluster, problem, plan)
    stores = _stores(runtime, sites, config)
    monitor = monitor_handle(runtime, config.heartbeat_s)
    settings = config.slot_settings()
    digits = [d for d in data.values() if d.workload is None]  # jobs with no workload
    default = digits[0] if digits else next(iter(data.values()))
    runner = SlotRunner(runtime, sites, stores, monitor, default.validation, settings,
                        events or (lambda kind, data: None))
    states: dict[str, JobState] = {}
    try:
        states.update(load_data(problem, stores, {n: d.train for n, d in data.items()},
                                config.seed, config.compression))
        for name, own in data.items():
            if own.workload is not None:
                states[name].members = replace(settings.members, model=own.workload)
                states[name].validation = own.validation
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


def execute_emulated(problem: SitesProblem, plan: Plan, *,
                     config: SiteRunConfig = SiteRunConfig(), cluster: Cluster | None = None,
                     events: Events | None = None) -> SitesRun:
    """Start a local Ray emulating ``cluster`` (default: :func:`emulated_cluster`),
    :func:`execute` the plan, shut Ray down. Devices compute at host speed (stretch 1 for
    the fastest type)."""
    check_plan(problem, plan)
    data = _checked_data(problem, config.seed, None, run_inline)  # once, before Ray starts
    cluster = cluster or emulated_cluster(problem, plan, config)
    site_devices(cluster, problem, plan)  # ConfigError before Ray starts
    fastest = max(d.speed for d in cluster.devices)
    runtime = start_local(cluster, EmulationConfig(host_speed=fastest,
                                                   host_cores=os.cpu_count() or 1))
    try:
        return execute(runtime, problem, plan, config=config, events=events, data=data)
    finally:
        runtime.shutdown()
