"""A dry-run in-memory JobBackend, and the cluster summary and spec checks backends share."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping

from edgewise.cluster.model import Cluster, Role
from edgewise.errors import ConfigError
from edgewise.runtime.jobs import FINAL_STATES, JobStatus, TrainJobSpec

__all__ = ["InMemoryBackend", "cluster_summary", "validate_spec"]

_UNKNOWN = "no such device in the cluster"


def cluster_summary(cluster: Cluster) -> dict[str, object]:
    """A JSON-ready view of a cluster, shared by every backend."""
    devices = [
        {
            "name": d.name,
            "type": d.type,
            "accelerator": d.accelerator,
            "cpu_cores": d.cpu_cores,
            "memory_mb": d.memory_mb,
            "speed": d.speed,
            "roles": [str(role) for role in d.roles],
        }
        for d in cluster.devices
    ]
    links = [
        {"a": lk.a, "b": lk.b, "bandwidth_mbps": lk.bandwidth_mbps, "latency_ms": lk.latency_ms}
        for lk in cluster.links
    ]
    default = cluster.default_link
    return {
        "name": cluster.name,
        "devices": devices,
        "default_link": {
            "bandwidth_mbps": default.bandwidth_mbps,
            "latency_ms": default.latency_ms,
        },
        "links": links,
        "sites": [{"name": s.name, "devices": list(s.devices)} for s in cluster.sites],
    }


def _check_names(names: Iterable[str], allowed: Iterable[str], field: str, problem: str) -> None:
    """ConfigError naming ``field`` and every name of ``names`` not in ``allowed``."""
    unknown = sorted(set(names) - set(allowed))
    if unknown:
        raise ConfigError(f"{problem}: {', '.join(repr(n) for n in unknown)}", field=field)


def validate_spec(cluster: Cluster, spec: TrainJobSpec) -> list[str]:
    """The job's workers; ConfigError naming the field if a device name is wrong.

    Shared by every backend: ``workers`` (default: the worker-role devices), ``shards`` and
    ``batch_sizes`` must name devices of ``cluster``, and the maps only the job's workers.
    """
    names = cluster.device_names
    if spec.workers is None:
        workers = [d.name for d in cluster.with_role(Role.WORKER)]
        if not workers:
            raise ConfigError("the cluster has no device with the worker role", field="workers")
    else:
        _check_names(spec.workers, names, "workers", _UNKNOWN)
        workers = list(spec.workers)
    for field, mapping in (("shards", spec.shards), ("batch_sizes", spec.batch_sizes)):
        if mapping is not None:
            _check_names(mapping, names, field, _UNKNOWN)
            _check_names(mapping, workers, field, "not among the job's workers")
    return workers


class InMemoryBackend:
    """A thread-safe backend that records jobs but never trains: a dry run and a test double.

    ``start_job`` validates the spec against ``cluster`` exactly as a real backend would
    (workers, shards and batch sizes must name the cluster's devices) and records the job as
    ``pending``; nothing ever runs it. Production must pass the Ray-backed backend from
    ``edgewise.runtime`` to ``create_app``/``serve`` instead.

    Parameters
    ----------
    cluster
        The cluster whose devices jobs may use.
    clock
        Returns the current Unix time; injectable for deterministic tests.
    """

    def __init__(self, cluster: Cluster, *, clock: Callable[[], float] = time.time) -> None:
        self._cluster = cluster
        self._clock = clock
        self._lock = threading.Lock()
        self._jobs: dict[str, JobStatus] = {}
        self._specs: dict[str, TrainJobSpec] = {}
        self._metrics: dict[str, tuple[float, dict[str, float]]] = {}

    def cluster_summary(self) -> dict[str, object]:
        return cluster_summary(self._cluster)

    def record_metrics(self, device: str, metrics: Mapping[str, float]) -> None:
        """Store a device's latest metrics (what a monitor would push)."""
        _check_names([device], self._cluster.device_names, "device", _UNKNOWN)
        with self._lock:
            self._metrics[device] = (self._clock(), dict(metrics))

    def device_metrics(self) -> dict[str, dict[str, float]]:
        now = self._clock()
        with self._lock:
            return {
                name: {**values, "age_seconds": max(0.0, now - at)}
                for name, (at, values) in self._metrics.items()
            }

    def start_job(self, spec: TrainJobSpec) -> str:
        workers = validate_spec(self._cluster, spec)
        with self._lock:
            job_id = f"job-{len(self._jobs) + 1:04d}"
            self._jobs[job_id] = JobStatus(
                job_id=job_id,
                state="pending",
                epochs=spec.epochs,
                strikes={name: 0 for name in workers},
                started_at=self._clock(),
            )
            self._specs[job_id] = spec
        return job_id

    def job_spec(self, job_id: str) -> TrainJobSpec | None:
        """The spec a job was started with (for tests and dry-run inspection)."""
        with self._lock:
            return self._specs.get(job_id)

    def job_status(self, job_id: str) -> JobStatus | None:
        with self._lock:
            return self._jobs.get(job_id)

    def list_jobs(self) -> list[JobStatus]:
        with self._lock:
            return list(self._jobs.values())

    def stop_job(self, job_id: str) -> bool:
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None:
                return False
            if job.state not in FINAL_STATES:
                update = {"state": "stopped", "finished_at": self._clock()}
                self._jobs[job_id] = job.model_copy(update=update)
            return True
