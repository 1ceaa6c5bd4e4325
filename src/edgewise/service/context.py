"""What a running job sees of the manager (a JobContext): its cluster and runtime, its own
directory, and the store it reports events, metrics and progress to."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgewise.errors import ConfigError
from edgewise.jobs import HISTOGRAM_METRICS, JobStopped, Limiter, LiveJobs, run_inline
from edgewise.runtime.health import StrikeLedger
from edgewise.service.store import Store, json_ready

if TYPE_CHECKING:
    from edgewise.cluster.model import Cluster
    from edgewise.runtime.ray_cluster import RayRuntime

__all__ = ["JobRunContext", "JobTelemetry", "StoredLedger"]

_PROGRESS_EVERY_S = 0.5
KEPT_JOBS = 50
"""Jobs whose latest metrics Prometheus sees (the oldest are dropped: bounded labels)."""


@dataclass
class JobTelemetry:
    """The latest value of every job metric, and the observers of per-request metrics."""

    latest: dict[str, dict[str, float]] = field(default_factory=dict)
    observers: list[Callable[[str, str, float], None]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def record(self, job_id: str, name: str, value: float) -> None:
        with self._lock:
            values = self.latest.pop(job_id, {})
            values[name] = value
            self.latest[job_id] = values  # the most recent job last
            while len(self.latest) > KEPT_JOBS:
                del self.latest[next(iter(self.latest))]

    def snapshot(self) -> dict[str, dict[str, float]]:
        with self._lock:
            return {job: dict(values) for job, values in self.latest.items()}

    def observe(self, job_id: str, name: str, value: float) -> None:
        for observer in self.observers:
            observer(job_id, name, value)


class StoredLedger(StrikeLedger):
    """The strike ledger of every job, kept in the manager's store (so strikes survive a
    restart) and reported as cluster events."""

    def __init__(self, store: Store, limit: int = 3) -> None:
        super().__init__(None, limit)
        self._store = store
        self._lock = threading.Lock()
        self.counts = store.strikes()

    def strike(self, device: str) -> int:
        with self._lock:
            count = super().strike(device)
            self._store.set_strikes(device, count)
        out = " (struck out)" if count >= self.limit else ""
        self._store.add_event(None, "strike", f"{device}: strike {count}{out}",
                              {"device": device, "strikes": count})
        return count

    def clear(self, device: str) -> int:
        with self._lock:
            had = super().clear(device)
            self._store.clear_strikes(device)
        self._store.add_event(None, "strikes-cleared", f"{device}: {had} strike(s) cleared",
                              {"device": device, "strikes": 0, "cleared": had})
        return had


class JobRunContext:
    """The JobContext of one run of one job (see ``edgewise.jobs.JobContext``)."""

    def __init__(self, job_id: str, *, store: Store, cluster: Cluster,
                 runtime: RayRuntime | None, ledger: StrikeLedger, work_dir: Path,
                 resumed: bool, live: LiveJobs, telemetry: JobTelemetry,
                 summary: dict[str, Any] | None = None, limited: Limiter = run_inline) -> None:
        self._job_id, self._store, self._cluster = job_id, store, cluster
        self._runtime, self._ledger, self._work_dir = runtime, ledger, work_dir
        self._resumed, self._live, self._telemetry = resumed, live, telemetry
        self._limited = limited
        self.stop_requested = threading.Event()
        self._summary: dict[str, Any] = dict(summary or {})
        self._last_progress = 0.0
        self._lock = threading.Lock()

    @property
    def job_id(self) -> str:
        return self._job_id

    @property
    def cluster(self) -> Cluster:
        return self._cluster

    @property
    def runtime(self) -> RayRuntime:
        if self._runtime is None:
            raise ConfigError("this manager runs no cluster (dry run): jobs cannot execute")
        return self._runtime

    @property
    def ledger(self) -> StrikeLedger:
        return self._ledger

    @property
    def work_dir(self) -> Path:
        self._work_dir.mkdir(parents=True, exist_ok=True)
        return self._work_dir

    @property
    def resumed(self) -> bool:
        return self._resumed

    @property
    def limited(self) -> Limiter:
        return self._limited

    def event(self, kind: str, message: str, **data: Any) -> None:
        self._store.add_event(self._job_id, kind, message, json_ready(data))

    def metric(self, name: str, value: float, *, step: float | None = None) -> None:
        value = float(value)
        if name in HISTOGRAM_METRICS:
            self._telemetry.observe(self._job_id, name, value)
            return
        self._telemetry.record(self._job_id, name, value)
        self._store.put_metric(self._job_id, name, value, step)

    def progress(self, fraction: float, **summary: float | int | str | None) -> None:
        with self._lock:
            self._summary.update(json_ready(summary))
            now = time.monotonic()
            if fraction < 1.0 and now - self._last_progress < _PROGRESS_EVERY_S:
                return
            self._last_progress = now
            summary_now = dict(self._summary)
        self._store.update_job(self._job_id, progress=min(1.0, max(0.0, float(fraction))),
                               summary=summary_now)

    def update_plan(self, view: dict[str, Any]) -> None:
        self._store.set_plan(self._job_id, view)

    def flush(self) -> dict[str, Any]:
        """The summary so far (written by the manager when the job ends)."""
        with self._lock:
            return dict(self._summary)

    def should_stop(self) -> bool:
        return self.stop_requested.is_set()

    def check_stop(self) -> None:
        if self.stop_requested.is_set():
            raise JobStopped(self._job_id)

    def publish(self, handle: object | None) -> None:
        self._live.put(self._job_id, handle)
