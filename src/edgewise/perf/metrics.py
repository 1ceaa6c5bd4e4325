"""Live utilisation of the machine this runs on: CPU, memory and (where NVML exists) accelerator."""

from __future__ import annotations

import psutil

__all__ = ["sample_metrics"]


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
