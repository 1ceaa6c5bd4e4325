"""A testbed's state as the kernel and Ray see it: per node its processes, Ray state,
quota, memory, whether it is frozen, and per link its rate and whether it is cut."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from edgewise.runtime.ray_cluster import device_resource
from edgewise.testbed import net
from edgewise.testbed.cgroups import Cgroups
from edgewise.testbed.plan import NodePlan
from edgewise.testbed.record import Record

__all__ = ["cut_peers", "default_name", "ray_states", "status"]

_PREF = re.compile(r"\bpref (\d+)\b")


def default_name(cluster_name: str) -> str:
    """A testbed name made from a cluster's name (lower case, dashes, at most 20)."""
    name = re.sub(r"[^a-z0-9-]+", "-", cluster_name.lower()).strip("-")[:20].strip("-")
    return name or "testbed"


def cut_peers(node: NodePlan) -> set[str]:
    """Peers ``node`` drops everything to (a cut link; its drop filters' prefs)."""
    out = net.run(["tc", "-n", node.netns, "filter", "show", "dev", net.DEV], check=False)
    prefs = {int(m.group(1)) for m in _PREF.finditer(out)}
    return {p.device for j, p in enumerate(node.peers) if 1 + j in prefs}


def _port_up(record: Record, node: NodePlan) -> bool:
    out = net.run(["ip", "-n", record.plan.bridge_netns, "-o", "link", "show", node.port],
                  check=False)
    return "state UP" in out or ",UP" in out.split(">")[0]


def _raylet(pids: set[int]) -> bool:
    for pid in pids:
        try:
            if b"raylet/raylet" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return True
        except OSError:
            continue
    return False


def ray_states(record: Record) -> dict[str, str]:
    """Per device ``ALIVE`` (a live Ray node carries it), ``DEAD`` (Ray knows only dead
    nodes at its address) or ``MISSING``, as the head reports (this process must be
    joined)."""
    import ray

    nodes = ray.nodes()  # type: ignore[no-untyped-call]
    alive = {d for n in nodes if n.get("Alive") for d in record.cluster.device_names
             if device_resource(d) in n.get("Resources", {})}
    seen = {n.get("NodeManagerAddress") for n in nodes}
    return {n.device: "ALIVE" if n.device in alive else "DEAD" if n.address in seen
            else "MISSING" for n in record.plan.nodes}


def _node(record: Record, node: NodePlan, cgroups: Cgroups, ray: str) -> dict[str, Any]:
    exists = bool(cgroups.existing(node.cgroup))
    pids = cgroups.pids(node.cgroup) if exists else set()
    cut = cut_peers(node) if exists else set()
    return {
        "device": node.device, "address": node.address, "netns": node.netns,
        "head": node.head, "ray": ray, "processes": len(pids), "raylet": _raylet(pids),
        "frozen": cgroups.frozen(node.cgroup) if exists else False,
        "quota_cores": round(node.quota_cores, 4), "num_cpus": node.num_cpus,
        "memory_mb": node.memory_mb, "object_store_mb": node.object_store_mb,
        "memory_used_mb": round(cgroups.memory_used_mb(node.cgroup), 1) if exists else 0.0,
        "cpu_seconds": cgroups.cpu_seconds(node.cgroup) if exists else None,
        "port_up": _port_up(record, node),
        "port_rate_mbit": (None if node.port_rate_mbit is None
                           else round(node.port_rate_mbit, 3)),
        "links": [{"peer": p.device, "bandwidth_mbps": p.bandwidth_mbps,
                   "rate_mbit": round(p.rate_mbit, 3), "latency_ms": p.latency_ms,
                   "cut": p.device in cut} for p in node.peers],
    }


def status(record: Record, cgroups: Cgroups,
           states: dict[str, str] | None = None) -> dict[str, Any]:
    """The testbed's status; ``states`` (from :func:`ray_states`) else Ray is not asked."""
    plan = record.plan
    nodes = [_node(record, n, cgroups, (states or {}).get(n.device, "not asked"))
             for n in plan.nodes]
    return {
        "name": record.name, "state": record.state, "cluster": plan.cluster_name,
        "cluster_file": record.cluster_file, "subnet": plan.subnet,
        "head": {"device": plan.head.device, "address": plan.head_address},
        "time_dilation": round(plan.time_dilation, 4), "latency_in": record.latency_in,
        "host": {"cores": plan.host.cores, "memory_mb": plan.host.memory_mb,
                 "speed": plan.host.speed, "cpu_budget_cores": plan.host.cpu_budget_cores},
        "cgroup_version": record.cgroup_version, "up_seconds": record.up_seconds,
        "created_at": record.created_at, "nodes": nodes,
    }
