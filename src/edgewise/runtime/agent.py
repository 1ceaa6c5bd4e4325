"""Device agents: processes that beat for devices, reporting live metrics with each beat.

On a testbed or a real cluster each device has an agent of its own, on the device, reporting
that device's metrics. On an emulated cluster every device is this host, so every device's
metrics are the host's: one agent process beats for all of them (:func:`start_agents`), a
heartbeat thread per device, so that a stalled device still stops beating alone. (Six
agent processes used to run for the example cluster, for the same figure six times: each
took 2.4-2.6 CPU-seconds over a 146 s run of tests/service/test_job_kinds.py, its start
included, measured 2026-12-03 with a per-process sampler of /proc.)"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import psutil
import ray

from edgewise.perf.metrics import sample_metrics
from edgewise.runtime.heartbeat import Heartbeat

__all__ = ["EMULATED_AGENT", "DeviceAgent", "SharedSample", "distinct", "start_agents"]

EMULATED_AGENT = "agent-host"
"""The start of an emulated cluster's one agent's actor name (then a hash of its devices:
clusters that share one Ray instance do not share an agent)."""


class SharedSample:
    """``sample()``, called by several heartbeats of one process, measured at most once per
    ``max_age_s``: psutil's CPU figure is the share since its previous call in this process,
    so calls a few milliseconds apart from different threads would each read noise."""

    def __init__(self, sample: Callable[[], dict[str, float]], max_age_s: float) -> None:
        self._sample, self._max_age_s = sample, max_age_s
        self._lock = threading.Lock()
        self._taken: tuple[float, dict[str, float]] | None = None

    def __call__(self) -> dict[str, float]:
        with self._lock:
            now = time.monotonic()
            if self._taken is None or now - self._taken[0] >= self._max_age_s:
                self._taken = (now, self._sample())
            return dict(self._taken[1])


@ray.remote(max_concurrency=2)  # type: ignore[call-overload]
class DeviceAgent:
    """Beats every period for each of ``devices`` with the metrics of the machine it runs
    on: a device's own on a real cluster (one device per agent), the host's on an emulated
    one (every device)."""

    def __init__(self, devices: str | Sequence[str], monitor: Any, period_s: float) -> None:
        psutil.cpu_percent(interval=None)  # prime the counter
        names = [devices] if isinstance(devices, str) else list(devices)
        metrics = SharedSample(sample_metrics, period_s / 2)
        self.beats = [Heartbeat(monitor, f"agent-{d}", "agent", d, period_s, metrics)
                      for d in names]

    def ping(self) -> bool:
        return True

    def stop(self) -> None:
        for beat in self.beats:
            beat.stop()


def start_agents(runtime: Any, monitor: Any, period_s: float,
                 memory_mb: int) -> dict[str, Any]:
    """The agents of ``runtime``'s cluster, by device (found again by name if already up):
    one for every device on an emulated cluster, on its first device; else one per device,
    on it."""
    names = runtime.cluster.device_names
    if runtime.emulated:
        digest = hashlib.sha1(",".join(sorted(names)).encode()).hexdigest()[:10]
        options = runtime.actor_options(names[0], memory_mb, name=f"{EMULATED_AGENT}-{digest}")
        agent = DeviceAgent.options(**options, get_if_exists=True).remote(  # type: ignore[attr-defined]
            list(names), monitor, period_s)
        return dict.fromkeys(names, agent)
    return {d: DeviceAgent.options(  # type: ignore[attr-defined]
        **runtime.actor_options(d, memory_mb, name=f"agent-{d}"), get_if_exists=True
    ).remote(d, monitor, period_s) for d in names}


def distinct(agents: dict[str, Any]) -> list[Any]:
    """Each agent once (an emulated cluster's one agent serves every device)."""
    return list({id(a): a for a in agents.values()}.values())
