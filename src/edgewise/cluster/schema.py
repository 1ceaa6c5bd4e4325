"""The cluster file's YAML schema, validated at load (pydantic at the edge only)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from edgewise.cluster.catalog import catalog
from edgewise.cluster.model import BackgroundApp, Cluster, Device, Link, Role, Site
from edgewise.errors import ConfigError, config_error

__all__ = ["ClusterFile", "cluster_from_dict", "load_cluster", "read_yaml"]

Positive = Annotated[float, Field(gt=0)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DeviceSpec(_Strict):
    name: str = Field(min_length=1, description="unique device name")
    type: str = Field(description="a device type from the catalog (edgewise cluster types)")
    roles: list[Role] = Field(default_factory=lambda: [Role.WORKER])
    memory_mb: int | None = Field(default=None, gt=0, description="override the datasheet")
    cpu_cores: int | None = Field(default=None, gt=0)
    speed: float | None = Field(default=None, gt=0, description="relative speed, Nano = 1")
    port_mbps: float | None = Field(
        default=None, gt=0,
        description="the line rate of the device's one network port (a switch port), "
                    "Mbit/s each way: all its links share it; unset: each link carries its "
                    "own rate alone")

    @field_validator("type")
    @classmethod
    def _known_type(cls, value: str) -> str:
        if value not in catalog():
            known = ", ".join(sorted(catalog()))
            raise ValueError(f"unknown device type {value!r} (known: {known})")
        return value


class LinkSpec(_Strict):
    bandwidth_mbps: Positive = Field(description="link bandwidth in Mbit/s")
    latency_ms: float = Field(default=0.5, ge=0, description="one-way latency in ms")


class PairLinkSpec(LinkSpec):
    between: Annotated[list[str], Field(min_length=2, max_length=2)]


class SiteSpec(_Strict):
    name: str = Field(min_length=1)
    devices: list[str] = Field(min_length=1)


class AppSpec(_Strict):
    name: str = Field(min_length=1)
    device: str
    kind: str = Field(min_length=1, description="e.g. sift")
    period_ms: Positive
    deadline_ms: Positive | None = Field(default=None, description="defaults to the period")


class ClusterFile(_Strict):
    """Top level of a cluster file."""

    name: str = Field(min_length=1)
    devices: list[DeviceSpec] = Field(min_length=1)
    default_link: LinkSpec = LinkSpec(bandwidth_mbps=1000.0, latency_ms=0.5)
    links: list[PairLinkSpec] = Field(default_factory=list)
    sites: list[SiteSpec] = Field(default_factory=list)
    background_apps: list[AppSpec] = Field(default_factory=list)

    @model_validator(mode="after")
    def _references(self) -> ClusterFile:
        names = [d.name for d in self.devices]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"device names must be unique; repeated: {', '.join(dupes)}")
        known = set(names)
        refs = [(f"links[{i}].between", n) for i, lk in enumerate(self.links) for n in lk.between]
        refs += [(f"sites[{i}].devices", n) for i, s in enumerate(self.sites) for n in s.devices]
        refs += [
            (f"background_apps[{i}].device", a.device) for i, a in enumerate(self.background_apps)
        ]
        for where, name in refs:
            if name not in known:
                raise ValueError(f"{where}: no device named {name!r}")
        return self

    def to_cluster(self) -> Cluster:
        types = catalog()
        devices = tuple(
            Device(
                name=d.name,
                type=d.type,
                cpu_cores=d.cpu_cores or types[d.type].cpu_cores,
                accelerator=types[d.type].accelerator,
                memory_mb=d.memory_mb or types[d.type].memory_mb,
                speed=d.speed or types[d.type].speed,
                roles=tuple(d.roles),
                peak_gflops=types[d.type].peak_gflops,
                port_mbps=d.port_mbps,
            )
            for d in self.devices
        )
        default = Link("*", "*", self.default_link.bandwidth_mbps, self.default_link.latency_ms)
        links = tuple(
            Link(lk.between[0], lk.between[1], lk.bandwidth_mbps, lk.latency_ms)
            for lk in self.links
        )
        sites = tuple(Site(s.name, tuple(s.devices)) for s in self.sites)
        apps = tuple(
            BackgroundApp(a.name, a.device, a.kind, a.period_ms, a.deadline_ms or a.period_ms)
            for a in self.background_apps
        )
        return Cluster(self.name, devices, default, links, sites, apps)


def cluster_from_dict(data: Any, source: str = "<dict>") -> Cluster:
    """Validate a parsed cluster document; ConfigError names the field and the problem."""
    if not isinstance(data, dict):
        raise ConfigError("the file must hold a mapping (name:, devices:, ...)", source=source)
    try:
        return ClusterFile.model_validate(data).to_cluster()
    except ValidationError as exc:
        raise config_error(exc, source) from None


def read_yaml(path: str | Path) -> Any:
    """The parsed YAML document at ``path``; ConfigError names the file when it cannot be
    read or parsed (shared by every file format of the project)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read the file: {exc.strerror}", source=str(path)) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"not valid YAML: {exc}", source=str(path)) from None


def load_cluster(path: str | Path) -> Cluster:
    """Read and validate a cluster file."""
    return cluster_from_dict(read_yaml(path), source=str(path))
