"""Start a local Ray instance that emulates a cluster's devices, or join a real Ray cluster.

Each device is one custom resource ``device:<name>`` (so actors can be pinned to it) and
one ``device-mem:<name>`` resource holding its memory in MB (so Ray refuses to place more
actors on a device than its memory allows). On a real cluster each device runs::

    RAY_AUTH_MODE=token ray start --address=HEAD:6379 --num-cpus=CORES \
      --resources='{"device:NAME": 1000, "device-mem:NAME": MEMORY_MB}'

with the head's token (Ray 2.x authenticates every node and driver; see
``edgewise cluster join-lines``). :func:`connect` is what every command that runs work
calls: no address (and no ``EDGEWISE_RAY_ADDRESS``) emulates locally, an address joins.
"""

from __future__ import annotations

import json
import logging
import math
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from edgewise.cluster.model import Cluster, Device, Link, Role
from edgewise.errors import ConfigError, EdgewiseError
from edgewise.runtime.emulation import EmulationConfig, stretch_factors
from edgewise.runtime.local_instance import (
    NAMESPACE,
    WORKER_NICENESS,
    device_tag,
    init_local,
    kill_named_actors,
    reachable_again,
    share_local,
    shared,
    unshare_local,
)

__all__ = [
    "ADDRESS_ENV",
    "DEVICE_SLOTS",
    "INLINE_ENV",
    "INLINE_OBJECT_BYTES",
    "LABEL_DEVICE",
    "LABEL_DILATION",
    "LABEL_LATENCY",
    "NAMESPACE",
    "WORKER_NICENESS",
    "RayRuntime",
    "connect",
    "device_resources",
    "head_device",
    "head_start_line",
    "join_cluster",
    "ray_start_line",
    "refresh_auth",
    "share_local",
    "shared",
    "start_local",
    "unshare_local",
]

DEVICE_SLOTS = 1000  # fractional actor slots per device: an actor takes one
ADDRESS_ENV = "EDGEWISE_RAY_ADDRESS"
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
Links = Literal["emulated", "latency", "network"]


def device_resource(name: str, tag: str = "") -> str:
    """The resource that pins work to device ``name``; ``tag`` tells apart devices of one
    name but another memory on one emulating instance that several clusters share
    (:func:`share_local`, ``local_instance.device_tag``), and is empty everywhere else."""
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


