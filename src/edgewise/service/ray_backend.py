"""The real JobBackend: trains on a RayRuntime, one job at a time, each in a thread."""

from __future__ import annotations

import functools
import logging
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import ray

from edgewise.cluster.model import Cluster, Role
from edgewise.errors import ConfigError
from edgewise.nn.data import digits_split
from edgewise.runtime.agent import DeviceAgent
from edgewise.runtime.engine import EpochRecord, Events, Interruption, train
from edgewise.runtime.health import StrikeLedger
from edgewise.runtime.jobs import FINAL_STATES, JobStatus, TrainJobSpec
from edgewise.runtime.launch import monitor_handle
from edgewise.runtime.plan import TrainConfig, TrainPlan, equal_plan
from edgewise.runtime.ray_cluster import RayRuntime
from edgewise.service.backend import cluster_summary, validate_spec

__all__ = ["DEFAULT_BATCH_SIZE", "RayJobBackend", "build_plan", "training_set_size"]

DEFAULT_BATCH_SIZE = 32
"""Mini-batch size of a worker the spec gives none."""

AGENT_MEMORY_MB = 64
_CALL_TIMEOUT_S = 30.0  # a Ray call the API waits on never hangs a request longer
_CLOSE_WAIT_S = 60.0

_log = logging.getLogger(__name__)


class _Stopped(Exception):
    """Raised from the events hook to unwind ``train`` once a stop was requested."""


@functools.cache
def training_set_size() -> int:
    """Samples in the digits training split that the data store serves (1,437)."""
    return len(digits_split()[0])


def build_plan(cluster: Cluster, spec: TrainJobSpec, workers: list[str]) -> TrainPlan:
    """The plan a spec asks for: its shards, else equal ones, over ``workers``.

    The parameter server and data store go where :func:`equal_plan` puts them (the first
    device with that role). A worker without a batch size gets ``DEFAULT_BATCH_SIZE``.

    Raises
    ------
    ConfigError
        Naming ``workers`` for a device without the worker role, ``shards`` if the shards
        miss a worker or do not sum to the training set's size.
    """
    lacking = [w for w in workers if not cluster.device(w).has_role(Role.WORKER)]
    if lacking:
        raise ConfigError(f"devices without the worker role: {', '.join(lacking)}", field="workers")
    n_samples = training_set_size()
    base = equal_plan(
        cluster,
        n_samples,
        DEFAULT_BATCH_SIZE,
        exclude=frozenset(cluster.device_names) - set(workers),
    )
    shards = dict(base.shards)
    if spec.shards is not None:
        missing = [w for w in workers if w not in spec.shards]
        if missing:
            raise ConfigError(f"no shard for workers {', '.join(missing)}", field="shards")
        shards = dict(spec.shards)
    batches = {w: (spec.batch_sizes or {}).get(w, DEFAULT_BATCH_SIZE) for w in workers}
    policy = "equal" if spec.shards is None else "given"
    plan = TrainPlan(shards, batches, base.ps_device, base.store_device, policy)
    plan.validate(cluster, n_samples)  # shards must cover the training set exactly once
    return plan


def _error_message(exc: BaseException) -> str:
    """What a failed job reports: the exception's message, never its traceback."""
    text = str(exc).strip()
    return text if text else type(exc).__name__


@dataclass
class _Job:
    """A job's record: its status (replaced on every change) and its stop flag."""

    status: JobStatus
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None


