"""The manager's own routes: health, the cluster (devices, metrics, strikes, faults) and
the jobs of every kind (submit, list, plan, events, metrics, stop)."""

# No ``from __future__ import annotations``: the job request's type is built at run time
# from the kinds installed, and FastAPI must see the real class in the signature.
# Routes that only read the store are ``async``: a SQLite read takes well under a
# millisecond, less than a hop to the thread pool; routes that may wait (Ray, a stop) and
# submissions (which check the spec, sometimes by planning) run in the thread pool.

from collections.abc import Sequence
from typing import Annotated, Any, Literal, Union

import anyio
import anyio.to_thread
from fastapi import APIRouter, Depends, HTTPException, Query, Request, status
from fastapi import Path as PathParam
from pydantic import BaseModel, ConfigDict, Field, create_model

from edgewise.jobs import JOB_ID_PATTERN, JobEvent, JobKind, JobView
from edgewise.service.cluster import FAULT_KINDS
from edgewise.service.manager import JobManager

__all__ = ["core_router", "job_request_model"]

JobId = Annotated[str, PathParam(pattern=JOB_ID_PATTERN, description="a job id")]
After = Annotated[int, Query(ge=0, le=2**53 - 1, description="only events with a larger id")]
Limit = Annotated[int, Query(ge=1, le=1000, description="at most this many")]
DeviceName = Annotated[str, Field(min_length=1, max_length=128)]
CHEAP_READ_THREADS = 8
"""Threads for reads that may wait on Ray (device metrics), apart from the 40 that
FastAPI's sync routes share with planning requests."""


async def get_manager(request: Request) -> JobManager:
    manager: JobManager = request.app.state.backend
    return manager


Manager = Annotated[JobManager, Depends(get_manager)]


