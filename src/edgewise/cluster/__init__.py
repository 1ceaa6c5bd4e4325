"""The world model: devices, links, sites, background apps, the device catalog, cluster files."""

from edgewise.cluster.catalog import DeviceType, catalog, device_type
from edgewise.cluster.model import BackgroundApp, Cluster, Device, Link, Role, Site
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
