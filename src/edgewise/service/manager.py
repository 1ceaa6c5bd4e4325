"""The job manager: one life cycle for every kind of job, kept in the store, run in threads
on the cluster's Ray runtime, and recovered after a restart (resumed or interrupted)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import ValidationError

from edgewise.cluster.model import Cluster
from edgewise.errors import ConfigError, EdgewiseError, config_error
from edgewise.jobs import (
    ACTIVE_STATES,
    JobKind,
    JobStopped,
    JobView,
    Limiter,
    LiveJobs,
    Planned,
    run_inline,
)
from edgewise.service.cluster import cluster_summary
from edgewise.service.context import JobRunContext, JobTelemetry, StoredLedger
from edgewise.service.retention import Pruner, Retention, recover_jobs
from edgewise.service.store import JobRow, Store

if TYPE_CHECKING:
    from edgewise.runtime.ray_cluster import RayRuntime

__all__ = ["DeviceServices", "JobManager"]

_log = logging.getLogger(__name__)
_STOP_WAIT_S = 2.0


class DeviceServices(Protocol):
    """The live side of the cluster: device metrics and fault injection."""

    def device_metrics(self) -> dict[str, dict[str, float]]: ...

    def inject_fault(self, kind: str, device: str, peer: str | None,
                     seconds: float) -> dict[str, Any]: ...


@dataclass
class _Running:
    context: JobRunContext
    thread: threading.Thread
    shutdown: bool = False


def view(row: JobRow) -> JobView:
    """The API's view of a stored job."""
    return JobView(id=row.id, kind=row.kind, state=row.state,  # type: ignore[arg-type]
                   progress=row.progress, summary=row.summary, reason=row.reason,
                   attempts=row.attempts, created_at=row.created_at,
                   started_at=row.started_at, finished_at=row.finished_at)


