"""The seam between the problems and the manager: the one job model (JobKind, JobContext,
JobView), the manager side that the problems' routers use (JobBackend), and ProblemApi,
through which each problem offers its HTTP router and its kind of job."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Protocol

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from edgewise.errors import EdgewiseError
from edgewise.runtime.limiting import Limiter, run_inline

if TYPE_CHECKING:
    from edgewise.cluster.model import Cluster
    from edgewise.runtime.health import StrikeLedger
    from edgewise.runtime.ray_cluster import RayRuntime

__all__ = [
    "ACTIVE_STATES", "FINAL_STATES", "HISTOGRAM_METRICS", "JOB_ID_PATTERN", "ApiContext",
    "BatchSize", "DeviceName", "JobBackend", "JobContext", "JobEvent", "JobKind", "JobState",
    "JobStopped", "JobView", "Limiter", "LiveJobs", "Planned", "PlanningBusyError",
    "PlanningLimitError", "ProblemApi", "ShardSize", "get_backend", "no_check", "run_inline",
]  # fmt: skip

JOB_ID_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
"""Job ids are short URL-safe strings; anything else is rejected before the backend."""

MAX_DEVICES = 1024
"""Upper bound on per-device lists and maps in a request, to keep bodies cheap to check."""

JobState = Literal["pending", "planning", "running", "succeeded", "failed", "stopped",
                   "interrupted"]
FINAL_STATES = frozenset({"succeeded", "failed", "stopped", "interrupted"})
ACTIVE_STATES = frozenset({"pending", "planning", "running"})
HISTOGRAM_METRICS = frozenset({"request_latency_s"})
"""Metrics a job reports per observation (each request's latency): the manager feeds them
to a histogram and keeps no history row per observation."""

DeviceName = Annotated[str, StringConstraints(min_length=1, max_length=128)]
ShardSize = Annotated[int, Field(gt=0, le=1_000_000_000)]
BatchSize = Annotated[int, Field(ge=1, le=4096)]


class JobStopped(Exception):
    """Raised inside a job (by :meth:`JobContext.check_stop`) once a stop was requested:
    it unwinds the job's executor, which ends ``stopped``."""


class PlanningLimitError(EdgewiseError):
    """A request whose planning would exceed a limit (time, memory, problem size): the
    manager answers 413 with this message, which names the limit."""


class PlanningBusyError(EdgewiseError):
    """Every planning slot and every place in the queue before them is taken: the manager
    answers 429 at once, with ``Retry-After: retry_after_s``."""

    def __init__(self, problem: str, retry_after_s: int) -> None:
        super().__init__(problem)
        self.retry_after_s = retry_after_s


def no_check(spec: Any, cluster: Cluster) -> None:
    """A kind's ``check`` that finds nothing wrong (a module-level function, so that the
    manager can run a kind's check in its planning child)."""


class JobContext(Protocol):
    """What the manager gives a running job: where it runs and how it reports.

    Every method is thread-safe and cheap; a job reports from its own thread or from the
    callbacks of the executor it drives.
    """

    @property
    def job_id(self) -> str: ...

    @property
    def cluster(self) -> Cluster: ...

    @property
    def runtime(self) -> RayRuntime:
        """The Ray instance hosting the cluster (emulated, testbed or real devices)."""
        ...

    @property
    def ledger(self) -> StrikeLedger:
        """Strikes per device, shared by every job (three strikes and out)."""
        ...

    @property
    def work_dir(self) -> Path:
        """The job's own directory (checkpoints); kept across manager restarts."""
        ...

    @property
    def resumed(self) -> bool:
        """True when this run continues one that a manager restart interrupted."""
        ...

    @property
    def limited(self) -> Limiter:
        """Runs a job's heavy checks (a workload's dry run builds the whole network) under
        the manager's limits, in a child process where the manager gives one, so that the
        manager's memory does not grow with the size of a user's network."""
        ...

    def event(self, kind: str, message: str, **data: Any) -> None:
        """Record an event: ``fault``, ``strike``, ``replan``, ``migration``, ``restart``,
        ``checkpoint``, ``model-switch``..., with a one-line message and JSON-ready data."""
        ...

    def metric(self, name: str, value: float, *, step: float | None = None) -> None:
        """Record a metric (``val_accuracy`` at ``step`` = epoch, ``throughput_rps``...);
        one value per (name, step): a repeated step replaces the earlier value."""
        ...

    def progress(self, fraction: float, **summary: float | int | str | None) -> None:
        """The job's progress (0..1) and the figures its JSON shows (epoch, accuracy...)."""
        ...

    def update_plan(self, view: dict[str, Any]) -> None:
        """Replace the job's plan (a policy that re-plans as it goes: Ekya's windows)."""
        ...

    def should_stop(self) -> bool: ...

    def check_stop(self) -> None:
        """Raise :class:`JobStopped` if a stop was requested."""
        ...

    def publish(self, handle: object | None) -> None:
        """Make a live object reachable by the problem's router while the job runs (a
        pipeline's request queue); None withdraws it. Withdrawn when the job ends."""
        ...


@dataclass(frozen=True, slots=True)
class Planned:
    """A job's plan: ``view`` is what ``GET /jobs/{id}/plan`` shows (JSON-ready);
    ``payload`` is whatever the kind's executor needs (problem, plan objects)."""

    view: dict[str, Any]
    payload: Any = None


@dataclass(frozen=True, slots=True)
class JobKind:
    """One kind of job a problem offers: its spec model, an example, and three thin steps.

    ``check(spec, cluster)`` rejects a spec that names what the cluster lacks (ConfigError,
    422 at submission); ``plan(spec, ctx)`` builds the problem and asks the policy;
    ``execute(spec, planned, ctx)`` carries the plan out, reporting through ``ctx`` and
    honouring stops; it returns the job's result figures. ``resumable`` kinds continue
    from their last checkpoint after a manager restart (``ctx.resumed``); the others are
    marked ``interrupted``. ``example(cluster)`` is a runnable spec that finishes in
    under a minute on the example emulated cluster.
    """

    name: str
    spec: type[BaseModel]
    example: Callable[[Cluster], dict[str, Any]]
    plan: Callable[[Any, JobContext], Planned]
    execute: Callable[[Any, Planned, JobContext], Mapping[str, Any]]
    check: Callable[[Any, Cluster], None] = no_check
    resumable: bool = False
    description: str = ""


Summary = dict[str, float | int | str | None]


class JobView(BaseModel):
    """A job as the API shows it: the same fields for every kind, plus its figures."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=JOB_ID_PATTERN)
    kind: str
    state: JobState
    progress: float = Field(default=0.0, ge=0.0, le=1.0)
    summary: Summary = Field(default_factory=dict, description="the kind's latest figures")
    reason: str | None = Field(default=None, description="why it failed or was interrupted")
    attempts: int = Field(default=0, ge=0, description="runs so far (> 1: resumed)")
    created_at: float = Field(description="Unix time")
    started_at: float | None = None
    finished_at: float | None = None


class JobEvent(BaseModel):
    """Something that happened to a job (or, without a job, to the cluster)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: int
    job_id: str | None
    at: float
    kind: str
    message: str
    data: dict[str, Any] = Field(default_factory=dict)


class JobBackend(Protocol):
    """The manager's side of the API, as the problems' routers see it. Methods are called
    from worker threads, possibly concurrently; implementations are thread-safe."""

    def cluster_summary(self) -> dict[str, object]: ...

    def device_metrics(self) -> dict[str, dict[str, float]]: ...

    def strikes(self) -> tuple[dict[str, int], int]:
        """Strikes per device and the strike limit."""
        ...

    def submit(self, kind: str, spec: Mapping[str, Any]) -> JobView:
        """Validate and queue a job; EdgewiseError for a spec the cluster cannot take."""
        ...

    def job(self, job_id: str) -> JobView | None: ...

    def jobs(self, kind: str | None = None) -> list[JobView]:
        """Every job (of ``kind``), oldest first."""
        ...

    def stop(self, job_id: str) -> JobView | None: ...


async def get_backend(request: Request) -> JobBackend:
    """FastAPI dependency: the backend the manager's app was created with (``async``: it
    costs no hop to the thread pool)."""
    backend: JobBackend = request.app.state.backend
    return backend


@dataclass
class LiveJobs:
    """The objects running jobs publish for their problem's router (thread-safe)."""

    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _handles: dict[str, object] = field(default_factory=dict)

    def put(self, job_id: str, handle: object | None) -> None:
        with self._lock:
            if handle is None:
                self._handles.pop(job_id, None)
            else:
                self._handles[job_id] = handle

    def get(self, job_id: str) -> object | None:
        with self._lock:
            return self._handles.get(job_id)


@dataclass(frozen=True, slots=True)
class ApiContext:
    """What a problem's router may use from the manager: where state and models live, the
    cluster it manages, the planning limiter and the live jobs' handles."""

    state_dir: Path
    models_dir: Path
    limited: Limiter = run_inline
    live: LiveJobs = field(default_factory=LiveJobs)
    cluster: Cluster | None = None


@dataclass(frozen=True, slots=True)
class ProblemApi:
    """A problem's offer to the manager: its name, a factory of its HTTP router (mounted
    under ``/api/v1`` with the manager's auth) and its kinds of job. Problems register one
    as the entry point ``edgewise.problems``; the manager discovers them and names none."""

    name: str
    router: Callable[[ApiContext], APIRouter]
    kinds: tuple[JobKind, ...] = ()
