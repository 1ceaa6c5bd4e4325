"""The health monitor actor: heartbeats in, dead members and fault directives out."""

from __future__ import annotations

import time
from typing import Any

import ray

from edgewise.runtime.health import FaultBoard, HeartbeatTable, Member

__all__ = ["MONITOR_NAME", "RECHECK_S", "HealthMonitor"]

MONITOR_NAME = "edgewise-monitor"
RECHECK_S = 0.1
"""The shortest wait between two checks of a long poll (:meth:`HealthMonitor.wait_dead`)."""


@ray.remote(max_concurrency=32)  # type: ignore[call-overload]
class HealthMonitor:
    """Receives heartbeats from workers, servers and device agents; answers each with the
    faults injected on the sender's device; reports members silent for 1.5 periods."""

    def __init__(self, period_s: float) -> None:
        self.table = HeartbeatTable(period_s)
        self.faults = FaultBoard()
        self.metrics: dict[str, dict[str, float]] = {}

    def register(self, name: str, kind: str, device: str,
                 period_s: float | None = None) -> None:
        """``name`` beats from now on, every ``period_s`` (None: this monitor's period)."""
        self.table.register(Member(name, kind, device, period_s), time.time())

    def unregister(self, name: str) -> None:
        self.table.unregister(name)

    def beat(
        self, name: str, device: str, metrics: dict[str, float] | None = None
    ) -> dict[str, Any]:
        now = time.time()
        directive = self.faults.directive(device, now)
        if directive.stall_until <= now:
            self.table.beat(name, now)
        if metrics is not None:
            self.metrics[device] = {**metrics, "received_at": now}
        return directive.to_json()

    def beat_gaps_s(self) -> list[float]:
        """The recent gaps between two beats of one member, in seconds."""
        return list(self.table.gaps_s)

    def dead(self) -> list[tuple[str, str, str, float]]:
        return [(m.name, m.kind, m.device, s) for m, s in self.table.dead(time.time())]

    def wait_dead(self, names: list[str], devices: list[str],
                  timeout_s: float) -> list[tuple[str, str, str, float]]:
        """A long poll: as :meth:`dead`, restricted to the members ``names`` and the device
        agents of ``devices``, returned as soon as one of them is dead, or ``[]`` after
        ``timeout_s``. It sleeps until the first of them could be dead, so a run's driver
        learns of a death at once and costs this actor (on the run's smallest device, often)
        one call per ``timeout_s`` instead of a poll every quarter period."""
        wanted, on = set(names), set(devices)
        end = time.time() + timeout_s
        while True:
            now = time.time()
            found = [d for d in self.dead()
                     if d[0] in wanted or (d[1] == "agent" and d[2] in on)]
            if found or now >= end:
                return found
            watched = wanted | {n for n, m in list(self.table.members.items())
                                if m.kind == "agent" and m.device in on}
            time.sleep(min(end - now, max(RECHECK_S, self.table.next_death_s(now, watched))))

    def device_metrics(self) -> dict[str, dict[str, float]]:
        now = time.time()
        return {d: {**m, "age_seconds": now - m["received_at"]} for d, m in self.metrics.items()}

    def stall(self, device: str, seconds: float) -> None:
        self.faults.stall(device, time.time() + seconds)

    def cut(self, a: str, b: str, seconds: float) -> None:
        self.faults.cut(a, b, time.time() + seconds)

    def clear_faults(self) -> None:
        self.faults.clear()
