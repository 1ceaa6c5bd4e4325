"""How a run's members are built and started: its parameter server (one, or its shards:
``runtime.shards``) and its workers."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from edgewise.cluster.model import Link
from edgewise.nn.models import Warmup
from edgewise.nn.workload import Workload
from edgewise.runtime.plan import TrainConfig, TrainPlan
from edgewise.runtime.ps import ParameterServer
from edgewise.runtime.ray_cluster import RayRuntime
from edgewise.runtime.staleness import Treatment
from edgewise.runtime.vessel_pool import spawn_member
from edgewise.runtime.worker import Worker
from edgewise.wire.frames import WireDtype

__all__ = ["MemberSpec", "Server", "server_devices", "server_links", "start_ps",
           "start_servers", "start_worker"]


@dataclass(frozen=True, slots=True)
class MemberSpec:
    """How every member of a run (its parameter server and its workers) is built: the
    workload (or a built-in model's name, trained on digits) and its seed, the optimiser
    and its learning-rate schedule over ``epochs`` (after its ``warmup``), the transport's
    compression, the memory reserved per actor and the heartbeat period."""

    model: str | Workload
    seed: int
    optimizer: str
    learning_rate: float
    momentum: float
    compression: str
    memory_mb: int
    heartbeat_s: float
    lr_schedule: str = "constant"
    epochs: int = 1
    treatment: Treatment = field(default_factory=Treatment)
    ps_transport: str = "socket"  # the workers' pushes and pulls (TrainConfig.ps_transport)
    overlap: bool = False  # workers compute the next batch while the server answers
    wire_dtype: WireDtype = "float32"  # weights and gradients on the wire (TrainConfig's)
    sync_deltas: bool = False  # a sync run's narrowed replies as changes (runtime.syncdelta)
    warmup: Warmup = field(default_factory=Warmup)  # a raised rate's (runtime.balance)

    @staticmethod
    def of(config: TrainConfig, workload: Workload | None = None) -> MemberSpec:
        """The members of a training-engine run (``workload``: default the config's); the
        ``async`` loop's server treats staleness with ``config.staleness``."""
        treatment = Treatment(config.staleness if config.mode == "async" else "none")
        return MemberSpec(workload or config.resolved_workload(), config.seed,
                          config.optimizer, config.learning_rate, config.momentum,
                          config.compression, config.worker_memory_mb, config.heartbeat_s,
                          config.lr_schedule, config.epochs, treatment, config.ps_transport,
                          config.overlap and config.mode == "async", config.wire,
                          config.mode == "sync" and config.wire != "float32")


def start_ps(runtime: RayRuntime, spec: MemberSpec, device: str, name: str,
             validation: bytes | list[bytes], checkpoint: bytes | None = None,
             calibration: list[bytes] | None = None, shard: tuple[int, int] = (0, 1)) -> Any:
    """A parameter server called ``name`` pinned to ``device``, restored from ``checkpoint``
    when one is given (a new attempt, or a server moved to another device); ``calibration``:
    a few training batches to re-estimate BatchNorm statistics on before each evaluation;
    ``shard``: (index, count) of a sharded server's (``runtime.shards``)."""
    options = runtime.member_options(device, spec.memory_mb, name)
    return spawn_member(
        ParameterServer, options, spec.model, spec.seed, spec.optimizer, spec.learning_rate,
        spec.momentum, runtime.stretch[device], validation, checkpoint, spec.compression,
        schedule=spec.lr_schedule, epochs=spec.epochs, warmup=spec.warmup,
        treatment=spec.treatment,
        calibration=calibration, transport=spec.ps_transport, wire_dtype=spec.wire_dtype,
        sync_deltas=spec.sync_deltas, shard=shard)


def start_worker(runtime: RayRuntime, spec: MemberSpec, device: str, name: str, *, ps: Any,
                 ps_link: Link | list[Link], store_link: Link, batch_size: int, monitor: Any,
                 sync: bool, steps: int = 0) -> Any:
    """A worker called ``name`` pinned to ``device``, talking to ``ps`` and to its data store
    over the given (emulated) links; it loads its shard when told to. ``steps > 0``: it
    makes that many steps an epoch (balanced synchronous steps)."""
    options = runtime.member_options(device, spec.memory_mb, name)
    return spawn_member(
        Worker, options, name, device, spec.model, spec.seed, batch_size,
        runtime.stretch[device], runtime.cluster.device(device).memory_mb, ps, ps_link,
        store_link, monitor, spec.heartbeat_s, sync, spec.compression, steps,
        spec.ps_transport, spec.overlap, spec.wire_dtype)


Server = tuple[str, str, Any]
"""One of a run's parameter servers: its device, its member name and its actor handle."""


def server_devices(plan: TrainPlan, shards: str) -> list[str]:
    """Where a run's servers go, in shard order: the plan's server device alone (``one``),
    or one shard on each worker device (``workers``: ``runtime.shards``), as BytePS puts
    a server on every worker machine; the plan's server device then holds none (on the
    Deep-Edge testbed a Raspberry Pi, the slowest device, whose shard would finish last)."""
    if shards == "one":
        return [plan.ps_device]
    return list(plan.workers)


def start_servers(runtime: RayRuntime, spec: MemberSpec, plan: TrainPlan, name: str,
                  shards: str, checkpoint: bytes | None) -> list[Server]:
    """The run's parameter server ``name``, or its shards (``name``, ``name-s1``, ...), each
    restored from ``checkpoint`` (one server's: a shard takes its range)."""
    devices = server_devices(plan, shards)
    out: list[Server] = []
    for index, device in enumerate(devices):
        member = name if index == 0 else f"{name}-s{index}"
        out.append((device, member, start_ps(runtime, spec, device, member, [], checkpoint,
                                             None, shard=(index, len(devices)))))
    return out


def server_links(runtime: RayRuntime, worker: str, servers: list[Server]) -> list[Link]:
    """The links from ``worker`` to each server: the transport's, or none at all (no time,
    no cut) to a shard on the worker's own device."""
    return [Link(worker, worker, math.inf, 0.0) if device == worker
            else runtime.transport_link(worker, device) for device, _, _ in servers]
