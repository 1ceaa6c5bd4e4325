"""Okita's sites as emulated device groups: a Cluster per scenario, and which device does what."""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from edgewise.cluster.catalog import device_type
from edgewise.cluster.model import Cluster, Device, Link, Role, Site
from edgewise.errors import ConfigError
from edgewise.sites.problem import JobSlot, Plan, SitesProblem

if TYPE_CHECKING:
    from edgewise.runtime.ray_cluster import RayRuntime

__all__ = [
    "DEFAULT_DEVICE_TYPE",
    "JobDevices",
    "SiteDevices",
    "allocate_slot",
    "devices_needed",
    "link_between",
    "site_cluster",
    "site_devices",
]

DEFAULT_DEVICE_TYPE = "edge-server-rtx3060"
"""An edge cloudlet's server: the catalog's x86 box with an RTX 3060."""


@dataclass(frozen=True, slots=True)
class SiteDevices:
    """Site r's devices: ``store`` holds the site's data chunks (its HDFS node, §V-A) and
    ``compute`` hosts the workers and parameter servers placed there, one actor each."""

    site: str
    store: str
    compute: tuple[str, ...]


def devices_needed(problem: SitesProblem, plan: Plan) -> list[int]:
    """Per site, the most actors (workers y_i^r(t) plus parameter servers s_i^r(t)) the plan
    places there in any one slot (at least one, so that every site can compute)."""
    need = [1] * problem.n_sites
    for slot in range(plan.n_slots):
        load = [0] * problem.n_sites
        for e in plan.for_slot(slot):
            for r, y in enumerate(e.workers):
                load[r] += y
            load[e.ps_site] += 1
        need = [max(a, b) for a, b in zip(need, load, strict=True)]
    return need


def _device(name: str, type_name: str, roles: tuple[Role, ...]) -> Device:
    t = device_type(type_name)
    return Device(name, t.name, t.cpu_cores, t.accelerator, t.memory_mb, t.speed, roles,
                  t.peak_gflops)


def site_cluster(problem: SitesProblem, plan: Plan, *, inter_site: Link, intra_site: Link,
                 device_type_name: str = DEFAULT_DEVICE_TYPE) -> Cluster:
    """A cluster with one Site per scenario site: a store device ``<site>-store`` and as many
    compute devices ``<site>-nK`` as the plan needs there at once. Devices of one site share
    ``intra_site`` links, devices of two sites the ``inter_site`` link (the wireless uplinks
    between cloudlets, Fig. 1)."""
    sites: list[Site] = []
    devices: list[Device] = []
    for spec, n in zip(problem.sites, devices_needed(problem, plan), strict=True):
        store = _device(f"{spec.name}-store", device_type_name, (Role.DATA_STORE,))
        compute = [_device(f"{spec.name}-n{k}", device_type_name, (Role.WORKER,))
                   for k in range(n)]
        devices += [store, *compute]
        sites.append(Site(spec.name, (store.name, *(d.name for d in compute))))
    site_of = {d: s.name for s in sites for d in s.devices}
    links = tuple(
        Link(a.name, b.name, *(_speeds(intra_site) if site_of[a.name] == site_of[b.name]
                               else _speeds(inter_site)))
        for a, b in itertools.combinations(devices, 2)
    )
    default = Link("*", "*", *_speeds(inter_site))
    return Cluster("okita-sites", tuple(devices), default, links, tuple(sites))


def _speeds(link: Link) -> tuple[float, float]:
    return link.bandwidth_mbps, link.latency_ms


def link_between(runtime: RayRuntime, a: str, b: str) -> Link:
    """The link the transport emulates from ``a`` to ``b`` (``RayRuntime.transport_link``);
    a device talks to itself over a loopback (no wait)."""
    if a == b:
        return Link(a, b, 1e6, 0.0)
    return runtime.transport_link(a, b)


def site_devices(cluster: Cluster, problem: SitesProblem, plan: Plan) -> list[SiteDevices]:
    """Each scenario site's devices in ``cluster`` (matched by site name). The first device
    of a site stores its data; the others compute (a one-device site also computes on it).
    ConfigError names a missing site or one with fewer compute devices than the plan uses."""
    by_name = {s.name: s for s in cluster.sites}
    out: list[SiteDevices] = []
    for spec, need in zip(problem.sites, devices_needed(problem, plan), strict=True):
        site = by_name.get(spec.name)
        if site is None or not site.devices:
            raise ConfigError(f"the cluster has no site {spec.name!r} with devices",
                              field="sites")
        compute = site.devices[1:] or site.devices
        if len(compute) < need:
            raise ConfigError(f"site {spec.name!r} has {len(compute)} compute devices, the "
                              f"plan places {need} workers and servers there in one slot",
                              field=f"sites.{spec.name}.devices")
        out.append(SiteDevices(spec.name, site.devices[0], tuple(compute)))
    return out


@dataclass(frozen=True, slots=True)
class JobDevices:
    """The devices one job's actors run on in one slot: its parameter server's device and
    its workers' devices (one actor per device)."""

    ps: str
    workers: tuple[str, ...]


def allocate_slot(entries: Sequence[JobSlot], sites: Sequence[SiteDevices],
                  previous: Mapping[str, JobDevices]) -> dict[str, JobDevices]:
    """Devices for every job of one slot: one actor per device. A job keeps the devices it
    had in its previous slot where the plan keeps it on their site (so its actors live on);
    the rest take free devices of the site in order."""
    free = {r: list(s.compute) for r, s in enumerate(sites)}
    site_of = {d: r for r, s in enumerate(sites) for d in s.compute}
    ps: dict[str, str] = {}
    kept: dict[tuple[str, int], list[str]] = defaultdict(list)
    for e in entries:  # pass 1: keep what stays on its site
        old = previous.get(e.job, JobDevices("", ()))
        old_ps, old_workers = old.ps, old.workers
        if site_of.get(old_ps) == e.ps_site and old_ps in free[e.ps_site]:
            ps[e.job] = old_ps
            free[e.ps_site].remove(old_ps)
        for d in old_workers:
            r = site_of.get(d)
            if r is not None and len(kept[(e.job, r)]) < e.workers[r] and d in free[r]:
                kept[(e.job, r)].append(d)
                free[r].remove(d)
    out: dict[str, JobDevices] = {}
    for e in entries:  # pass 2: the rest from the free devices
        if e.job not in ps:
            ps[e.job] = free[e.ps_site].pop(0)
        workers: list[str] = []
        for r, y in enumerate(e.workers):
            have = kept[(e.job, r)]
            workers += have + [free[r].pop(0) for _ in range(y - len(have))]
        out[e.job] = JobDevices(ps[e.job], tuple(workers))
    return out
