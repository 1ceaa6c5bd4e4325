"""The world model: devices, links, sites, background apps, the device catalog, cluster files.

The schema's and the topologies' names load on first use (PEP 562), so that a member
process, which needs only :mod:`edgewise.cluster.model`, does not import networkx (nor
jsonschema, where Ray has not). With Pillow deferred too (``nn.workload.images``), the
member modules' own imports on top of Ray and PyTorch fell from 0.35-0.40 to 0.06-0.07
CPU-seconds a process (``import edgewise.runtime.worker, .ps, .stages`` after ``import
ray, torch``, three runs each, 2026-12-01)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Eager: light, and ``catalog`` is both a module and a function of it (the function must win).
from edgewise.cluster.catalog import DeviceType, catalog, device_type
from edgewise.cluster.model import BackgroundApp, Cluster, Device, Link, Role, Site

if TYPE_CHECKING:
    from edgewise.cluster.schema import cluster_from_dict, load_cluster
    from edgewise.cluster.topology import (
        clustered,
        grid,
        random_cluster,
        random_geometric,
        ring,
        seifer_bandwidth_mbps,
        seifer_positions,
    )

_LAZY = {"cluster_from_dict": "schema", "load_cluster": "schema",
         **dict.fromkeys(("clustered", "grid", "random_cluster", "random_geometric", "ring",
                          "seifer_bandwidth_mbps", "seifer_positions"), "topology")}
"""The names loaded on first use, with their module under ``edgewise.cluster``."""

__all__ = [
    "BackgroundApp",
    "Cluster",
    "Device",
    "DeviceType",
    "Link",
    "Role",
    "Site",
    "catalog",
    "cluster_from_dict",
    "clustered",
    "device_type",
    "grid",
    "load_cluster",
    "random_cluster",
    "random_geometric",
    "ring",
    "seifer_bandwidth_mbps",
    "seifer_positions",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
