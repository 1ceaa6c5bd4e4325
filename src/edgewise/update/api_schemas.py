"""Request and response bodies of the Deep-Edge Manager's endpoints (pydantic, at the edge)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from edgewise.jobs import MAX_DEVICES, BatchSize, DeviceName, ShardSize
from edgewise.jobs.workload import HttpWorkload
from edgewise.runtime.loops import DEFAULT_EVALUATION, DEFAULT_MODE, Evaluation, Mode, PsShards
from edgewise.runtime.plan import MAX_REFERENCE_BATCH
from edgewise.update.models import CALIBRATED, NAME_PATTERN
from edgewise.wire.frames import WireChoice

__all__ = [
    "CALIBRATED",
    "NAME_PATTERN",
    "AppSpec",
    "LaunchRequest",
    "MonitorView",
    "ProfileRequest",
    "ProfileStatus",
    "SolveRequest",
    "SolveResponse",
    "StateSpec",
    "TrainJobSpec",
    "WorkerSpec",
]


MAX_WORKERS = 1024
MAX_APPS = 16
"""Background apps per worker in a solve request."""

PolicyName = Literal["deep-edge", "deep-edge-literal", "deep-edge-goodput", "fair", "exact"]
EXACT_MAX_WORKERS = 6
"""The exact oracle enumerates every subset and batch: 8 workers took 80 s and 2.8 GB."""
PlainName = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]
ShortText = Annotated[str, StringConstraints(min_length=1, max_length=64)]
Percent = Annotated[float, Field(ge=0, le=100)]
MAX_SEED = 2**53 - 1
"""Seeds up to 2**53 - 1: the largest integer that JSON readers that parse numbers as
doubles (the OpenAPI document's readers among them) keep exact."""
Millis = Annotated[float, Field(gt=0, le=1e7)]
NoiseScale = Annotated[float, Field(gt=0, le=1e9)]
"""A gradient noise scale B_simple, in samples (``runtime.noise_scale``)."""


def _int8_is_sync(mode: str, wire_dtype: str) -> None:
    if wire_dtype == "int8" and mode != "sync":
        raise ValueError("wire_dtype: int8 needs the sync loop (its replies are changes with "
                         "error feedback)")


def _shards_are_sync(mode: str, ps_shards: str) -> None:
    if ps_shards == "workers" and mode != "sync":
        raise ValueError("ps_shards: workers needs the sync loop (its shards take every step "
                         "together)")


def _goodput_has_its_noise_scale(policy: str, noise_scale: float | None) -> None:
    if policy == "deep-edge-goodput" and noise_scale is None:
        raise ValueError("noise_scale: the deep-edge-goodput policy needs the gradient noise "
                         "scale in samples (a run's gradient_noise_scale_adam metric)")

_STRICT = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class StateSpec(BaseModel):
    """A node's state X = (cpu, gpu, mem), utilisation in percent."""

    model_config = _STRICT

    cpu: Percent = 0.0
    gpu: Percent = 0.0
    mem: Percent = 0.0

    def as_tuple(self) -> tuple[float, float, float]:
        return (float(self.cpu), float(self.gpu), float(self.mem))


class AppSpec(BaseModel):
    """A latency-critical background app: its deadline and the threshold δ^a the Solver
    enforces on its predicted execution time (default: the deadline)."""

    model_config = _STRICT

    name: ShortText
    kind: ShortText = "sift"
    deadline_ms: Millis
    threshold_ms: Millis | None = None


class WorkerSpec(BaseModel):
    """A candidate worker: device name, catalog device type, state and background apps."""

    model_config = _STRICT

    device: DeviceName
    device_type: PlainName
    state: StateSpec = Field(default_factory=StateSpec)
    apps: list[AppSpec] = Field(default_factory=list, max_length=MAX_APPS)


class SolveRequest(BaseModel):
    """The Solver's inputs (Algorithm 1): |M| samples, cluster state, bounds and models.

    ``models`` is ``"calibrated"`` (the calibrated model of each catalog device type) or the
    name of a directory under the server's models directory holding one learned-model
    directory per device type (``<models>/<name>/<device_type>/``).
    """

    model_config = _STRICT

    policy: PolicyName = "deep-edge"
    n_samples: int = Field(ge=1, le=10_000_000)
    b_min: int = Field(default=8, ge=1, le=4096)
    b_max: int = Field(default=128, ge=1, le=4096)
    user_batch: int = Field(default=32, ge=1, le=4096)
    epsilon: float = Field(default=1.0, gt=0, le=1e9)
    tau: int = Field(default=50, ge=1, le=10_000)
    workers: list[WorkerSpec] = Field(min_length=1, max_length=MAX_WORKERS)
    ps_state: StateSpec = Field(default_factory=StateSpec)
    models: PlainName = CALIBRATED
    seed: int | None = Field(default=None, ge=0, le=MAX_SEED)
    noise_scale: NoiseScale | None = Field(
        default=None, description="the gradient noise scale in samples, which "
        "deep-edge-goodput weighs batch size by (a run's gradient_noise_scale_adam metric)")

    @model_validator(mode="after")
    def _unique_names(self) -> SolveRequest:
        if self.policy == "exact" and len(self.workers) > EXACT_MAX_WORKERS:
            raise ValueError(f"the exact policy is limited to {EXACT_MAX_WORKERS} workers")
        _goodput_has_its_noise_scale(self.policy, self.noise_scale)
        devices = [w.device for w in self.workers]
        if len(set(devices)) != len(devices):
            raise ValueError("worker devices must be unique")
        apps = [a.name for w in self.workers for a in w.apps]
        if len(set(apps)) != len(apps):
            raise ValueError("app names must be unique across workers")
        return self


class SolveResponse(BaseModel):
    """The Solver's plan: shards d_i and batch sizes b_i of the selected workers."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    shards: dict[str, int]
    batch_sizes: dict[str, int]
    workers: list[str]
    predicted_epoch_s: float
    predicted_exec_ms: dict[str, float]
    policy: str
    iterations: int
    solver_seconds: float


class LaunchRequest(BaseModel):
    """What the Launcher starts: a plan's shards and batch sizes plus the DL arguments.

    The workers are the devices with a shard; ``target_accuracy`` is the Accuracy
    Monitor's stopping point.
    """

    model_config = _STRICT

    shards: dict[DeviceName, ShardSize] = Field(min_length=1, max_length=MAX_WORKERS)
    batch_sizes: dict[DeviceName, BatchSize] | None = Field(default=None, max_length=MAX_WORKERS)
    mode: Mode = DEFAULT_MODE
    wire_dtype: WireChoice = "auto"
    evaluation: Evaluation = DEFAULT_EVALUATION
    ps_shards: PsShards = "auto"
    epochs: int = Field(default=5, ge=1, le=100)
    learning_rate: float = Field(default=0.01, gt=0, le=10)
    lr_reference_batch: int = Field(default=0, ge=0, le=MAX_REFERENCE_BATCH)
    seed: int = Field(default=0, ge=0, le=MAX_SEED)
    target_accuracy: float | None = Field(default=None, gt=0, le=1)
    workload: HttpWorkload | None = Field(
        default=None, description="the user's model and data (see the update job's spec); "
        "the shards must cover its training split")

    @model_validator(mode="after")
    def _wire_fits_the_loop(self) -> LaunchRequest:
        _int8_is_sync(self.mode, self.wire_dtype)
        _shards_are_sync(self.mode, self.ps_shards)
        return self


class MonitorView(BaseModel):
    """The Resource Monitor: strikes per device, devices struck out, live metrics, and the
    update tasks that have not finished."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    strikes: dict[str, int]
    struck_out: list[str]
    strike_limit: int
    metrics: dict[str, dict[str, float]]
    active_jobs: list[str]


class ProfileRequest(BaseModel):
    """A quick profile run on the manager's host, written to ``profiles/<name>.csv``."""

    model_config = _STRICT

    name: PlainName
    device_type: PlainName = "host-x86"


ProfileState = Literal["running", "succeeded", "failed"]


class ProfileStatus(BaseModel):
    """Where a profile run stands: samples done of total, the current stress point, rows
    written, and the error that ended it, if any."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    profile_id: str
    name: str
    state: ProfileState
    done: int = 0
    total: int = 0
    current: str = ""
    rows: int = 0
    errors: list[str] = Field(default_factory=list)


class TrainJobSpec(BaseModel):
    """A model update to run (``kind: update``): which model, how, on which workers, with
    what data split. Without ``shards``, ``policy`` plans them (Deep-Edge's Solver on the
    cluster's calibrated models, ``fair``, or ``equal`` shards).

    Strict: unknown fields and type coercions ("5" for 5) are rejected. Device names are
    checked against the cluster when the job is submitted.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

    model: Literal["digits-cnn"] = Field(default="digits-cnn", description="model to train")
    workload: HttpWorkload | None = Field(
        default=None, description="the user's model and data instead of ``model`` on digits: "
        "a built-in or hf:<ConfigClass> model, data in the manager's data folder")
    mode: Mode = Field(
        default=DEFAULT_MODE, description="the loop: sync (balanced steps; the default), "
        "async (stale gradients treated) or async-paper (Deep-Edge's: every gradient applied "
        "as it arrives)")
    wire_dtype: WireChoice = Field(
        default="auto", description="what weights and gradients travel as between the "
        "server and its workers: float32, bfloat16/float16 (half the bytes), or int8 (a "
        "quarter, with a scale per 256 values; the sync loop only); auto: bfloat16 for the "
        "sync loop, float32 for the others")
    ps_shards: PsShards = Field(
        default="auto", description="where the parameter server lives: one (on the plan's "
        "server device), workers (cut into ranges, one on each worker's device: the same "
        "steps, each port carries a share; the sync loop only), or auto: workers for the "
        "sync loop, one for the others")
    evaluation: Evaluation = Field(
        default=DEFAULT_EVALUATION, description="when each epoch's validation accuracy is "
        "read: after the epoch (in its time), or beside the next one (the evaluating worker "
        "reads it at idle priority while the next epoch trains; the time to accuracy counts "
        "a reading when it is known)")
    epochs: int = Field(default=5, ge=1, le=100)
    policy: Literal["deep-edge", "deep-edge-goodput", "fair", "equal"] = Field(
        default="equal", description="how shards and batches are planned without ``shards``")
    noise_scale: NoiseScale | None = Field(
        default=None, description="the gradient noise scale in samples that "
        "deep-edge-goodput plans with (a run's gradient_noise_scale_adam metric)")
    workers: list[DeviceName] | None = Field(
        default=None, min_length=1, max_length=MAX_DEVICES,
        description="worker devices; default: every device with the worker role")
    shards: dict[DeviceName, ShardSize] | None = Field(
        default=None, max_length=MAX_DEVICES, description="training samples per device")
    batch_sizes: dict[DeviceName, BatchSize] | None = Field(
        default=None, max_length=MAX_DEVICES, description="mini-batch size per device")
    learning_rate: float = Field(default=0.003, gt=0, le=10)
    lr_reference_batch: int = Field(
        default=0, ge=0, le=MAX_REFERENCE_BATCH, description="the global batch learning_rate "
        "was set for: the sync loop scales the rate to its own global batch from it (square "
        "root for Adam) and warms a raised rate up; 0: the plan's own global batch")
    target_accuracy: float | None = Field(
        default=None, gt=0, le=1, description="stop early once validation accuracy reaches it")
    seed: int = Field(default=0, ge=0, le=MAX_SEED)
    background_apps: bool = Field(
        default=True, description="run the cluster's background apps beside the training and "
        "report their deadline misses, as `update run` does (false: `update run --no-apps`)")

    @model_validator(mode="after")
    def _unique_workers(self) -> TrainJobSpec:
        if self.workers is not None and len(set(self.workers)) != len(self.workers):
            raise ValueError("worker names must be unique")
        if self.shards is None:
            _goodput_has_its_noise_scale(self.policy, self.noise_scale)
        _int8_is_sync(self.mode, self.wire_dtype)
        _shards_are_sync(self.mode, self.ps_shards)
        return self