@dataclass(frozen=True, slots=True)
class RayRuntime:
    """A Ray instance that hosts a cluster's devices; ``stretch`` is 1.0 on real devices.

    ``links`` says what the transport must emulate: ``emulated`` bandwidth and latency
    (one host), ``latency`` only (a testbed whose kernel shapes bandwidth but cannot
    delay), ``network`` nothing (real devices). ``time_dilation`` is how much slower than
    the devices the cluster runs (a testbed's common factor; 1 elsewhere).
    """

    cluster: Cluster
    stretch: dict[str, float]
    emulated: bool
    time_dilation: float = 1.0
    links: Links = "emulated"
    address: str | None = None
    tagged: bool = False
    owned: bool = True

    def tag_of(self, device: str) -> str:
        """The tag of ``device``'s resources: its memory's on a shared emulating instance
        (``tagged``), else none."""
        return device_tag(self.cluster.device(device).memory_mb) if self.tagged else ""

    def actor_options(self, device: str, memory_mb: int,
                      name: str | None = None) -> dict[str, Any]:
        """Ray options that pin an actor to ``device`` and reserve ``memory_mb`` of it. The
        idle vessels on ``device`` (``runtime.vessel_pool``: a testbed's or a real
        cluster's keep their reservations) are ended first if the memory is not free
        otherwise."""
        from edgewise.runtime.vessel_pool import evict_device

        options = self._pinned(device, memory_mb, name)
        tag = self.tag_of(device)
        evict_device(device_resource(device, tag), memory_resource(device, tag),
                     memory_mb)
        return options

    def member_options(self, device: str, memory_mb: int,
                       name: str | None = None) -> dict[str, Any]:
        """Options for a run's member (``vessel_pool.spawn_member``): pinned to ``device``
        with ``memory_mb`` reserved, as :meth:`actor_options`. On an emulating instance
        every device is this host, so the reservation is held apart from the process
        (``vessel.RESERVE_APART``): any idle vessel of the host can then host the member,
        whichever cluster or device its last member had."""
        from edgewise.runtime.vessel import RESERVE_APART

        options = self._pinned(device, memory_mb, name)
        if self.emulated:
            options[RESERVE_APART] = True
        return options

    def _pinned(self, device: str, memory_mb: int, name: str | None) -> dict[str, Any]:
        self.cluster.device(device)  # KeyError for an unknown device
        options: dict[str, Any] = {
            "num_cpus": 0,
            "resources": {device_resource(device, self.tag_of(device)): 1,
                          memory_resource(device, self.tag_of(device)): memory_mb},
            "max_restarts": 0,
            "namespace": NAMESPACE,
        }
        if name is not None:
            options["name"] = name
        return options

    def transport_link(self, a: str, b: str, link: Link | None = None) -> Link:
        """The link the transport emulates between ``a`` and ``b``: the cluster's (or the
        modelled ``link``, e.g. a share of it) on one host, its dilated latency alone on a
        testbed without netem, nothing on a network. Every run's transport takes its links
        from here, so no code path needs to know what kind of cluster it runs on."""
        link = link or self.cluster.link(a, b)
        if self.links == "emulated":
            return link
        latency = link.latency_ms * self.time_dilation if self.links == "latency" else 0.0
        return Link(link.a, link.b, math.inf, latency)

    def lost_devices(self, devices: tuple[str, ...] | None = None,
                     timeout_s: float = 1.0) -> frozenset[str]:
        """Devices (of ``devices``, default all) whose Ray node is gone or unreachable:
        no live node carries the device, or its node manager refuses or ignores a TCP
        connection. A single emulating instance never loses a device."""
        if self.emulated:
            return frozenset()
        import ray

        where: dict[str, tuple[str, int]] = {}
        for node in ray.nodes():  # type: ignore[no-untyped-call]
            if node.get("Alive"):
                for d in self.cluster.device_names:
                    if device_resource(d) in node.get("Resources", {}):
                        where[d] = (node["NodeManagerAddress"], int(node["NodeManagerPort"]))
        lost = set()
        for d in devices if devices is not None else self.cluster.device_names:
            if d not in where or not _reachable(*where[d], timeout_s):
                lost.add(d)
        return frozenset(lost)

    def shutdown(self) -> None:
        """End the Ray instance this runtime started; a runtime on a shared instance
        (:func:`share_local`) ends only the named actors it leaves behind."""
        import ray

        if not ray.is_initialized():
            return
        if self.owned:
            ray.shutdown()
            return
        kill_named_actors()
        pool = shared()
        if pool is not None:
            pool.release(key for d in self.cluster.devices
                         for key in device_resources(d.name, d.memory_mb, self.tag_of(d.name)))
            pool.trim()


def _reachable(host: str, port: int, timeout_s: float) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def start_local(cluster: Cluster, config: EmulationConfig | None = None) -> RayRuntime:
    """Start a local Ray instance emulating every device of ``cluster`` on this host, bound
    to loopback. It is always a new instance of its own (``address="local"``), whatever Ray
    cluster runs on the machine or ``RAY_ADDRESS`` names; after :func:`share_local` it is
    the process's shared instance, which carries each device under a tag naming its memory
    (``local_instance.device_tag``)."""
    config = config or EmulationConfig()
    stretch = stretch_factors(cluster, config)
    pool = shared()
    resources: dict[str, float] = {}
    for d in cluster.devices:
        resources |= device_resources(d.name, d.memory_mb,
                                      "" if pool is None else device_tag(d.memory_mb))
    if pool is None:
        init_local(resources, config.host_cores, config.object_store_mb)
        return RayRuntime(cluster, stretch, emulated=True)
    pool.ensure(resources, config.host_cores, config.object_store_mb)
    return RayRuntime(cluster, stretch, emulated=True, tagged=True, owned=False)


