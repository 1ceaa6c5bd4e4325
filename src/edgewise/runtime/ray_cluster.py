"""Start a local Ray instance that emulates a cluster's devices, or join a real Ray cluster.

Each device is one custom resource ``device:<name>`` (so actors can be pinned to it) and
one ``device-mem:<name>`` resource holding its memory in MB (so Ray refuses to place more
actors on a device than its memory allows). On a real cluster each device runs::

    ray start --address=HEAD:6379 --num-cpus=CORES \
      --resources='{"device:NAME": 1000, "device-mem:NAME": MEMORY_MB}'
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from typing import Any

from edgewise.cluster.model import Cluster, Device
from edgewise.errors import ConfigError
from edgewise.runtime.emulation import EmulationConfig, stretch_factors

__all__ = ["DEVICE_SLOTS", "RayRuntime", "join_cluster", "ray_start_line", "start_local"]

DEVICE_SLOTS = 1000  # fractional actor slots per device: an actor takes one
NAMESPACE = "edgewise"


def device_resource(name: str) -> str:
    return f"device:{name}"


def memory_resource(name: str) -> str:
    return f"device-mem:{name}"


def ray_start_line(device: Device, head: str = "HEAD_IP:6379") -> str:
    """The exact command a real device runs to join the Ray cluster as ``device``."""
    resources = json.dumps(
        {device_resource(device.name): DEVICE_SLOTS, memory_resource(device.name): device.memory_mb}
    )
    return f"ray start --address={head} --num-cpus={device.cpu_cores} --resources='{resources}'"


@dataclass(frozen=True, slots=True)
class RayRuntime:
    """A Ray instance that hosts a cluster's devices; ``stretch`` is 1.0 on real devices."""

    cluster: Cluster
    stretch: dict[str, float]
    emulated: bool

    def actor_options(self, device: str, memory_mb: int, name: str | None = None) -> dict[str, Any]:
        """Ray options that pin an actor to ``device`` and reserve ``memory_mb`` of it."""
        self.cluster.device(device)  # KeyError for an unknown device
        options: dict[str, Any] = {
            "num_cpus": 0,
            "resources": {device_resource(device): 1, memory_resource(device): memory_mb},
            "max_restarts": 0,
            "namespace": NAMESPACE,
        }
        if name is not None:
            options["name"] = name
        return options

    def shutdown(self) -> None:
        import ray

        if ray.is_initialized():
            ray.shutdown()


def start_local(cluster: Cluster, config: EmulationConfig | None = None) -> RayRuntime:
    """Start a local Ray instance emulating every device of ``cluster`` on this host."""
    import ray

    config = config or EmulationConfig()
    stretch = stretch_factors(cluster, config)
    resources: dict[str, float] = {}
    for d in cluster.devices:
        resources[device_resource(d.name)] = DEVICE_SLOTS
        resources[memory_resource(d.name)] = d.memory_mb
    if ray.is_initialized():
        ray.shutdown()
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    ray.init(
        address="local",  # a new instance, never someone else's running cluster
        num_cpus=config.host_cores,
        resources=resources,
        object_store_memory=config.object_store_mb * 1024 * 1024,
        include_dashboard=False,
        namespace=NAMESPACE,
        logging_level=logging.WARNING,
        log_to_driver=False,
        configure_logging=True,
    )
    return RayRuntime(cluster, stretch, emulated=True)


def join_cluster(cluster: Cluster, address: str) -> RayRuntime:
    """Join a running Ray cluster whose devices registered their resources with ray start."""
    import ray

    ray.init(address=address, namespace=NAMESPACE, logging_level=logging.WARNING)
    available = ray.cluster_resources()  # type: ignore[no-untyped-call]
    missing = [d.name for d in cluster.devices if device_resource(d.name) not in available]
    if missing:
        ray.shutdown()
        lines = "\n  ".join(ray_start_line(cluster.device(n)) for n in missing)
        raise ConfigError(
            f"devices not registered in the Ray cluster at {address}: {', '.join(missing)}; "
            f"run on each:\n  {lines}",
            field="devices",
        )
    return RayRuntime(cluster, {d.name: 1.0 for d in cluster.devices}, emulated=False)
