"""The seam between the problems and the manager: training-job bodies, the JobBackend the
manager drives, and ProblemApi, through which each problem offers its HTTP router."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal, Protocol, runtime_checkable

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

__all__ = [
    "FINAL_STATES", "JOB_ID_PATTERN", "ApiContext", "JobBackend", "JobState", "JobStatus",
    "ProblemApi", "TrainJobSpec", "get_backend",
]  # fmt: skip

JOB_ID_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
"""Job ids are short URL-safe strings; anything else is rejected before the backend."""

MAX_DEVICES = 1024
"""Upper bound on per-device lists and maps in a request, to keep bodies cheap to check."""

JobState = Literal["pending", "running", "succeeded", "failed", "stopped"]
FINAL_STATES = frozenset({"succeeded", "failed", "stopped"})
DeviceName = Annotated[str, StringConstraints(min_length=1, max_length=128)]
ShardSize = Annotated[int, Field(gt=0, le=1_000_000_000)]
BatchSize = Annotated[int, Field(ge=1, le=4096)]


class TrainJobSpec(BaseModel):
    """A training job to start: which model, how, on which workers, with what data split.

    Strict: unknown fields and type coercions ("5" for 5) are rejected. Device names are
    checked against the cluster by the backend, not here.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

    model: Literal["digits-cnn"] = Field(default="digits-cnn", description="model to train")
    mode: Literal["async", "sync"] = Field(default="async", description="parameter updates")
    epochs: int = Field(default=5, ge=1, le=100)
    workers: list[DeviceName] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_DEVICES,
        description="worker devices; default: every device with the worker role",
    )
    shards: dict[DeviceName, ShardSize] | None = Field(
        default=None, max_length=MAX_DEVICES, description="training samples per device"
    )
    batch_sizes: dict[DeviceName, BatchSize] | None = Field(
        default=None, max_length=MAX_DEVICES, description="mini-batch size per device"
    )
    learning_rate: float = Field(default=0.003, gt=0, le=10)
    target_accuracy: float | None = Field(
        default=None, gt=0, le=1, description="stop early once validation accuracy reaches it")
    seed: int = Field(default=0, ge=0, le=2**63 - 1)

    @field_validator("workers")
    @classmethod
    def _unique_workers(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and len(set(value)) != len(value):
            raise ValueError("worker names must be unique")
        return value


class JobStatus(BaseModel):
    """Where a job stands: its state, progress, accuracy and the faults it has survived."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    job_id: str = Field(pattern=JOB_ID_PATTERN)
    state: JobState
    epoch: int = Field(default=0, ge=0, description="epochs completed")
    epochs: int = Field(ge=1, description="epochs requested")
    val_accuracy: float | None = Field(default=None, description="latest validation accuracy")
    restarts: int = Field(default=0, ge=0, description="worker restarts after faults")
    strikes: dict[str, int] = Field(default_factory=dict, description="faults per device")
    error: str | None = None
    started_at: float | None = Field(default=None, description="Unix time")
    finished_at: float | None = Field(default=None, description="Unix time")


@runtime_checkable
class JobBackend(Protocol):
    """The manager's side of the API: cluster state, live metrics and training jobs.

    Methods are called from worker threads, possibly concurrently; implementations must be
    thread-safe and may block (the app runs them off the event loop).
    """

    def cluster_summary(self) -> dict[str, object]:
        """Cluster name, devices (type, memory, speed, roles) and links."""
        ...

    def device_metrics(self) -> dict[str, dict[str, float]]:
        """Device name -> latest metrics (cpu_percent, memory_percent, age_seconds, ...)."""
        ...

    def start_job(self, spec: TrainJobSpec) -> str:
        """Start a job and return its id; raise an EdgewiseError for a bad request."""
        ...

    def job_status(self, job_id: str) -> JobStatus | None:
        """The job's status, or None if there is no such job."""
        ...

    def list_jobs(self) -> list[JobStatus]:
        """Every job this backend knows, oldest first."""
        ...

    def stop_job(self, job_id: str) -> bool:
        """Stop a job; False if there is no such job (stopping a finished job is a no-op)."""
        ...


def get_backend(request: Request) -> JobBackend:
    """FastAPI dependency: the backend the manager's app was created with."""
    backend: JobBackend = request.app.state.backend
    return backend


@dataclass(frozen=True, slots=True)
class ApiContext:
    """What a problem's router may use from the manager: where state and models live."""

    state_dir: Path
    models_dir: Path


@dataclass(frozen=True, slots=True)
class ProblemApi:
    """A problem's offer to the manager: its name and a factory of its HTTP router (mounted
    under ``/api/v1`` with the manager's auth). Problems register one as the entry point
    ``edgewise.problems``; the manager discovers them and names none."""

    name: str
    router: Callable[[ApiContext], APIRouter]
