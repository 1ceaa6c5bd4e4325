"""What the manager keeps of its jobs across time: after a restart, the jobs a previous
manager left (resumed or interrupted); and finished jobs for at most a number of them and
an age (older ones are deleted with their plans, events, metrics and work folders). Jobs
that are pending, planning or running are never deleted."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from edgewise.errors import ConfigError
from edgewise.jobs import JobKind
from edgewise.service.store import Store

__all__ = ["Pruner", "Retention", "recover_jobs"]

DAY_S = 86_400.0


@dataclass(frozen=True, slots=True)
class Retention:
    """Keep the ``keep_jobs`` newest finished jobs, none older than ``keep_days`` (by the
    time it finished); prune every ``every_s`` seconds and whenever a job ends."""

    keep_jobs: int = 1000
    keep_days: float = 30.0
    every_s: float = 600.0

    def __post_init__(self) -> None:
        if not 0 <= self.keep_jobs <= 10_000_000:
            raise ConfigError("must be between 0 and 10,000,000", field="keep_jobs")
        if not 0 < self.keep_days <= 36_500:
            raise ConfigError("must be > 0 and at most 36,500", field="keep_days")
        if not self.every_s > 0:
            raise ConfigError("must be > 0", field="retention.every_s")


class Pruner:
    """Deletes what :class:`Retention` no longer keeps; counts what it deleted."""

    def __init__(self, store: Store, state_dir: Path, retention: Retention) -> None:
        self.store, self.state_dir, self.retention = store, state_dir, retention
        self.pruned_total = 0
        self._lock = threading.Lock()

    def prune(self, busy: Iterable[str] = (), now: float | None = None) -> list[str]:
        """Prune now (``busy``: ids whose threads are still finishing, left alone); the
        ids deleted."""
        at = time.time() if now is None else now
        with self._lock:
            ids = self.store.prune_finished(
                keep=self.retention.keep_jobs, spare=frozenset(busy),
                finished_before=at - self.retention.keep_days * DAY_S)
            self.pruned_total += len(ids)
        for job_id in ids:
            shutil.rmtree(self.state_dir / "jobs" / job_id, ignore_errors=True)
        return ids


def recover_jobs(store: Store, kinds: Mapping[str, JobKind], *, can_resume: bool) -> None:
    """After a restart: a job a previous manager left planning or running is resumed
    (queued again) if its kind can resume and ``can_resume`` (a manager that runs jobs),
    else marked ``interrupted`` with the reason; pending jobs simply wait their turn."""
    now = time.time()
    for row in store.jobs(states=["planning", "running"]):
        kind = kinds.get(row.kind)
        if kind is not None and kind.resumable and can_resume:
            if store.update_job(row.id, only_from=[row.state], state="pending"):
                store.add_event(row.id, "resumed", "the manager restarted; the job resumes "
                                "from its last checkpoint")
            continue
        why = ("the manager stopped while the job was " + row.state + "; "
               + (f"{row.kind} jobs cannot resume" if kind else "its kind is not installed"))
        if store.update_job(row.id, only_from=[row.state], state="interrupted", reason=why,
                            finished_at=now):
            store.add_event(row.id, "interrupted", why)
