"""Request and response bodies of the manager's HTTP API (pydantic, at the edge only)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

__all__ = ["JOB_ID_PATTERN", "JobState", "JobStatus", "TrainJobSpec"]

JOB_ID_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
"""Job ids are short URL-safe strings; anything else is rejected before the backend."""

MAX_DEVICES = 1024
"""Upper bound on per-device lists and maps in a request, to keep bodies cheap to check."""

JobState = Literal["pending", "running", "succeeded", "failed", "stopped"]
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
