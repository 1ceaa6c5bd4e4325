"""Device agents: one per device, reporting live metrics with their heartbeats."""

from __future__ import annotations

from typing import Any

import psutil
import ray

from edgewise.perf.metrics import sample_metrics
from edgewise.runtime.heartbeat import Heartbeat

__all__ = ["DeviceAgent"]


@ray.remote(max_concurrency=2)  # type: ignore[call-overload]
class DeviceAgent:
    """Beats every period with the device's metrics. On an emulated cluster every agent runs
    on the same host, so the metrics are the host's; on a real cluster, the device's own."""

    def __init__(self, device: str, monitor: Any, period_s: float) -> None:
        psutil.cpu_percent(interval=None)  # prime the counter
        self.hb = Heartbeat(monitor, f"agent-{device}", "agent", device, period_s, sample_metrics)

    def ping(self) -> bool:
        return True

    def stop(self) -> None:
        self.hb.stop()