class FaultRequest(BaseModel):
    """A fault to inject on the emulated cluster (or a testbed)."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
    kind: Literal["kill-worker", "stall", "cut"] = Field(description=", ".join(FAULT_KINDS))
    device: DeviceName
    peer: DeviceName | None = Field(default=None, description="the other end of a cut link")
    seconds: float = Field(default=5.0, gt=0, le=600)


class Strikes(BaseModel):
    strikes: dict[str, int]
    limit: int


class JobPage(BaseModel):
    """One page of jobs, newest first."""

    jobs: list[JobView]
    has_more: bool = Field(description="whether older jobs follow this page")
    next_cursor: str | None = Field(
        description="pass as ``cursor`` for the next page; null on the last page")


Cursor = Annotated[str | None, Query(pattern=r"^[0-9]{1,18}$", description=(
    "where the page starts: a previous page's next_cursor (absent: with the newest job)"))]
PageLimit = Annotated[int, Query(ge=1, le=1000, description="at most this many jobs")]


class Example(BaseModel):
    kind: str
    description: str
    spec: dict[str, Any]


def job_request_model(kinds: Sequence[JobKind]) -> Any:
    """The body of ``POST /jobs``: ``{"kind": K, "spec": <K's spec>}``, a union over the
    kinds, told apart by ``kind`` (so that the OpenAPI document gives every spec)."""
    models = [create_model(f"{k.name.title().replace('-', '')}JobRequest",
                           __config__=ConfigDict(extra="forbid"),
                           kind=(Literal[k.name], ...), spec=(k.spec, ...))  # type: ignore[arg-type]
              for k in kinds]
    if not models:
        return create_model("JobRequest", __config__=ConfigDict(extra="forbid"),
                            kind=(str, ...), spec=(dict[str, Any], ...))
    if len(models) == 1:
        return models[0]
    return Annotated[Union[tuple(models)], Field(discriminator="kind")]  # noqa: UP007


def _found(value: Any, what: str, key: str) -> Any:
    if value is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"no {what} {key!r}")
    return value


def _cluster_routes(router: APIRouter) -> None:
    cheap_reads = anyio.CapacityLimiter(CHEAP_READ_THREADS)

    @router.get("/health", tags=["meta"])
    async def health() -> dict[str, str]:
        """Liveness probe (authenticated like everything else)."""
        return {"status": "ok"}

    @router.get("/cluster", tags=["cluster"])
    async def cluster(manager: Manager) -> dict[str, Any]:
        """The cluster: devices with type, memory, speed, roles and port; links; sites."""
        return manager.cluster_summary()

    @router.get("/devices/metrics", tags=["cluster"])
    async def device_metrics(manager: Manager) -> dict[str, dict[str, float]]:
        """Each device's latest metrics, with their age in seconds."""
        # a thread of its own pool: never behind the planning requests in the shared one
        found: dict[str, dict[str, float]] = await anyio.to_thread.run_sync(
            manager.device_metrics, limiter=cheap_reads)
        return found

    @router.get("/strikes", tags=["cluster"])
    async def strikes(manager: Manager) -> Strikes:
        """Strikes per device and the limit at which a device is struck out."""
        counts, limit = manager.strikes()
        return Strikes(strikes=counts, limit=limit)

    @router.delete("/strikes/{device}", tags=["cluster"])
    def clear_strikes(manager: Manager,
                      device: Annotated[str, PathParam(max_length=128)]) -> Strikes:
        """Clear a device's strikes once it is repaired: jobs plan with it again (404 for a
        device the cluster does not have)."""
        counts, limit = _found(manager.clear_strikes(device), "device", device)
        return Strikes(strikes=counts, limit=limit)

    @router.get("/events", tags=["cluster"])
    async def cluster_events(manager: Manager, after: After = 0,
                             limit: Limit = 200) -> list[JobEvent]:
        """Cluster events (injected faults, strikes), oldest first."""
        return [JobEvent(**e) for e in manager.store.events(None, after=after, limit=limit)]

    @router.post("/faults", status_code=status.HTTP_201_CREATED, tags=["cluster"])
    def inject_fault(body: FaultRequest, manager: Manager) -> dict[str, Any]:
        """Inject a fault for real: kill the worker on a device, stall a device, or cut a
        link for some seconds; 422 on a dry-run manager or for an unknown device."""
        return manager.inject_fault(body.kind, body.device, body.peer, body.seconds)


def _job_routes(router: APIRouter, request_model: Any) -> None:
    @router.get("/jobs", tags=["jobs"])
    async def list_jobs(manager: Manager, kind: Annotated[str | None, Query(max_length=64)] = None,
                        state: Annotated[str | None, Query(max_length=32)] = None,
                        limit: PageLimit = 100, cursor: Cursor = None) -> JobPage:
        """Jobs (of a kind, in a state), newest first, ``limit`` at a time: follow
        ``next_cursor`` while ``has_more``."""
        jobs, after = manager.jobs_page(limit, None if cursor is None else int(cursor),
                                        kind, state)
        return JobPage(jobs=jobs, has_more=after is not None,
                       next_cursor=None if after is None else str(after))

    @router.post("/jobs", status_code=status.HTTP_201_CREATED, tags=["jobs"])
    def submit(body: request_model, manager: Manager) -> JobView:
        """Queue a job of any kind; 422 if its spec is invalid or names what the cluster
        lacks. It runs when a slot is free: pending → planning → running → an end."""
        return manager.submit(body.kind, body.spec.model_dump(mode="json")
                              if isinstance(body.spec, BaseModel) else body.spec)

    @router.get("/jobs/examples", tags=["jobs"])
    def examples(manager: Manager) -> list[Example]:
        """One runnable example spec per kind, for this cluster (each finishes in under a
        minute on the example emulated cluster)."""
        return [Example(**e) for e in manager.examples()]

    @router.get("/jobs/{job_id}", tags=["jobs"])
    async def job(job_id: JobId, manager: Manager) -> JobView:
        """One job; 404 if there is no such job."""
        found: JobView = _found(manager.job(job_id), "job", job_id)
        return found

    @router.get("/jobs/{job_id}/plan", tags=["jobs"])
    async def plan(job_id: JobId, manager: Manager) -> dict[str, Any]:
        """The job's plan (stage → device, shards and batches, a per-slot schedule...);
        404 until it has one."""
        _found(manager.job(job_id), "job", job_id)
        found: dict[str, Any] = _found(manager.plan(job_id), "plan yet for job", job_id)
        return found

    @router.get("/jobs/{job_id}/events", tags=["jobs"])
    async def events(job_id: JobId, manager: Manager, after: After = 0,
               limit: Limit = 500) -> list[JobEvent]:
        """The job's events (state changes, faults, strikes, re-plans, migrations, stage
        restarts), oldest first; page with ``after``."""
        _found(manager.job(job_id), "job", job_id)
        return [JobEvent(**e) for e in manager.store.events(job_id, after=after, limit=limit)]

    @router.get("/jobs/{job_id}/metrics", tags=["jobs"])
    async def metrics(job_id: JobId, manager: Manager) -> dict[str, list[list[float | None]]]:
        """The job's metrics history: name → ``[unix time, step, value]`` rows."""
        _found(manager.job(job_id), "job", job_id)
        return manager.store.metrics(job_id)

    @router.post("/jobs/{job_id}/stop", tags=["jobs"])
    def stop(job_id: JobId, manager: Manager) -> JobView:
        """Stop a job (a no-op for a finished one) and return it; 404 if unknown."""
        found: JobView = _found(manager.stop(job_id), "job", job_id)
        return found


def core_router(kinds: Sequence[JobKind]) -> APIRouter:
    """The manager's routes for a manager offering ``kinds``."""
    router = APIRouter()
    _cluster_routes(router)
    _job_routes(router, job_request_model(kinds))
    return router

