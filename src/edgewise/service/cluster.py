"""The manager's view of its cluster: a JSON summary, and the live side on Ray (one agent
per device beating metrics to the health monitor; fault injection)."""

from __future__ import annotations

import logging
import math
import threading
import time
from typing import Any

from edgewise.cluster.model import Cluster
from edgewise.errors import ConfigError

__all__ = ["FAULT_KINDS", "BackgroundDeviceServices", "RayDeviceServices", "cluster_summary"]

FAULT_KINDS = ("kill-worker", "stall", "cut")
AGENT_MEMORY_MB = 64
METRICS_TTL_S = 0.5
_CALL_TIMEOUT_S = 30.0
AGENT_START_S = 300.0
"""How long the device agents may take to answer first: each is a Python process that
imports Ray and starts on its device (a Raspberry Pi's, or one of a loaded host's), and the
manager answers meanwhile (:class:`BackgroundDeviceServices`). 30 s was too short beside a
loaded test suite on a slow 2-core host (2026-12-01): every later fault and metrics request
then failed."""
_log = logging.getLogger(__name__)


def cluster_summary(cluster: Cluster) -> dict[str, object]:
    """A JSON-ready view of a cluster: devices, links (and the default link), sites."""
    devices = [
        {"name": d.name, "type": d.type, "accelerator": d.accelerator,
         "cpu_cores": d.cpu_cores, "memory_mb": d.memory_mb, "speed": d.speed,
         "roles": [str(role) for role in d.roles], "port_mbps": d.port_mbps}
        for d in cluster.devices
    ]
    links = [{"a": lk.a, "b": lk.b, "bandwidth_mbps": lk.bandwidth_mbps,
              "latency_ms": lk.latency_ms} for lk in cluster.links]
    default = cluster.default_link
    return {
        "name": cluster.name,
        "devices": devices,
        "default_link": {"bandwidth_mbps": default.bandwidth_mbps,
                         "latency_ms": default.latency_ms},
        "links": links,
        "sites": [{"name": s.name, "devices": list(s.devices)} for s in cluster.sites],
    }


class RayDeviceServices:
    """Device agents (``runtime.agent.start_agents``: one per device, or one for all of an
    emulated cluster's) beat live metrics to the health monitor, which
    :meth:`device_metrics` reads; faults are injected for real (``FaultInjector``).

    ``heartbeat_s`` is the period of agents and monitor (the monitor keeps the period it was
    first started with, so every user of one Ray instance must agree on it).
    """

    def __init__(self, runtime: Any, heartbeat_s: float = 1.0) -> None:
        import ray

        from edgewise.runtime.agent import distinct, start_agents
        from edgewise.runtime.launch import monitor_handle

        if heartbeat_s <= 0:
            raise ConfigError("must be > 0", field="heartbeat_s")
        self._runtime = runtime
        self._lock = threading.Lock()
        self._cache: tuple[float, dict[str, dict[str, float]]] = (-math.inf, {})
        self._monitor = monitor_handle(runtime, heartbeat_s)
        self._agents: dict[str, Any] = start_agents(runtime, self._monitor, heartbeat_s,
                                                    AGENT_MEMORY_MB)
        ray.get([a.ping.remote() for a in distinct(self._agents)], timeout=AGENT_START_S)

    def device_metrics(self) -> dict[str, dict[str, float]]:
        """The monitor's latest metrics per device; asked at most every ``METRICS_TTL_S``
        (they change once a heartbeat), so that many readers cost the monitor little."""
        import ray

        now = time.monotonic()
        with self._lock:
            cached_at, cached = self._cache
            if now - cached_at > METRICS_TTL_S:
                found: dict[str, dict[str, float]] = ray.get(
                    self._monitor.device_metrics.remote(), timeout=_CALL_TIMEOUT_S)
                names = set(self._runtime.cluster.device_names)
                cached_at, cached = now, {d: m for d, m in found.items() if d in names}
                self._cache = (cached_at, cached)
        waited = now - cached_at
        return {d: {**m, "age_seconds": m.get("age_seconds", 0.0) + waited}
                for d, m in cached.items()}

    def inject_fault(self, kind: str, device: str, peer: str | None,
                     seconds: float) -> dict[str, Any]:
        """Kill the worker on ``device``, stall the device, or cut its link to ``peer``, for
        ``seconds``; ConfigError for an unknown kind or a missing peer, EdgewiseError when
        there is nothing to kill."""
        from edgewise.runtime.faults import FaultInjector

        injector = FaultInjector()
        if kind == "kill-worker":
            fault = injector.kill_worker(device)
        elif kind == "stall":
            fault = injector.stall(device, seconds)
        elif kind == "cut":
            if peer is None:
                raise ConfigError("a cut needs a peer device", field="peer")
            fault = injector.cut(device, peer, seconds)
        else:
            raise ConfigError(f"unknown fault {kind!r}; known: {', '.join(FAULT_KINDS)}",
                              field="kind")
        return {"kind": fault.kind, "target": fault.target, "at": fault.at,
                "seconds": fault.seconds}

    def close(self) -> None:
        """Stop, unregister and kill the agents (so their silence is not read as a fault)."""
        import ray

        from edgewise.runtime.agent import distinct

        if not ray.is_initialized():
            return
        agents = distinct(self._agents)
        try:
            ray.get([a.stop.remote() for a in agents], timeout=_CALL_TIMEOUT_S)
        except Exception as exc:  # closing must go on: the agents are killed below anyway
            _log.warning("device agents did not stop cleanly: %s", exc)
        for device in self._agents:
            self._monitor.unregister.remote(f"agent-{device}")
        for agent in agents:
            ray.kill(agent, no_restart=True)
        self._agents = {}



