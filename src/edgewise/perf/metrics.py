"""Live utilisation of the machine this runs on: CPU, memory and (where NVML exists)
accelerator; the machine is the device a cgroup's CPU quota holds this process to, if any
(``perf.limits``), else the host."""

from __future__ import annotations

from pathlib import Path

import psutil

from edgewise.perf.limits import CgroupDevice, CpuMeter, cgroup_device

__all__ = ["sample_metrics", "without_self"]

_METERS: dict[Path, CpuMeter] = {}  # per cgroup: CPU used since the previous sample


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


def _device_metrics(device: CgroupDevice) -> dict[str, float]:
    meter = _METERS.get(device.cpu_usage_file)
    if meter is None:
        meter = _METERS[device.cpu_usage_file] = CpuMeter(device)
    limit = min(device.memory_limit_bytes, psutil.virtual_memory().total)
    used = device.memory_used_bytes()
    return {"cpu_percent": meter.percent(), "memory_percent": 100.0 * used / limit,
            "memory_used_mb": used / 2**20, "load_1m": float(psutil.getloadavg()[0]),
            **_nvml_percent()}


def sample_metrics() -> dict[str, float]:
    """CPU and memory utilisation of the machine this runs on (a cgroup's device: against
    its quota and memory limit, CPU since the previous call), and its accelerator's."""
    device = cgroup_device()
    if device is not None:
        return _device_metrics(device)
    mem = psutil.virtual_memory()
    return {
        "cpu_percent": float(psutil.cpu_percent(interval=None)),
        "memory_percent": float(mem.percent),
        "memory_used_mb": float(mem.used / 2**20),
        "load_1m": float(psutil.getloadavg()[0]),
        **_nvml_percent(),
    }


def without_self(metrics: dict[str, float]) -> dict[str, float]:
    """``metrics`` less this process's own resident memory: the machine as it is for work
    that is not running yet. The profiler reads a device's state before each update with
    its trainer resident, and a plan reads it from a small probe, before any worker
    exists; both leave themselves out so that the two states mean the same (on a 4 GB
    testbed Nano the trainer alone was 8 % of memory, below every profiled state)."""
    used = metrics["memory_used_mb"]
    if used <= 0:
        return metrics
    own_mb = psutil.Process().memory_info().rss / 2**20
    left = max(0.0, used - own_mb)
    return {**metrics, "memory_used_mb": left,
            "memory_percent": metrics["memory_percent"] * left / used}