class JobManager:
    """Queues, runs, stops and recovers jobs of every kind (a JobBackend).

    Jobs start in submission order, at most ``max_running`` at a time, each in a thread:
    ``pending → planning → running → succeeded | failed | stopped``. Without a
    ``runtime`` (a dry run, for tests) jobs are checked and stored but never run.
    On start, :meth:`recover` finds the jobs a previous manager left unfinished.
    A submitted spec is checked through ``limiter`` (the planning limits: a workload's
    dry run runs in a capped child, not in the manager); a running job's own heavy checks
    go through ``job_limiter`` (``JobContext.limited``); finished jobs are pruned as
    ``retention`` says.
    """

    def __init__(self, store: Store, kinds: Mapping[str, JobKind], cluster: Cluster, *,
                 state_dir: Path, runtime: RayRuntime | None = None,
                 devices: DeviceServices | None = None, max_running: int = 2,
                 limiter: Limiter = run_inline, job_limiter: Limiter = run_inline,
                 retention: Retention | None = None) -> None:
        if max_running < 1:
            raise ConfigError("must be >= 1", field="max_running")
        self.store, self.kinds, self.cluster = store, dict(kinds), cluster
        self.runtime, self.devices, self.state_dir = runtime, devices, state_dir
        self.max_running, self.limiter, self.job_limiter = max_running, limiter, job_limiter
        self.pruner = Pruner(store, state_dir, retention or Retention())
        self.ledger = StoredLedger(store)
        self.live = LiveJobs()
        self.telemetry = JobTelemetry()
        self._lock = threading.Lock()
        self._running: dict[str, _Running] = {}
        self._closed = False
        # jobs are started by one thread of their own, made here: a job's thread inherits
        # the CPU priority of the thread that starts it, and the API's may be lowered
        # (``serve --api-nice``), the work's must not be
        self._wake = threading.Event()
        if runtime is not None:
            threading.Thread(target=self._starter, name="edgewise-job-starter",
                             daemon=True).start()

    # the JobBackend protocol
    def cluster_summary(self) -> dict[str, object]:
        return cluster_summary(self.cluster)

    def device_metrics(self) -> dict[str, dict[str, float]]:
        return {} if self.devices is None else self.devices.device_metrics()

    def strikes(self) -> tuple[dict[str, int], int]:
        return dict(self.ledger.counts), self.ledger.limit

    def clear_strikes(self, device: str) -> tuple[dict[str, int], int] | None:
        """Forget a device's strikes (an operator repaired it): later jobs plan with it
        again. None for a device the cluster does not have."""
        if device not in self.cluster.device_names:
            return None
        self.ledger.clear(device)
        return self.strikes()

    def submit(self, kind: str, spec: Mapping[str, Any]) -> JobView:
        found = self.kinds.get(kind)
        if found is None:
            raise ConfigError(f"unknown kind {kind!r}; known: {', '.join(sorted(self.kinds))}",
                              field="kind")
        try:
            parsed = found.spec.model_validate(spec)
        except ValidationError as exc:
            raise config_error(exc, "spec") from None
        self.limiter(found.check, parsed, self.cluster)
        with self._lock:
            if self._closed:
                raise ConfigError("the manager is shutting down")
            row = self.store.create_job(kind, parsed.model_dump(mode="json"))
        self.store.add_event(row.id, "submitted", f"{kind} job submitted")
        self._kick()
        return self._view(row.id)

    def job(self, job_id: str) -> JobView | None:
        row = self.store.job(job_id)
        return None if row is None else view(row)

    def jobs(self, kind: str | None = None) -> list[JobView]:
        return [view(r) for r in self.store.jobs(kind)]

    def jobs_page(self, limit: int, before: int | None = None, kind: str | None = None,
                  state: str | None = None) -> tuple[list[JobView], int | None]:
        """Up to ``limit`` jobs, newest first, older than the job numbered ``before``; and
        the number at which the next page starts (None: no more)."""
        rows, after = self.store.jobs_page(limit=limit, before=before, kind=kind, state=state)
        return [view(r) for r in rows], after

    def prune(self) -> list[str]:
        """Delete the finished jobs that the retention no longer keeps (never an active
        one); the ids deleted."""
        with self._lock:
            busy = list(self._running)
        return self.pruner.prune(busy)

    def stop(self, job_id: str) -> JobView | None:
        """Stop a job: a pending one at once, a running one at its next check (waiting up
        to two seconds for it); a finished job is left as it is."""
        row = self.store.job(job_id)
        if row is None:
            return None
        if self.store.update_job(job_id, only_from=["pending"], state="stopped",
                                 finished_at=time.time(), reason="stopped before it started"):
            self.store.add_event(job_id, "state", "stopped before it started")
        with self._lock:
            running = self._running.get(job_id)
        if running is not None:
            running.context.stop_requested.set()
            running.thread.join(timeout=_STOP_WAIT_S)
        return self.job(job_id)

    # the rest of the manager's API
    def plan(self, job_id: str) -> dict[str, Any] | None:
        return self.store.plan(job_id)

    def examples(self) -> list[dict[str, Any]]:
        """One runnable example spec per kind, for this manager's cluster (a kind whose
        example this cluster cannot run, say for want of sites, is left out)."""
        found = []
        for kind in self.kinds.values():
            try:
                spec = kind.example(self.cluster)
                kind.check(kind.spec.model_validate(spec), self.cluster)
            except EdgewiseError as exc:
                _log.info("no %s example on this cluster: %s", kind.name, exc)
                continue
            found.append({"kind": kind.name, "description": kind.description, "spec": spec})
        return found

    def inject_fault(self, kind: str, device: str, peer: str | None,
                     seconds: float) -> dict[str, Any]:
        if self.devices is None:
            raise ConfigError("this manager runs no cluster (dry run): nothing to inject into",
                              field="kind")
        for name in (device, peer):
            if name is not None and name not in self.cluster.device_names:
                raise ConfigError(f"no such device in the cluster: {name!r}", field="device")
        fault = self.devices.inject_fault(kind, device, peer, seconds)
        target = device if peer is None else f"{device}<->{peer}"
        self.store.add_event(None, "fault", f"injected {kind} on {target}", fault)
        return fault

    def recover(self) -> None:
        """After a restart: a job a previous manager left planning or running is resumed
        (queued again, its context ``resumed``) if its kind can resume, else marked
        ``interrupted`` with the reason; pending jobs simply wait their turn."""
        recover_jobs(self.store, self.kinds, can_resume=self.runtime is not None)
        self.prune()
        self._kick()

    def close(self, reason: str = "the manager shut down") -> None:
        """Stop taking jobs, unwind the running ones and wait for them. A resumable job stays
        ``running`` in the store so that the next manager resumes it; any other is marked
        ``interrupted`` with ``reason``."""
        with self._lock:
            self._closed = True
            running = list(self._running.values())
        self._wake.set()  # the starter sees the manager closed and ends
        for job in running:
            job.shutdown = True
            job.context.stop_requested.set()
        for job in running:
            job.thread.join(timeout=60.0)
        for job in running:
            row = self.store.job(job.context.job_id)
            kind = self.kinds.get(row.kind) if row else None
            if row is not None and row.state in ACTIVE_STATES and not (kind and kind.resumable):
                self.store.update_job(row.id, state="interrupted", reason=reason,
                                      finished_at=time.time())
                self.store.add_event(row.id, "interrupted", reason)

    # running jobs
    def _view(self, job_id: str) -> JobView:
        found = self.job(job_id)
        assert found is not None
        return found

    def _kick(self) -> None:
        """Have the starter thread start pending jobs."""
        self._wake.set()

    def _starter(self) -> None:
        """Start pending jobs, oldest first, while fewer than ``max_running`` run, each
        time :meth:`_kick` asks, until the manager closes; prune finished jobs at the
        retention's period."""
        while True:
            if not self._wake.wait(self.pruner.retention.every_s):
                self._prune_quietly()
                continue
            self._wake.clear()
            if not self._start_pending():
                return

    def _start_pending(self) -> bool:
        """Start what may start now; False once the manager is closed."""
        with self._lock:
            if self._closed:
                return False
            free = self.max_running - len(self._running)
            for row in self.store.jobs(states=["pending"]):
                if free <= 0:
                    break
                if row.id in self._running or row.kind not in self.kinds:
                    continue
                self._start(row)
                free -= 1
        return True

    def _start(self, row: JobRow) -> None:
        context = JobRunContext(
            row.id, store=self.store, cluster=self.cluster, runtime=self.runtime,
            ledger=self.ledger, work_dir=self.state_dir / "jobs" / row.id,
            resumed=row.attempts > 0, live=self.live, telemetry=self.telemetry,
            summary=row.summary, limited=self.job_limiter)
        thread = threading.Thread(target=self._run, args=(row, context),
                                  name=f"edgewise-{row.id}", daemon=True)
        self._running[row.id] = _Running(context, thread)
        thread.start()

    def _run(self, row: JobRow, ctx: JobRunContext) -> None:
        """A job's thread: plan, execute, record how it ended, start the next one."""
        try:
            self._lifecycle(row, ctx)
        finally:
            self.live.put(row.id, None)
            with self._lock:
                self._running.pop(row.id, None)
            self._prune_quietly()
            self._kick()

    def _prune_quietly(self) -> None:
        try:
            self.prune()
        except Exception:  # pruning must never end the starter or a job's thread
            _log.exception("pruning finished jobs failed")

    def _lifecycle(self, row: JobRow, ctx: JobRunContext) -> None:
        kind, store = self.kinds[row.kind], self.store
        now = time.time()
        if not store.update_job(row.id, only_from=["pending"], state="planning",
                                attempts=row.attempts + 1, started_at=row.started_at or now):
            return  # stopped meanwhile
        store.add_event(row.id, "state", "planning" + (" (resumed)" if ctx.resumed else ""))
        try:
            spec = kind.spec.model_validate(row.spec)
            planned: Planned = kind.plan(spec, ctx)
            store.set_plan(row.id, planned.view)
            store.add_event(row.id, "plan", "plan ready")
            ctx.check_stop()
            store.update_job(row.id, only_from=["planning"], state="running")
            store.add_event(row.id, "state", "running")
            result = kind.execute(spec, planned, ctx)
            ctx.check_stop()
        except JobStopped:
            self._end(row.id, ctx, "stopped", "stopped on request")
        except Exception as exc:  # any failure ends the job, never the manager
            if ctx.should_stop():
                self._end(row.id, ctx, "stopped", "stopped on request")
                return
            if not isinstance(exc, EdgewiseError):
                _log.exception("job %s failed", row.id)
            self._end(row.id, ctx, "failed", str(exc).strip() or type(exc).__name__)
        else:
            ctx.progress(1.0, **{k: v for k, v in result.items()
                                 if isinstance(v, int | float | str) or v is None})
            self._end(row.id, ctx, "succeeded", None)

    def _end(self, job_id: str, ctx: JobRunContext, state: str, reason: str | None) -> None:
        with self._lock:
            running = self._running.get(job_id)
        if running is not None and running.shutdown and state == "stopped":
            return  # the manager is shutting down: close() decides (resume or interrupted)
        store = self.store
        changed = store.update_job(job_id, only_from=ACTIVE_STATES, state=state, reason=reason,
                                   finished_at=time.time(), summary=ctx.flush())
        if changed:
            store.add_event(job_id, "state", state + (f": {reason}" if reason else ""))
