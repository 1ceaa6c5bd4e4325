"""Profiling a device of any Ray cluster where it is (Deep-Edge §IV-B1): a profiler actor
pinned to the device trains under each stress point with the co-located app running, so its
stressors and its app share the device's own CPU and memory; every step's gradients go to a
real parameter server on the cluster's server device, while companion workers on other
devices load that server (the ``n_workers`` of EstUpdateTime) at the measured batch (so a
row's ``batch_mean`` is its batch: the uniform batches the policies plan; with companions
at a fixed 32, ``batch_mean`` had only one value per worker count, and the learned
EstUpdateTime read a plan's batch 128 on four workers as the one-worker regime)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import ray
import torch
from torch import nn

from edgewise.cluster.model import Link, Role
from edgewise.nn.data import Dataset, digits_split
from edgewise.nn.workload import Workload, open_data
from edgewise.perf.app_process import start_background_app
from edgewise.perf.metrics import sample_metrics, without_self
from edgewise.perf.profile_file import Sample
from edgewise.perf.profiler import PointProfiler, ProfileConfig, ProfileResult, profile
from edgewise.perf.stress import Stressor, StressPoint, stress_grid
from edgewise.runtime.launch import MemberSpec, start_ps
from edgewise.runtime.plan import TrainConfig
from edgewise.runtime.psplane import PUSH_ASYNC, PlaneClient, connect
from edgewise.runtime.ray_cluster import RayRuntime
from edgewise.runtime.shaping import ByteCounter, ShapedLink
from edgewise.runtime.trainstate import FlatState
from edgewise.runtime.transport import carry
from edgewise.runtime.vessel_pool import release_members
from edgewise.wire.frames import encode

__all__ = ["DeviceProbe", "DeviceProfiler", "device_grid", "device_state", "profile_device"]

State = tuple[float, float, float]
ProgressFn = Callable[[int, int, str], None]


@ray.remote(max_concurrency=2)  # type: ignore[call-overload]
class DeviceProfiler:
    """A :class:`~edgewise.perf.profiler.PointProfiler` on one device whose update is a push
    to the parameter server ``ps`` over ``ps_link`` and the pull of its new weights."""

    def __init__(self, config: ProfileConfig, ps: Any, ps_link: Link,
                 ps_state: State | None, compression: str = "lz4", name: str = "profiler"
                 ) -> None:
        torch.set_num_threads(1)
        self.ps, self.link, self.counter = ps, ShapedLink(ps_link), ByteCounter()
        self.compression, self.wire_dtype = compression, config.wire_dtype
        self.flat: FlatState | None = None
        self.name, self.plane_asked = name, False
        self.plane: PlaneClient | None = None
        self.plane_lock = threading.Lock()  # one request at a time on its socket
        self.profiler = PointProfiler(config, self._push, ps_state)

    def _plane(self) -> PlaneClient | None:
        """The server's data plane, as the run's workers push (``runtime.worker``): asked for
        once; None where the server opened none or this device cannot reach it (then the
        pushes go as Ray calls, as the workers' would)."""
        if not self.plane_asked:
            self.plane_asked = True
            self.plane = connect(ray.get(self.ps.plane_endpoint.remote()), self.name,
                                 self.name)
        return self.plane

    def _push(self, model: nn.Module, ids: np.ndarray) -> None:
        """The workers' update (``runtime.worker``): the flat gradients and the batch's ids
        to the server, its weights back into the model."""
        if self.flat is None or self.flat.model is not model:
            self.flat = FlatState(model, self.wire_dtype)
        self.flat.check_grads()
        frame = self.flat.gradients_frame(ids, self.compression)  # type: ignore[arg-type]
        carry(self.link, len(frame), self.counter, raw_bytes=self.flat.nbytes)
        array = np.frombuffer(frame, np.uint8)
        plane = self._plane()
        if plane is not None:
            with self.plane_lock:
                weights = plane.call(PUSH_ASYNC, 0, array)
        else:
            weights = ray.get(self.ps.push_async.remote(array))
        carry(self.link, len(weights))
        self.flat.load_weights(weights)
        self.flat.zero_grad()

    def point(self, point: StressPoint, items: list[tuple[int, int]],
              companions: Sequence[Any] = ()) -> list[tuple[str, dict[str, Any]]]:
        """The samples of ``items`` at ``point`` as (key, row) pairs, measured while the
        ``companions`` (loading the server) train at each sample's batch too."""

        def follow(batch: int) -> None:
            ray.get([c.follow.remote(batch) for c in companions])

        samples = self.profiler.point(point, items, n_workers=1 + len(companions),
                                      on_batch=follow)
        return [(s.key, dict(s.row)) for s in samples]

    def load(self, seconds: float, batch: int) -> int:
        return self.profiler.load(seconds, batch)

    def follow(self, batch: int) -> None:
        self.profiler.follow(batch)

    def stop_load(self) -> None:
        self.profiler.stop_load()

    def close(self) -> None:
        self.profiler.close()
        if self.plane is not None:
            self.plane.close()


@ray.remote(max_concurrency=2)  # type: ignore[call-overload]
class DeviceProbe:
    """Reads a device's state (CPU, accelerator, memory %, against the device's own CPU
    quota and memory where a cgroup holds it) and holds a stressor on it."""

    def __init__(self) -> None:
        self.stressor: Stressor | None = None

    def state(self, interval_s: float = 1.0, app_kind: str = "",
              app_period_ms: float = 200.0) -> State:
        """The state over ``interval_s``, with the co-located app ``app_kind`` running
        during it (as the profiler's states were measured) unless it is empty."""
        app = start_background_app(app_kind, app_period_ms) if app_kind else None
        try:
            sample_metrics()
            time.sleep(interval_s)
            m = without_self(sample_metrics())  # as the profiler's states before an update
        finally:
            if app is not None:
                app.stop()
        return (m["cpu_percent"], m.get("accelerator_percent", 0.0), m["memory_percent"])

    def stress(self, point: StressPoint, timeout_s: float) -> None:
        self.unstress()
        if not point.idle:
            self.stressor = Stressor.at(point, timeout_s=timeout_s)
            self.stressor.start()

    def unstress(self) -> None:
        if self.stressor is not None:
            self.stressor.stop()
            self.stressor = None


def device_state(runtime: RayRuntime, device: str, app_kind: str = "",
                 app_period_ms: float = 200.0, interval_s: float = 1.0) -> State:
    """The state of ``device`` now, read on the device over ``interval_s`` (with the app
    ``app_kind`` running at ``app_period_ms``, unless empty)."""
    probe = DeviceProbe.options(**runtime.actor_options(device, 64)).remote()  # type: ignore[attr-defined]
    try:
        cpu, gpu, mem = ray.get(probe.state.remote(interval_s, app_kind, app_period_ms))
        return float(cpu), float(gpu), float(mem)
    finally:
        ray.kill(probe)


def device_grid(memory_mb: int, cpu_percents: Sequence[int] = (0, 30, 60, 90),
                memory_fractions: Sequence[float] = (0.0, 0.1, 0.25)) -> list[StressPoint]:
    """The stress grid of a device of ``memory_mb``: CPU levels of its own CPU, memory
    levels as fractions of its memory (rounded down to 64 MB)."""
    levels = [int(f * memory_mb) // 64 * 64 for f in memory_fractions]
    return stress_grid(cpu_percents, levels, (0,))


def _validation(workload: Workload | None, seed: int, most: int = 256) -> Dataset:
    """The server's validation samples: digits', or at most ``most`` of the workload's."""
    if workload is None:
        return digits_split(seed=seed)[1]
    source = open_data(workload, seed)
    return source.read("val", np.arange(min(most, source.size("val")), dtype=np.int64))


@dataclass(frozen=True, slots=True)
class _Members:
    profiler: Any
    companions: tuple[Any, ...]
    ps: Any


def _start(runtime: RayRuntime, device: str, config: ProfileConfig,
           companions: Sequence[str], ps_device: str, seed: int) -> _Members:
    # the profiler pushes as the run will (``config.wire_dtype``); its pushes are
    # asynchronous, so its replies are rounded weights, as many bytes before LZ4 as a
    # synchronous step's rounded changes (runtime.syncdelta), which need every worker in step
    spec = replace(MemberSpec.of(TrainConfig(seed=seed, workload=config.workload,
                                             wire_dtype=config.wire_dtype)), sync_deltas=False)
    val = _validation(config.workload, seed)
    validation = encode({"x": val.x, "y": val.y, "ids": val.ids}, compression=spec.compression)  # type: ignore[arg-type]
    ps = start_ps(runtime, spec, ps_device, f"profile-ps-{device}", validation)
    ps_state = device_state(runtime, ps_device)

    def member(where: str, cfg: ProfileConfig) -> Any:
        options = runtime.actor_options(where, spec.memory_mb)
        return DeviceProfiler.options(**options).remote(  # type: ignore[attr-defined]
            cfg, ps, runtime.transport_link(where, ps_device), ps_state, spec.compression,
            f"profiler-{where}")

    quiet = replace(config, app_kind="")
    return _Members(member(device, config), tuple(member(c, quiet) for c in companions), ps)


def _n_workers(point_index: int, levels: Sequence[int], n_memory: int) -> int:
    """Worker counts assigned to the grid's stress points (CPU level slowest, then memory)
    as a Latin square, so that every CPU and every memory level meets every count."""
    cpu_level, memory_level = divmod(point_index, n_memory)
    return levels[(cpu_level + memory_level) % len(levels)]


def profile_device(runtime: RayRuntime, device: str, output: Path, config: ProfileConfig, *,
                   n_workers_levels: Sequence[int] = (1, 2, 3, 4),
                   progress: ProgressFn | None = None) -> ProfileResult:
    """Profile ``device`` of ``runtime``'s cluster into ``output`` (resumable, as
    :func:`~edgewise.perf.profiler.profile`): per stress point ``n - 1`` companion workers
    (other workers of the cluster) train at the same time, ``n`` cycling through
    ``n_workers_levels`` (every count up to four: a plan on a cluster of four workers may use
    any of them, and a learned model has nothing to say of a count it never saw); times are
    recorded in device time (÷ the runtime's time dilation).
    """
    cluster = runtime.cluster
    servers = cluster.with_role(Role.PARAMETER_SERVER)
    ps_device = servers[0].name if servers else device
    others = [d.name for d in cluster.with_role(Role.WORKER) if d.name not in (device, ps_device)]
    levels = sorted({min(n, len(others) + 1) for n in n_workers_levels})
    config = replace(config, time_dilation=runtime.time_dilation)
    started: list[_Members] = []  # the actors, started when a sample is to be measured
    points = list(dict.fromkeys(config.grid))
    n_mem = len({p.memory_mb for p in points})

    def measure(point: StressPoint, items: list[tuple[int, int]],
                record: Callable[[Sample], None]) -> list[Sample]:
        n = _n_workers(points.index(point), levels, n_mem)
        if not started:
            started.append(_start(runtime, device, config, others[: max(levels) - 1],
                                  ps_device, config.seed))
        members = started[0]
        helpers = members.companions[: n - 1]
        budget = 60.0 + len(items) * (config.stop_rule.max_s + 10.0) * 3
        loads = [c.load.remote(budget, items[0][0]) for c in helpers]
        try:
            rows = ray.get(members.profiler.point.remote(point, items, list(helpers)))
        finally:
            for c in helpers:
                c.stop_load.remote()
            ray.get(loads)
        samples = [Sample(key, row) for key, row in rows]
        for s in samples:
            record(s)
        return samples

    try:
        return profile(output, config, progress, measure)
    finally:
        for members in started:
            ray.get([m.close.remote() for m in (members.profiler, *members.companions)])
            release_members([members.profiler, *members.companions, members.ps])

