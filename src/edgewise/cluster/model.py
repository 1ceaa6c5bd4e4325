"""The world: devices, links, sites, latency-critical background apps and the cluster."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

__all__ = ["BackgroundApp", "Cluster", "Device", "Link", "Role", "Site"]


class Role(StrEnum):
    """What a device does in a model-update cluster (Deep-Edge §IV-A)."""

    WORKER = "worker"
    PARAMETER_SERVER = "parameter-server"
    DATA_STORE = "data-store"
    MANAGER = "manager"


@dataclass(frozen=True, slots=True)
class Device:
    """One edge device.

    ``speed`` is the relative training speed on the catalog's scale (Jetson Nano = 1.0);
    a step that takes ``t`` seconds on a Nano takes ``t / speed`` on this device.
    ``port_mbps`` is the line rate of its one network port, each way, which every link of
    the device shares (a switch port: a parameter server's replies to four workers leave
    through it one after another); ``None``: each link carries its own rate alone.
    """

    name: str
    type: str
    cpu_cores: int
    accelerator: str
    memory_mb: int
    speed: float
    roles: tuple[Role, ...] = (Role.WORKER,)
    peak_gflops: float = 0.0
    port_mbps: float | None = None

    def has_role(self, role: Role) -> bool:
        return role in self.roles


@dataclass(frozen=True, slots=True)
class Link:
    """A network link between two devices (undirected)."""

    a: str
    b: str
    bandwidth_mbps: float
    latency_ms: float

    def transfer_seconds(self, size_bytes: int) -> float:
        """Latency plus serialisation time of ``size_bytes`` over this link."""
        return self.latency_ms / 1e3 + size_bytes * 8 / (self.bandwidth_mbps * 1e6)


@dataclass(frozen=True, slots=True)
class Site:
    """A named group of devices (an edge site in Okita, a sub-cluster elsewhere)."""

    name: str
    devices: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class BackgroundApp:
    """A latency-critical task pinned to a device: it runs every ``period_ms`` and must
    finish within ``deadline_ms`` (Deep-Edge §III: the co-located apps whose deadlines
    model updates must not break)."""

    name: str
    device: str
    kind: str
    period_ms: float
    deadline_ms: float


@dataclass(frozen=True, slots=True)
class Cluster:
    """Devices, the links between them, sites and background apps.

    Links form a complete graph: ``default_link`` applies to every pair without an entry
    in ``links``.
    """

    name: str
    devices: tuple[Device, ...]
    default_link: Link
    links: tuple[Link, ...] = ()
    sites: tuple[Site, ...] = ()
    background_apps: tuple[BackgroundApp, ...] = ()
    _link_index: dict[frozenset[str], Link] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        index = {frozenset((link.a, link.b)): link for link in self.links}
        object.__setattr__(self, "_link_index", index)

    @property
    def device_names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.devices)

    def device(self, name: str) -> Device:
        for d in self.devices:
            if d.name == name:
                return d
        raise KeyError(f"no device named {name!r} in cluster {self.name!r}")

    def link(self, a: str, b: str) -> Link:
        """The link between ``a`` and ``b``: the pair's own entry, else the default."""
        found = self._link_index.get(frozenset((a, b)))
        if found is not None:
            return found
        return Link(a, b, self.default_link.bandwidth_mbps, self.default_link.latency_ms)

    def with_role(self, role: Role) -> tuple[Device, ...]:
        return tuple(d for d in self.devices if d.has_role(role))

    def apps_on(self, device: str) -> tuple[BackgroundApp, ...]:
        return tuple(app for app in self.background_apps if app.device == device)

    def without(self, names: frozenset[str]) -> Cluster:
        """The same cluster with the named devices (and their links and apps) removed."""
        keep = tuple(d for d in self.devices if d.name not in names)
        links = tuple(lk for lk in self.links if lk.a not in names and lk.b not in names)
        sites = tuple(
            Site(s.name, tuple(n for n in s.devices if n not in names)) for s in self.sites
        )
        apps = tuple(a for a in self.background_apps if a.device not in names)
        return Cluster(self.name, keep, self.default_link, links, sites, apps)
