"""What a device's Ray node carries, wherever it runs: its resources (a slot count and its
memory), its labels, the environment edgewise gives Ray's processes, and the ``ray start``
lines that make a real device (or a testbed's namespace) that node."""

from __future__ import annotations

import json
from collections.abc import Callable

from edgewise.cluster.model import Cluster, Device, Role

__all__ = ["DEVICE_SLOTS", "INLINE_ENV", "INLINE_OBJECT_BYTES", "LABEL_DEVICE",
           "LABEL_DILATION", "LABEL_LATENCY", "device_resource", "device_resources",
           "head_device", "head_start_line", "memory_resource", "ray_start_line"]

DEVICE_SLOTS = 1000  # fractional actor slots per device: an actor takes one
LABEL_DILATION = "edgewise.io/time-dilation"  # set by a testbed's nodes (edgewise.testbed)
LABEL_LATENCY = "edgewise.io/latency"  # "transport": the network does not delay packets
# The device a node is, as a node label: what places work that Ray gives uniform resources,
# such as Ray Train's workers (``label_selector``), on named devices. Set by every
# ``ray start`` line edgewise prints and by a testbed's nodes.
LABEL_DEVICE = "edgewise.io/device"
# Objects up to this size travel inline, from core worker to core worker, in the call that
# made them (Ray's ``max_direct_call_object_size``, 100 KiB by default); larger ones go
# through the object store and both nodes' raylets. A parameter server's push and its reply
# are 0.1-2 MB, and on a device held to a small CPU quota that path was most of the
# server's cost: on the three-nanos testbed (2026-12-02, async, digits, batch 32) the
# server's Pi used its whole quota while serving pushes took 30 % of it, and a worker's
# wait per batch fell from 74 to 20 ms with the frames inline (one worker: 874 to 2,314
# samples/s; three: 1,049 to 3,054). 4 MiB holds MobileNetV2 x0.35's frames (1.6 MB) and
# stays under Ray's 10 MiB limit on a task's inlined arguments.
INLINE_OBJECT_BYTES = 4 << 20
INLINE_ENV = {"RAY_max_direct_call_object_size": str(INLINE_OBJECT_BYTES)}


def device_resource(name: str, tag: str = "") -> str:
    """The resource that pins work to device ``name``; ``tag`` tells apart devices of one
    name but another memory on one emulating instance that several clusters share
    (``local_instance.share_local``, ``local_instance.device_tag``), and is empty
    everywhere else."""
    return f"device:{tag}{name}"


def memory_resource(name: str, tag: str = "") -> str:
    return f"device-mem:{tag}{name}"


def device_resources(name: str, memory_mb: int, tag: str = "") -> dict[str, int]:
    """The custom resources a device's Ray node carries."""
    return {device_resource(name, tag): DEVICE_SLOTS, memory_resource(name, tag): memory_mb}


def _resources_flag(device: Device) -> str:
    return (f"--labels={LABEL_DEVICE}={device.name} "
            f"--resources='{json.dumps(device_resources(device.name, device.memory_mb))}'")


def ray_start_line(device: Device, head: str = "HEAD_IP:6379") -> str:
    """The exact command a real device runs to join the Ray cluster as ``device``."""
    return f"ray start --address={head} --num-cpus={device.cpu_cores} {_resources_flag(device)}"


def head_device(cluster: Cluster) -> Device:
    """Where the Ray head runs: the manager, else an edge server, else the parameter
    server, else the first device."""
    picks: tuple[Callable[[Device], bool], ...] = (
        lambda d: d.has_role(Role.MANAGER), lambda d: d.type.startswith("edge-server"),
        lambda d: d.has_role(Role.PARAMETER_SERVER))
    for pick in picks:
        found = [d for d in cluster.devices if pick(d)]
        if found:
            return found[0]
    return cluster.devices[0]


def head_start_line(device: Device, port: int = 6379) -> str:
    """The command that starts the Ray head on ``device`` (it also hosts that device)."""
    return f"ray start --head --port={port} --num-cpus={device.cpu_cores} " + _resources_flag(
        device)
