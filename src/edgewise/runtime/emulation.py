"""Device emulation on one host: stretch compute by the device's speed relative to the host.

A step that used ``c`` seconds of this thread's CPU time on the host takes ``c * stretch``
seconds on the emulated device, where ``stretch = host_speed / device.speed``; the rest is
slept. CPU time (not wall time) is measured so that contention between emulated devices on a
small host does not leak into the emulated timing, as long as the host has headroom.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from edgewise.cluster.model import Cluster
from edgewise.errors import ConfigError
from edgewise.runtime.throttle import Throttle

__all__ = ["EmulationConfig", "auto_host_speed", "emulated_compute", "stretch_factors"]


@dataclass(frozen=True, slots=True)
class EmulationConfig:
    """How one host emulates a cluster.

    ``host_speed`` is the host core's speed on the catalog's scale (Jetson Nano = 1); ``None``
    picks :func:`auto_host_speed`. ``host_share`` is the fraction of the host's cores that
    the emulated devices may use together when all compute at once.
    """

    host_speed: float | None = None
    host_share: float = 0.5
    host_cores: int = os.cpu_count() or 1
    object_store_mb: int = 256


def auto_host_speed(cluster: Cluster, cores: int, share: float) -> float:
    """The smallest host speed at which all devices computing at once fit ``share`` of the
    host's cores, and no device runs faster than the host (stretch >= 1)."""
    if not 0 < share <= 1:
        raise ConfigError("host_share must be in (0, 1]", field="emulation.host_share")
    total = sum(d.speed for d in cluster.devices)
    fastest = max(d.speed for d in cluster.devices)
    return max(fastest, total / (cores * share))


def stretch_factors(cluster: Cluster, config: EmulationConfig) -> dict[str, float]:
    """Per device: emulated seconds per host CPU second (>= 1)."""
    host = (config.host_speed if config.host_speed is not None
            else auto_host_speed(cluster, config.host_cores, config.host_share))
    slow = [d.name for d in cluster.devices if d.speed > host]
    if slow:
        raise ConfigError(
            f"host_speed {host} is below the speed of {', '.join(slow)}; the host cannot "
            "emulate a device faster than itself",
            field="emulation.host_speed",
        )
    return {d.name: host / d.speed for d in cluster.devices}


@contextmanager
def emulated_compute(stretch: float) -> Iterator[None]:
    """Run the body, then sleep so that it lasts ``stretch`` times its CPU time. A stretch
    of 1 or less never sleeps (a thread's CPU time never exceeds its wall time), so it reads
    no clock either: a testbed's or a real device's members run at stretch 1, and the
    parameter server wraps every push's step in this."""
    if stretch <= 1.0:
        yield
        return
    with Throttle(stretch).step():
        yield
