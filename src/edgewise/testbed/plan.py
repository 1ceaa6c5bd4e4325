"""The testbed's plan: names, addresses, CPU quotas, memory limits and link rates (pure).

One host holds every device, so the testbed runs slower than the real devices by one common
factor, the time dilation ``D`` (as in DieCast): device ``i`` gets a CPU quota of
``speed_i / (host_speed * D)`` host cores, every link carries ``bandwidth / D`` and a
device's port, where the cluster gives one, ``port_mbps / D`` each way. ``D`` is the
smallest factor >= 1 at which all quotas together fit the host's CPU budget, so compute and
transfer keep their real proportions and a time measured on the testbed is ``D`` times the
device time.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from edgewise.cluster.model import Cluster
from edgewise.errors import ConfigError, InfeasibleError
from edgewise.runtime.ray_cluster import head_device

__all__ = [
    "DEFAULT_SUBNET", "HostFacts", "NodePlan", "PeerRate", "TestbedPlan", "cfs_period_us",
    "check_name", "plan_testbed",
]

DEFAULT_SUBNET = "10.77.0.0/24"
CFS_PERIOD_US = 10_000  # the shortest CFS period used: a device is slow at every instant
MIN_QUOTA_PER_PERIOD_US = 2_000  # 2x the kernel's smallest quota (see cfs_period_us)
MIN_QUOTA_CORES = 0.02  # 1 ms per period, the kernel's smallest quota
OBJECT_STORE_FRACTION = 0.3  # Ray's own default share of a node's memory
OBJECT_STORE_MIN_MB = 80  # Ray refuses less than 75 MB
GCS_PORT = 6379
_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,19}$")


@dataclass(frozen=True, slots=True)
class HostFacts:
    """What this host offers: cores, memory and one core's speed on the catalog's scale
    (Jetson Nano = 1), and the CPU budget the devices may use together (the rest is left
    to the driver and the kernel)."""

    cores: int
    memory_mb: int
    speed: float
    cpu_budget_cores: float

    def __post_init__(self) -> None:
        if self.speed <= 0:
            raise ConfigError("the host speed must be > 0", field="host_speed")
        if not 0 < self.cpu_budget_cores <= self.cores:
            raise ConfigError(f"the CPU budget must be in (0, {self.cores}] cores",
                              field="cpu_budget")


@dataclass(frozen=True, slots=True)
class PeerRate:
    """How a node's egress towards one peer is shaped: the configured link and the
    dilated rate that ``tc`` enforces."""

    device: str
    address: str
    bandwidth_mbps: float
    latency_ms: float
    rate_mbit: float


@dataclass(frozen=True, slots=True)
class NodePlan:
    """One device as a Ray node: its namespace, address, cgroup and limits."""

    device: str
    index: int
    address: str
    netns: str
    port: str  # the veth's name on the bridge side
    cgroup: str  # relative to each controller's root
    temp_dir: str
    head: bool
    num_cpus: int
    speed: float
    quota_cores: float
    cfs_period_us: int
    memory_mb: int
    object_store_mb: int
    peers: tuple[PeerRate, ...]
    default_rate_mbit: float
    default_latency_ms: float
    port_rate_mbit: float | None = None  # the device's port, each way, dilated; None: no cap


@dataclass(frozen=True, slots=True)
class TestbedPlan:
    """Everything ``up`` makes, derived from the cluster, the name, the subnet and the host."""

    name: str
    cluster_name: str
    subnet: str
    prefix_len: int
    bridge_netns: str
    cgroup_root: str
    temp_root: str
    time_dilation: float
    host: HostFacts
    nodes: tuple[NodePlan, ...]

    @property
    def head(self) -> NodePlan:
        return next(n for n in self.nodes if n.head)

    @property
    def head_address(self) -> str:
        return f"{self.head.address}:{GCS_PORT}"

    def node(self, device: str) -> NodePlan:
        for n in self.nodes:
            if n.device == device:
                return n
        known = ", ".join(n.device for n in self.nodes)
        raise ConfigError(f"no device {device!r} in testbed {self.name!r} (devices: {known})",
                          field="device")


def cfs_period_us(quota_cores: float) -> int:
    """The CFS period for a quota: 10 ms, longer for small quotas so that a period's quota
    is at least 2 ms (a Pi 4 at 0.1 cores: 20 ms). A node that idles between bursts (a
    worker waiting on its server, between epochs) runs each burst at the host's full speed
    on the quota left in its period, then freezes until the next: over a 69 ms period, four
    training steps after an idle spell took 7-36 ms a step against 29 ms sustained
    (2026-12-06, docs/testbed.md), so a short epoch ran up to 4 times faster than its
    profile, which a slow board never does. Over 10 ms the same bursts took 23-43 ms. The
    kernel delivers such quotas in full (0.1 cores over 10 ms: 100.4 %, kernel 6.18)."""
    period = max(CFS_PERIOD_US, round(MIN_QUOTA_PER_PERIOD_US / quota_cores))
    return min(1_000_000, period)


def check_name(name: str) -> str:
    """``name`` if it is a valid testbed name (it becomes part of namespace and cgroup
    names): lower-case letters, digits and dashes, at most 20, no leading dash."""
    if not _NAME.match(name):
        raise ConfigError(f"{name!r} is not a valid testbed name: use 1-20 lower-case "
                          "letters, digits or dashes, starting with a letter or digit",
                          field="name")
    return name


def _hosts(subnet: str, count: int) -> tuple[ipaddress.IPv4Network, list[str]]:
    try:
        net = ipaddress.ip_network(subnet, strict=True)
    except ValueError as exc:
        raise ConfigError(f"{subnet!r} is not a subnet in CIDR form: {exc}",
                          field="subnet") from None
    if not isinstance(net, ipaddress.IPv4Network) or not net.is_private:
        raise ConfigError(f"{subnet} must be a private IPv4 subnet (e.g. {DEFAULT_SUBNET})",
                          field="subnet")
    hosts = [str(h) for _, h in zip(range(count), net.hosts(), strict=False)]
    if len(hosts) < count:
        raise ConfigError(f"{subnet} has room for {len(hosts)} addresses, the cluster has "
                          f"{count} devices", field="subnet")
    return net, hosts


def time_dilation(cluster: Cluster, host: HostFacts) -> float:
    """The smallest factor >= 1 at which every device's quota fits the host's budget."""
    total = sum(d.speed for d in cluster.devices)
    return max(1.0, total / (host.speed * host.cpu_budget_cores))


def _object_store_mb(memory_mb: int) -> int:
    return max(OBJECT_STORE_MIN_MB, min(memory_mb // 2, int(memory_mb * OBJECT_STORE_FRACTION)))


def _check_fits(cluster: Cluster, host: HostFacts, dilation: float) -> None:
    for d in cluster.devices:
        if d.memory_mb > host.memory_mb:
            raise InfeasibleError(f"device {d.name} needs {d.memory_mb} MB of memory; this "
                                  f"host has {host.memory_mb} MB")
        quota = d.speed / (host.speed * dilation)
        if quota < MIN_QUOTA_CORES:
            raise InfeasibleError(
                f"device {d.name} would get {quota:.4f} host cores, below the kernel's "
                f"smallest quota ({MIN_QUOTA_CORES}); use a larger host or fewer devices")


def plan_testbed(cluster: Cluster, name: str, host: HostFacts,
                 subnet: str = DEFAULT_SUBNET) -> TestbedPlan:
    """The plan of testbed ``name`` for ``cluster`` on ``host``; ConfigError for a bad name
    or subnet, InfeasibleError when a device cannot fit this host."""
    check_name(name)
    net, addresses = _hosts(subnet, len(cluster.devices))
    dilation = time_dilation(cluster, host)
    _check_fits(cluster, host, dilation)
    head = head_device(cluster).name
    index = {d.name: i for i, d in enumerate(cluster.devices)}
    default_rate = cluster.default_link.bandwidth_mbps / dilation
    nodes = []
    for i, d in enumerate(cluster.devices):
        quota = d.speed / (host.speed * dilation)
        peers = tuple(
            PeerRate(p.name, addresses[index[p.name]], link.bandwidth_mbps, link.latency_ms,
                     link.bandwidth_mbps / dilation)
            for p in cluster.devices if p.name != d.name
            for link in (cluster.link(d.name, p.name),))
        nodes.append(NodePlan(
            device=d.name, index=i, address=addresses[i], netns=f"ewtb.{name}.{i}",
            port=f"d{i}", cgroup=f"edgewise/{name}/{i}", temp_dir=f"/tmp/ewtb/{name}/{i}",
            head=d.name == head, num_cpus=d.cpu_cores, speed=d.speed,
            quota_cores=quota, cfs_period_us=cfs_period_us(quota), memory_mb=d.memory_mb,
            object_store_mb=_object_store_mb(d.memory_mb), peers=peers,
            default_rate_mbit=default_rate,
            default_latency_ms=cluster.default_link.latency_ms,
            port_rate_mbit=None if d.port_mbps is None else d.port_mbps / dilation))
    return TestbedPlan(name, cluster.name, str(net), net.prefixlen, f"ewtb.{name}.br",
                       f"edgewise/{name}", f"/tmp/ewtb/{name}", dilation, host, tuple(nodes))
