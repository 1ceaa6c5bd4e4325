"""Prometheus metrics of the manager (``GET /metrics``, exposition format): devices, jobs,
training, pipelines, strikes and faults, read from the manager at scrape time."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from edgewise.jobs import ACTIVE_STATES, FINAL_STATES

if TYPE_CHECKING:
    from edgewise.service.manager import JobManager

__all__ = ["CONTENT_TYPE", "JOB_GAUGES", "Telemetry"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
DEVICE_GAUGES = {
    "cpu_percent": ("edgewise_device_cpu_percent", "CPU utilisation of the device, percent"),
    "memory_percent": ("edgewise_device_memory_percent", "memory in use, percent"),
    "accelerator_percent": ("edgewise_device_accelerator_percent",
                            "accelerator utilisation, percent (where NVML reports one)"),
    "age_seconds": ("edgewise_device_heartbeat_age_seconds",
                    "seconds since the device agent's last heartbeat"),
}
JOB_GAUGES = {
    "epoch": ("edgewise_training_epochs", "epochs a training job has completed"),
    "samples_per_second": ("edgewise_training_samples_per_second",
                           "training samples per second in the last epoch"),
    "val_accuracy": ("edgewise_training_validation_accuracy", "latest validation accuracy"),
    "throughput_rps": ("edgewise_pipeline_throughput_requests_per_second",
                       "pipeline results per second over the last interval"),
    "window_accuracy": ("edgewise_continual_window_accuracy",
                        "measured inference accuracy of the last window"),
    "loss": ("edgewise_training_loss", "latest training loss"),
}
"""Job metrics exposed as their own families; any other is ``edgewise_job_metric{name}``."""
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_log = logging.getLogger(__name__)


class _ManagerCollector(Collector):
    """Families computed from the manager's state at each scrape."""

    def __init__(self, manager: JobManager) -> None:
        self.manager = manager

    def collect(self) -> Iterator[Metric]:
        yield from self._devices()
        yield from self._jobs()
        yield from self._job_metrics()
        strikes, limit = self.manager.strikes()
        family = GaugeMetricFamily("edgewise_device_strikes", "strikes (interruptions) per "
                                   "device; at the limit a device is struck out",
                                   labels=["device"])
        for device in self.manager.cluster.device_names:
            family.add_metric([device], strikes.get(device, 0))
        yield family
        yield GaugeMetricFamily("edgewise_strike_limit", "strikes that exclude a device",
                                value=limit)
        events = CounterMetricFamily("edgewise_events", "job and cluster events by kind "
                                     "(fault, strike, restart, replan, migration...)",
                                     labels=["kind"])
        for kind, count in sorted(self.manager.store.event_counts().items()):
            events.add_metric([kind], count)
        yield events

    def _devices(self) -> Iterator[Metric]:
        try:
            metrics = self.manager.device_metrics()
        except Exception as exc:  # a scrape must not fail because Ray is slow
            _log.warning("device metrics unavailable: %s", exc)
            metrics = {}
        for key, (name, text) in DEVICE_GAUGES.items():
            family = GaugeMetricFamily(name, text, labels=["device"])
            for device, values in sorted(metrics.items()):
                if key in values:
                    family.add_metric([device], values[key])
            yield family

    def _jobs(self) -> Iterator[Metric]:
        counts = self.manager.store.counts()
        family = GaugeMetricFamily("edgewise_jobs", "jobs by kind and state",
                                   labels=["kind", "state"])
        for kind in sorted(self.manager.kinds):
            for state in sorted(ACTIVE_STATES | FINAL_STATES):
                family.add_metric([kind, state], counts.get((kind, state), 0))
        yield family
        yield CounterMetricFamily("edgewise_jobs_pruned", "finished jobs deleted by the "
                                  "retention (serve --keep-jobs, --keep-days) since the "
                                  "manager started", value=self.manager.pruner.pruned_total)

    def _job_metrics(self) -> Iterator[Metric]:
        latest = self.manager.telemetry.snapshot()
        kinds = {job: row.kind for job in latest if (row := self.manager.store.job(job))}
        families = {key: GaugeMetricFamily(name, text, labels=["job", "kind"])
                    for key, (name, text) in JOB_GAUGES.items()}
        other = GaugeMetricFamily("edgewise_job_metric", "any other job metric",
                                  labels=["job", "kind", "name"])
        for job, values in sorted(latest.items()):
            for key, value in sorted(values.items()):
                if key in families:
                    families[key].add_metric([job, kinds.get(job, "")], value)
                else:
                    other.add_metric([job, kinds.get(job, ""), key], value)
        yield from families.values()
        yield other


class Telemetry:
    """The manager's Prometheus registry; :meth:`render` is the body of ``GET /metrics``,
    computed at most every ``ttl_s`` (scrapers come every few seconds; a crowd of clients
    must not make the manager recompute it for each)."""

    def __init__(self, manager: JobManager, ttl_s: float = 1.0) -> None:
        self.ttl_s = ttl_s
        self._lock = threading.Lock()
        self._rendered: tuple[float, bytes] = (-math.inf, b"")
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_ManagerCollector(manager))
        self.latency = Histogram("edgewise_pipeline_request_latency_seconds",
                                 "end-to-end latency of pipeline requests", ["job"],
                                 buckets=LATENCY_BUCKETS, registry=self.registry)
        manager.telemetry.observers.append(self._observe)

    def _observe(self, job_id: str, name: str, value: float) -> None:
        if name == "request_latency_s":
            self.latency.labels(job=job_id).observe(value)

    def fresh(self) -> bytes | None:
        """The body rendered less than ``ttl_s`` ago, or None (then :meth:`render`, which
        may wait on the cluster, belongs off the event loop)."""
        at, body = self._rendered
        return body if time.monotonic() - at <= self.ttl_s else None

    def render(self) -> bytes:
        with self._lock:
            at, body = self._rendered
            if time.monotonic() - at > self.ttl_s:
                body = generate_latest(self.registry)
                self._rendered = (time.monotonic(), body)
            return body
