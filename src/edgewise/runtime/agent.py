"""Device agents: one per device, reporting live metrics with their heartbeats."""

from __future__ import annotations

from typing import Any

import psutil
import ray

from edgewise.runtime.heartbeat import Heartbeat

__all__ = ["DeviceAgent", "sample_metrics"]


def _nvml_percent() -> dict[str, float]:
    """Accelerator utilisation from NVML where an NVIDIA GPU and pynvml are present."""
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        util = pynvml.nvmlDeviceGetUtilizationRates(handle)
        mem = pynvml.nvmlDeviceGetMemoryInfo(handle)
        return {"accelerator_percent": float(util.gpu),
                "accelerator_memory_percent": 100.0 * mem.used / mem.total}
    except Exception:  # no NVIDIA driver or no pynvml: no accelerator metrics
        return {}


def sample_metrics() -> dict[str, float]:
    """CPU and memory utilisation of the machine this runs on, and its accelerator's."""
    mem = psutil.virtual_memory()
    return {
        "cpu_percent": float(psutil.cpu_percent(interval=None)),
        "memory_percent": float(mem.percent),
        "memory_used_mb": float(mem.used / 2**20),
        "load_1m": float(psutil.getloadavg()[0]),
        **_nvml_percent(),
    }


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