class RayJobBackend:
    """Runs training jobs with ``edgewise.runtime.engine.train`` on a Ray runtime.

    One ``DeviceAgent`` per device beats live metrics to the health monitor, which
    :meth:`device_metrics` reads. A job runs in a daemon thread; only one runs at a time:
    starting another while one is pending or running raises ConfigError (422 in the API),
    nothing is queued. Stopping sets a flag that the job's events hook turns into an
    exception at the next event (a quarter heartbeat apart while an epoch trains; while the
    actors launch, not until the first epoch starts), which unwinds ``train`` and tears
    down its actors. Thread-safe.

    Parameters
    ----------
    runtime
        The Ray instance hosting the cluster's devices.
    ledger
        Strikes per device; shared by every job, so that three strikes exclude a device.
    state_dir
        Checkpoints of job ``ID`` go to ``state_dir/jobs/ID/checkpoints``.
    heartbeat_s
        Heartbeat period of agents, workers and the monitor (which keeps the period it was
        first started with, so every user of one Ray instance must agree on it).
    """

    def __init__(
        self,
        runtime: RayRuntime,
        ledger: StrikeLedger,
        state_dir: Path,
        *,
        heartbeat_s: float = 1.0,
    ) -> None:
        if heartbeat_s <= 0:
            raise ConfigError("must be > 0", field="heartbeat_s")
        self._runtime, self._ledger = runtime, ledger
        self._state_dir, self._heartbeat_s = state_dir, heartbeat_s
        self._lock = threading.Lock()
        self._jobs: dict[str, _Job] = {}
        self._closed = False
        self._monitor = monitor_handle(runtime, heartbeat_s)
        self._agents = self._start_agents()

    def _start_agents(self) -> dict[str, Any]:
        """One agent per device (reused if already running); waits until each is up."""
        agents: dict[str, Any] = {}
        for device in self._runtime.cluster.device_names:
            options = self._runtime.actor_options(device, AGENT_MEMORY_MB, name=f"agent-{device}")
            agents[device] = DeviceAgent.options(  # type: ignore[attr-defined]
                **options, get_if_exists=True
            ).remote(device, self._monitor, self._heartbeat_s)
        ray.get([a.ping.remote() for a in agents.values()], timeout=_CALL_TIMEOUT_S)
        return agents

    def cluster_summary(self) -> dict[str, object]:
        return cluster_summary(self._runtime.cluster)

    def device_metrics(self) -> dict[str, dict[str, float]]:
        metrics: dict[str, dict[str, float]] = ray.get(
            self._monitor.device_metrics.remote(), timeout=_CALL_TIMEOUT_S
        )
        names = set(self._runtime.cluster.device_names)
        return {d: m for d, m in metrics.items() if d in names}

    def start_job(self, spec: TrainJobSpec) -> str:
        cluster = self._runtime.cluster
        workers = validate_spec(cluster, spec)
        plan = build_plan(cluster, spec, workers)
        config = self._config(spec)
        with self._lock:
            if self._closed:
                raise ConfigError("the backend is closed")
            busy = [
                j.status.job_id for j in self._jobs.values() if j.status.state not in FINAL_STATES
            ]
            if busy:
                raise ConfigError(f"a job is already running: {busy[0]}")
            job_id = f"job-{uuid.uuid4().hex[:12]}"
            strikes = {w: self._ledger.counts.get(w, 0) for w in plan.workers}
            job = _Job(
                JobStatus(
                    job_id=job_id,
                    state="pending",
                    epochs=spec.epochs,
                    strikes=strikes,
                    started_at=time.time(),
                )
            )
            job.thread = threading.Thread(
                target=self._run, args=(job, config, plan), name=f"edgewise-{job_id}", daemon=True
            )
            self._jobs[job_id] = job
            job.thread.start()
        return job_id

    @property
    def ledger(self) -> StrikeLedger:
        """The strike ledger of the resource monitor (three strikes and out)."""
        return self._ledger

    def _config(self, spec: TrainJobSpec) -> TrainConfig:
        """The spec's training settings; the runtime's other knobs keep their defaults."""
        return TrainConfig(
            model=spec.model,
            mode=spec.mode,
            epochs=spec.epochs,
            learning_rate=spec.learning_rate,
            seed=spec.seed,
            heartbeat_s=self._heartbeat_s,
            target_accuracy=spec.target_accuracy,
        )

    def job_status(self, job_id: str) -> JobStatus | None:
        with self._lock:
            job = self._jobs.get(job_id)
            return None if job is None else job.status

    def list_jobs(self) -> list[JobStatus]:
        with self._lock:
            return [job.status for job in self._jobs.values()]

    def stop_job(self, job_id: str) -> bool:
        """Ask a job to stop and wait up to two heartbeats for it to end; False if unknown.

        A job that does not end in that time still ends ``stopped`` at its next event.
        """
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None:
                return False
            job.stop.set()
            thread = job.thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=2 * self._heartbeat_s)
        return True

    def close(self) -> None:
        """Stop every job, wait for them to unwind, then stop the device agents."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            jobs = list(self._jobs.values())
        for job in jobs:
            job.stop.set()
        for job in jobs:
            if job.thread is not None:
                job.thread.join(timeout=_CLOSE_WAIT_S)
        self._stop_agents()

    def __enter__(self) -> RayJobBackend:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _stop_agents(self) -> None:
        """Stop, unregister and kill the agents (so their silence is not read as a fault)."""
        if not ray.is_initialized():
            return
        ray.get([a.stop.remote() for a in self._agents.values()], timeout=_CALL_TIMEOUT_S)
        for device, agent in self._agents.items():
            self._monitor.unregister.remote(f"agent-{device}")
            ray.kill(agent, no_restart=True)
        self._agents = {}

    def _run(self, job: _Job, config: TrainConfig, plan: TrainPlan) -> None:
        """The job's thread: train, then record how it ended."""
        job_id = job.status.job_id
        checkpoints = self._state_dir / "jobs" / job_id / "checkpoints"
        try:
            self._update(job, state="running")
            if job.stop.is_set():
                raise _Stopped
            train(
                self._runtime,
                config,
                plan,
                ledger=self._ledger,
                events=self._events(job),
                checkpoint_dir=checkpoints,
            )
        except _Stopped:
            self._update(job, state="stopped", finished_at=time.time())
        except Exception as exc:  # any failure ends the job, never the server
            _log.exception("job %s failed", job_id)
            self._update(job, state="failed", error=_error_message(exc), finished_at=time.time())
        else:
            self._update(job, state="succeeded", finished_at=time.time())

    def _events(self, job: _Job) -> Events:
        """The hook ``train`` calls: records progress, then raises _Stopped if asked to."""

        def on_event(kind: str, data: dict[str, Any]) -> None:
            if kind == "epoch_end":
                record: EpochRecord = data["record"]
                self._update(job, epoch=record.epoch + 1, val_accuracy=record.val_accuracy)
            elif kind == "interrupted":
                item: Interruption = data["interruption"]
                with self._lock:
                    strikes = {**job.status.strikes, item.device: item.strikes}
                self._update(job, strikes=strikes)
            elif kind == "restart":
                self._update(job, restarts=int(data["restart"]))
            if job.stop.is_set():
                raise _Stopped

        return on_event

    def _update(self, job: _Job, **changes: Any) -> None:
        """Replace the job's status with one that has ``changes``."""
        with self._lock:
            job.status = job.status.model_copy(update=changes)