class BackgroundDeviceServices:
    """:class:`RayDeviceServices` started in a thread, so that the manager answers while its
    device agents come up (their metrics appear once they beat). Faults need the agents'
    monitor: injecting one waits for the start. A start that failed is reported to the call
    that finds it, and tried again from there (agents already up are found again by name),
    so that a manager whose agents came up late is not left without them for good."""

    def __init__(self, runtime: Any, heartbeat_s: float = 1.0) -> None:
        self._runtime, self._heartbeat_s = runtime, heartbeat_s
        self._lock = threading.Lock()
        self._services: RayDeviceServices | None = None
        self._error: Exception | None = None
        self._ready = threading.Event()
        self._thread = self._begin()

    def _begin(self) -> threading.Thread:
        self._ready = threading.Event()
        thread = threading.Thread(target=self._start, args=(self._ready,),
                                  name="edgewise-device-agents", daemon=True)
        thread.start()
        return thread

    def _start(self, ready: threading.Event) -> None:
        try:
            self._services = RayDeviceServices(self._runtime, self._heartbeat_s)
        except Exception as exc:  # reported by the next call, which starts them again
            _log.exception("the device agents did not start")
            self._error = exc
        finally:
            ready.set()

    def _wait(self, timeout_s: float | None) -> RayDeviceServices | None:
        self._ready.wait(timeout_s)
        with self._lock:
            error, self._error = self._error, None
            if error is not None:
                self._thread = self._begin()
        if error is not None:
            raise ConfigError(f"the device agents did not start: {error}; starting them "
                              "again")
        return self._services

    def device_metrics(self) -> dict[str, dict[str, float]]:
        services = self._wait(0)
        return {} if services is None else services.device_metrics()

    def inject_fault(self, kind: str, device: str, peer: str | None,
                     seconds: float) -> dict[str, Any]:
        services = self._wait(_CALL_TIMEOUT_S)
        if services is None:
            raise ConfigError("the device agents are still starting; try again", field="kind")
        return services.inject_fault(kind, device, peer, seconds)

    def close(self) -> None:
        self._thread.join(timeout=_CALL_TIMEOUT_S)
        if self._services is not None:
            self._services.close()
