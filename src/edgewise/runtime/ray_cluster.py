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

import logging
import math
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from edgewise.cluster.model import Cluster, Link
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
from edgewise.runtime.node_resources import (
    DEVICE_SLOTS,
    INLINE_ENV,
    INLINE_OBJECT_BYTES,
    LABEL_DEVICE,
    LABEL_DILATION,
    LABEL_LATENCY,
    device_resource,
    device_resources,
    head_device,
    head_start_line,
    memory_resource,
    ray_start_line,
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
    "device_resource",
    "device_resources",
    "emulated_resources",
    "head_device",
    "head_start_line",
    "join_cluster",
    "memory_resource",
    "ray_start_line",
    "refresh_auth",
    "share_local",
    "shared",
    "start_local",
    "unshare_local",
]

ADDRESS_ENV = "EDGEWISE_RAY_ADDRESS"
Links = Literal["emulated", "latency", "network"]


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


def emulated_resources(cluster: Cluster, *, tagged: bool) -> dict[str, float]:
    """The Ray resources that emulate ``cluster``'s devices: each device's slots and memory,
    under the tag naming its memory on a shared instance (``tagged``). What
    :func:`share_local` takes to carry clusters from the shared instance's first start on."""
    resources: dict[str, float] = {}
    for d in cluster.devices:
        resources |= device_resources(d.name, d.memory_mb,
                                      device_tag(d.memory_mb) if tagged else "")
    return resources


def start_local(cluster: Cluster, config: EmulationConfig | None = None) -> RayRuntime:
    """Start a local Ray instance emulating every device of ``cluster`` on this host, bound
    to loopback. It is always a new instance of its own (``address="local"``), whatever Ray
    cluster runs on the machine or ``RAY_ADDRESS`` names; after :func:`share_local` it is
    the process's shared instance, which carries each device under a tag naming its memory
    (``local_instance.device_tag``)."""
    config = config or EmulationConfig()
    stretch = stretch_factors(cluster, config)
    pool = shared()
    resources = emulated_resources(cluster, tagged=pool is not None)
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