def refresh_auth(enable_if_token: bool = True) -> None:
    """Make Ray re-read ``RAY_AUTH_MODE`` and the token (env or file) in this process;
    token mode is switched on when the mode is unset and a token is at hand (unless not
    ``enable_if_token``)."""
    token_at_hand = (os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH")
                     or (Path.home() / ".ray" / "auth_token").exists())
    if enable_if_token and "RAY_AUTH_MODE" not in os.environ and token_at_hand:
        os.environ["RAY_AUTH_MODE"] = "token"
    try:
        from ray._raylet import (  # type: ignore[attr-defined]
            AuthenticationTokenLoader,
            Config,
        )

        Config.initialize("")
        AuthenticationTokenLoader.instance().reset_cache()
    except (ImportError, AttributeError):  # a Ray without token authentication
        pass


def _labels() -> dict[str, str]:
    import ray

    for node in ray.nodes():  # type: ignore[no-untyped-call]
        labels = node.get("Labels") or {}
        if node.get("Alive") and LABEL_DILATION in labels:
            return dict(labels)
    return {}


def _missing(cluster: Cluster) -> list[str]:
    import ray

    available = ray.cluster_resources()  # type: ignore[no-untyped-call]
    return [d.name for d in cluster.devices
            if device_resource(d.name) not in available or memory_resource(d.name) not in available]


def _init(address: str) -> None:
    import ray

    if ray.is_initialized():
        ray.shutdown()
    reachable_again()
    refresh_auth()
    try:
        ray.init(address=address, namespace=NAMESPACE, logging_level=logging.WARNING,
                 log_to_driver=False)
    except Exception as exc:  # Ray raises ConnectionError, RuntimeError, AuthenticationError...
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        hint = "" if os.environ.get("RAY_AUTH_MODE") == "token" else (
            " (a cluster with token authentication needs RAY_AUTH_MODE=token and its token "
            "in RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token)")
        raise EdgewiseError(f"cannot join the Ray cluster at {address}: {first}{hint}") from None


def join_cluster(cluster: Cluster, address: str, wait_s: float = 30.0,
                 require_all: bool = True) -> RayRuntime:
    """Join a running Ray cluster whose devices registered their resources with
    ``ray start``; waits up to ``wait_s`` for every device of ``cluster`` to register
    (ConfigError naming the missing ones, unless not ``require_all``). A testbed's nodes
    tell their time dilation and whether links delay packets."""
    import ray

    _init(address)
    deadline = time.monotonic() + wait_s
    while (missing := _missing(cluster)) and time.monotonic() < deadline:
        time.sleep(0.5)
    if missing and require_all:
        ray.shutdown()
        lines = "\n  ".join(ray_start_line(cluster.device(n)) for n in missing)
        raise ConfigError(
            f"devices not registered in the Ray cluster at {address}: {', '.join(missing)}; "
            f"run on each (with RAY_AUTH_MODE=token and the head's token):\n  {lines}",
            field="devices",
        )
    labels = _labels()
    dilation = float(labels.get(LABEL_DILATION, 1.0))
    links: Links = "latency" if labels.get(LABEL_LATENCY) == "transport" else "network"
    return RayRuntime(cluster, {d.name: 1.0 for d in cluster.devices}, emulated=False,
                      time_dilation=dilation, links=links, address=address)


def connect(cluster: Cluster, address: str | None = None,
            config: EmulationConfig | None = None) -> RayRuntime:
    """The runtime every work command uses: ``address`` (else ``EDGEWISE_RAY_ADDRESS``)
    ``"auto"`` or ``host:port`` joins that Ray cluster; none or ``"local"`` emulates the
    cluster on this host with ``config``."""
    chosen = address if address is not None else os.environ.get(ADDRESS_ENV, "")
    if chosen in ("", "local"):
        return start_local(cluster, config)
    return join_cluster(cluster, chosen)
