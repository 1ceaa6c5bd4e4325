"""What a model-update run is told: the training configuration and the plan (shards, batches)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, get_args

from edgewise.cluster.model import Cluster, Role
from edgewise.errors import ConfigError
from edgewise.nn.workload import Workload, builtin_workload
from edgewise.runtime.loops import (
    DEFAULT_EVALUATION,
    DEFAULT_MODE,
    MODES,
    Evaluation,
    Mode,
    PsShards,
)
from edgewise.runtime.staleness import TreatmentName
from edgewise.wire.frames import WireChoice, WireDtype, resolve_wire, wire_dtype_named

__all__ = ["DEFAULT_EVALUATION", "DEFAULT_MODE", "DEFAULT_STALENESS", "MAX_REFERENCE_BATCH",
           "MODES", "Evaluation", "Mode", "PsShards", "TrainConfig", "TrainPlan",
           "check_reservations", "equal_plan", "evaluation_named", "ps_shards_named",
           "run_shards"]

def ps_shards_named(value: str, field: str) -> PsShards:
    """``value`` as a :data:`PsShards`; ConfigError naming ``field`` if it is none."""
    for known in get_args(PsShards):
        if value == known:
            return known  # type: ignore[no-any-return]
    raise ConfigError(f"must be auto, one or workers, got {value!r}", field=field)


def evaluation_named(value: str, field: str) -> Evaluation:
    """``value`` as an :data:`Evaluation`; ConfigError naming ``field`` if it is none."""
    for known in get_args(Evaluation):
        if value == known:
            return known  # type: ignore[no-any-return]
    raise ConfigError(f"must be after or beside, got {value!r}", field=field)


MAX_REFERENCE_BATCH = 1_000_000
"""The largest ``TrainConfig.lr_reference_batch`` (the CLI's and the manager's bound too)."""

#: The staleness treatment of the ``async`` loop, chosen by measurement (docs/runtime.md).
DEFAULT_STALENESS: TreatmentName = "staleness-lr"


@dataclass(frozen=True, slots=True)
class TrainConfig:
    """How to train: the workload, loop, epochs, optimiser and the runtime's knobs.

    ``workload`` is what trains (model, weights, data, task); without one, the built-in
    ``model`` trains on the bundled digits (the quick default)."""

    model: str = "digits-cnn"
    workload: Workload | None = None
    mode: Mode = DEFAULT_MODE
    staleness: TreatmentName = DEFAULT_STALENESS  # the async loop's treatment
    epochs: int = 8
    optimizer: Literal["adam", "sgd"] = "adam"
    learning_rate: float = 0.003
    lr_schedule: Literal["constant", "cosine"] = "constant"  # cosine: anneal over the epochs
    lr_reference_batch: int = 0
    """The global batch ``learning_rate`` was set for; the ``sync`` loop scales the rate from
    it to its own global batch (by the square root for Adam, linearly for SGD), and a rate
    that rises warms up from the reference's over 5/90 of the epochs (``runtime.balance``);
    0: the plan's global batch (the rate is the plan's)."""
    momentum: float = 0.0
    seed: int = 0
    heartbeat_s: float = 1.0
    compression: Literal["lz4", "none"] = "lz4"
    max_restarts: int = 10
    worker_memory_mb: int = 1024
    target_accuracy: float | None = None  # stop early once validation accuracy reaches it
    chunk_bytes: int = 4 << 20  # the data store ships shards in frames of about this size
    overlap: bool = False
    """The ``async`` loop computes a worker's next batch while the server answers its push
    (the gradient one server version staler; ``async-paper`` and ``sync`` never do). Off by
    default: in the time-to-accuracy race it shortened the asynchronous epochs by 7-18 %
    and cost more in accuracy (docs/runtime.md, "Overlapped pushes")."""
    wire_dtype: WireChoice = "auto"
    """What the weights and gradients travel as between the server and its workers:
    ``float32`` as they are, ``bfloat16``/``float16`` (half the bytes; the server's
    weights and optimiser state stay float32; runtime.trainstate, runtime.syncdelta), or
    ``int8`` (a quarter, with a scale per block of 256; the ``sync`` loop only:
    runtime.narrowing);
    ``auto``: ``bfloat16`` for the ``sync`` loop, ``float32`` for the others
    (:attr:`wire`)."""
    evaluation: Evaluation = DEFAULT_EVALUATION
    """When an epoch's validation reading is taken: ``after`` the epoch, within its time, or
    ``beside`` the next epoch, by the evaluating worker on a network of the evaluation's own,
    on a thread at idle priority, while it trains (``runtime.readings``, ``runtime.idle``):
    the epoch's time holds no evaluation, and its reading is known its evaluation's seconds
    after the epoch's end (``EpochRecord.reading_device_seconds``). The last epoch's
    reading is always taken after it; beside, an epoch's checkpoint is saved once its
    reading is in, with the BatchNorm statistics the reading re-estimated, as after."""
    ps_transport: Literal["socket", "ray"] = "socket"
    """How workers push and pull every batch: over a TCP connection each to the server's
    data plane (``runtime.psplane``), or as Ray actor calls (about 20 times the server's CPU
    per exchange; for networks that let Ray's ports through and no other)."""
    ps_shards: PsShards = "auto"
    """Where the parameter server's state lives: on ``one`` device (the plan's server
    device), or cut into ranges, one on each worker's device, each worker exchanging each
    range with its shard (``workers``; the ``sync`` loop only, which takes the same steps
    either way: ``runtime.shards``); ``auto``: ``workers`` for the ``sync`` loop, ``one``
    for the others (:attr:`shards`)."""

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigError(f"must be one of {', '.join(MODES)}, got {self.mode!r}",
                              field="mode")
        wire_dtype_named(self.wire_dtype, "wire_dtype")
        if self.wire_dtype == "int8" and self.mode != "sync":
            raise ConfigError("int8 needs the sync loop, whose replies are changes with error "
                              "feedback; an asynchronous reply would be the weights in 8 bits",
                              field="wire_dtype")
        evaluation_named(self.evaluation, "evaluation")
        if not 0 <= self.lr_reference_batch <= MAX_REFERENCE_BATCH:
            raise ConfigError(f"must be 0 to {MAX_REFERENCE_BATCH}, got "
                              f"{self.lr_reference_batch}", field="lr_reference_batch")
        ps_shards_named(self.ps_shards, "ps_shards")
        if self.ps_shards == "workers" and self.mode != "sync":
            raise ConfigError("a sharded server needs the sync loop, whose shards take every "
                              "step together; the async loop keeps one server",
                              field="ps_shards")
        if self.ps_transport not in ("socket", "ray"):
            raise ConfigError(f"must be socket or ray, got {self.ps_transport!r}",
                              field="ps_transport")

    @property
    def shards(self) -> Literal["one", "workers"]:
        """Where this run's server lives (``ps_shards`` with ``auto`` resolved)."""
        if self.ps_shards == "auto":
            return "workers" if self.mode == "sync" else "one"
        return self.ps_shards

    @property
    def wire(self) -> WireDtype:
        """The wire dtype this run uses (``wire_dtype`` with ``auto`` resolved)."""
        return resolve_wire(self.wire_dtype, self.mode == "sync")

    def resolved_workload(self) -> Workload:
        """The workload to train: ``workload``, else ``model`` on digits."""
        return self.workload if self.workload is not None else builtin_workload(self.model)


@dataclass(frozen=True, slots=True)
class TrainPlan:
    """Per-worker data shard d_i (samples) and batch size b_i, and where the parameter
    server and the data store run (Deep-Edge's output D, B)."""

    shards: Mapping[str, int]
    batch_sizes: Mapping[str, int]
    ps_device: str
    store_device: str
    policy: str = field(default="equal", compare=False)

    @property
    def workers(self) -> tuple[str, ...]:
        return tuple(w for w, d in self.shards.items() if d > 0)

    def validate(self, cluster: Cluster, n_samples: int) -> None:
        """Raise ConfigError unless the plan fits the cluster and covers the data once."""
        names = set(cluster.device_names)
        for field_name, devices in (("shards", self.shards), ("batch_sizes", self.batch_sizes)):
            unknown = sorted(set(devices) - names)
            if unknown:
                raise ConfigError(f"unknown devices {', '.join(unknown)}", field=field_name)
        for where in ("ps_device", "store_device"):
            if getattr(self, where) not in names:
                raise ConfigError(f"no device named {getattr(self, where)!r}", field=where)
        if sum(self.shards.values()) != n_samples:
            raise ConfigError(f"shards sum to {sum(self.shards.values())}, the data has "
                              f"{n_samples} samples", field="shards")
        for w in self.workers:
            if self.batch_sizes.get(w, 0) < 1:
                raise ConfigError(f"worker {w} has no batch size >= 1", field="batch_sizes")


STORE_MEMORY_MB = 256
"""What the data store reserves of its device's memory."""


def check_reservations(cluster: Cluster, plan: TrainPlan, member_memory_mb: int,
                       shards: str = "one") -> None:
    """ConfigError naming the first device whose memory cannot hold what the plan puts on
    it: ``member_memory_mb`` per worker and for the parameter server (for each shard, on
    the workers' devices, with ``shards`` ``workers``), and the data store's
    :data:`STORE_MEMORY_MB`. Ray would leave such an actor pending for ever (the job
    hanging at 0 samples), so a run checks before it starts any."""
    reserved: dict[str, int] = dict.fromkeys(plan.workers, member_memory_mb)
    members: dict[str, list[str]] = {w: ["a worker"] for w in plan.workers}
    servers = [(plan.ps_device, member_memory_mb, "the parameter server")] if shards == "one" \
        else [(w, member_memory_mb, "a shard of the parameter server") for w in plan.workers]
    for device, mb, what in (*servers, (plan.store_device, STORE_MEMORY_MB, "the data store")):
        reserved[device] = reserved.get(device, 0) + mb
        members.setdefault(device, []).append(what)
    for device, mb in reserved.items():
        have = cluster.device(device).memory_mb
        if mb > have:
            raise ConfigError(
                f"{device} has {have} MB of memory, less than the {mb} MB the plan reserves "
                f"on it for {' and '.join(members[device])} ({member_memory_mb} MB per "
                "member); give the device more memory_mb or none of those roles",
                field="worker_memory_mb")


def run_shards(cluster: Cluster, plan: TrainPlan,
               config: TrainConfig) -> Literal["one", "workers"]:
    """Where ``plan``'s server lives (``TrainConfig.shards``), except that ``auto`` keeps one
    server where a worker's device lacks the memory for a shard beside its worker."""
    if config.ps_shards == "auto" and config.shards == "workers":
        try:
            check_reservations(cluster, plan, config.worker_memory_mb, "workers")
        except ConfigError:
            return "one"
    return config.shards


def equal_plan(cluster: Cluster, n_samples: int, batch_size: int = 32,
               exclude: frozenset[str] = frozenset()) -> TrainPlan:
    """Equal shards over the cluster's workers (the remainder to the first ones)."""
    workers = [d.name for d in cluster.with_role(Role.WORKER) if d.name not in exclude]
    if not workers:
        raise ConfigError("no worker device left to train on", field="devices")
    ps = _one(cluster, Role.PARAMETER_SERVER, workers[0])
    store = _one(cluster, Role.DATA_STORE, ps)
    base, extra = divmod(n_samples, len(workers))
    shards = {w: base + (1 if i < extra else 0) for i, w in enumerate(workers)}
    return TrainPlan(shards, dict.fromkeys(workers, batch_size), ps, store, "equal")


def _one(cluster: Cluster, role: Role, fallback: str) -> str:
    found = cluster.with_role(role)
    return found[0].name if found else fallback
