"""Whether a lost member ran out of its device's memory: the kernel's OOM kills in the
device's memory cgroup (a testbed node's, a container's), read on the device before an
attempt starts and again when a member is lost. On one emulating host the device's memory
is the worker's own check (``Worker._check_memory``), so nothing is read there."""

from __future__ import annotations

import functools
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from edgewise.perf.limits import MemoryKills, memory_kills
from edgewise.runtime.ray_cluster import RayRuntime, device_resource

__all__ = ["PROBE_TIMEOUT_S", "SILENT_PROBE_S", "MemoryWatch", "oom_reason"]

PROBE_TIMEOUT_S = 20.0
"""How long a reading waits for its device (a Python start on a node under its quota)."""
SILENT_PROBE_S = 5.0
"""The wait for a member that fell silent rather than died: its device may be stalled
(frozen), and then no reading comes; a wait that long must not delay the restart."""


def oom_reason(device: str, before: MemoryKills | None, now: MemoryKills | None) -> str | None:
    """``out of memory: …`` naming ``device`` when its cgroup's OOM kills rose."""
    if before is None or now is None or now.kills <= before.kills:
        return None
    limit = f" ({now.limit_mb:.0f} MB)" if now.limit_mb is not None else ""
    return f"out of memory: the kernel ended it at {device}'s memory limit{limit}"


@dataclass
class MemoryWatch:
    """The OOM kills of each device's memory cgroup when an attempt started."""

    runtime: RayRuntime
    before: dict[str, MemoryKills | None] = field(default_factory=dict)

    @classmethod
    def start(cls, runtime: RayRuntime, devices: Iterable[str]) -> MemoryWatch | None:
        """Read the devices' counts (None on an emulating host: nothing to read)."""
        if runtime.emulated:
            return None
        return cls(runtime, _read(runtime, sorted(set(devices)), PROBE_TIMEOUT_S))

    def reason(self, device: str, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
        """Why ``device``'s member was lost if the kernel ended it out of memory, else None
        (also when no reading comes within ``timeout_s``)."""
        if self.before.get(device) is None or self.runtime.lost_devices((device,)):
            return None  # nothing read before, or the device itself is gone: no reading
        now = _read(self.runtime, [device], timeout_s)[device]
        return oom_reason(device, self.before[device], now)


@functools.cache
def _probe() -> Any:
    """The reading as a Ray task, made once per process (each ``ray.remote`` of it would
    export the function to the cluster again)."""
    import ray

    return ray.remote(memory_kills)


def _read(runtime: RayRuntime, devices: list[str],
          timeout_s: float) -> dict[str, MemoryKills | None]:
    """Each device's reading, taken by a task on the device (None where it cannot be had:
    a node gone, a kernel that does not count). The task imports only ``perf.limits``."""
    import ray

    refs = {d: _probe().options(num_cpus=0, max_retries=0,
                                resources={device_resource(d, runtime.tag_of(d)): 1}).remote()
            for d in devices}
    found: dict[str, MemoryKills | None] = {}
    deadline = time.monotonic() + timeout_s  # one wait for all of them
    for device, ref in refs.items():
        try:
            found[device] = ray.get(ref, timeout=max(0.0, deadline - time.monotonic()))
        except Exception:  # a lost node, a timeout: no reading, no claim
            ray.cancel(ref, force=True)
            found[device] = None
    return found
