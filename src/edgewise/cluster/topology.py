"""Seeded cluster generators: SEIFER's wireless edge, ring, grid, multi-site and random."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import networkx as nx
import numpy as np
import numpy.typing as npt

from edgewise.cluster.catalog import catalog, device_type
from edgewise.cluster.model import BackgroundApp, Cluster, Device, Link, Role, Site

__all__ = [
    "SEIFER_A",
    "SEIFER_RANGE_M",
    "clustered",
    "grid",
    "random_cluster",
    "random_geometric",
    "ring",
    "seifer_bandwidth_mbps",
    "seifer_positions",
]

Seed = int | np.random.Generator

SEIFER_A = 283230.0
"""SEIFER eq. 12's constant: chosen so that a device 80 m from the router gets 5.5 Mbps."""
SEIFER_RANGE_M = 150.0
"""SEIFER §5.3.1's WiFi range B in metres."""

_APP_PERIODS_MS = (100.0, 200.0, 250.0, 500.0)


def _device(name: str, type_name: str, roles: tuple[Role, ...] = (Role.WORKER,)) -> Device:
    """A device with the catalog's datasheet figures for ``type_name``."""
    t = device_type(type_name)
    return Device(
        name=name,
        type=t.name,
        cpu_cores=t.cpu_cores,
        accelerator=t.accelerator,
        memory_mb=t.memory_mb,
        speed=t.speed,
        roles=roles,
        peak_gflops=t.peak_gflops,
    )


def _names(n: int, prefix: str = "d") -> list[str]:
    """Zero-padded names ``d00, d01, ...`` (at least two digits) that sort in index order."""
    width = max(2, len(str(n - 1)))
    return [f"{prefix}{i:0{width}d}" for i in range(n)]


def _draw_types(n: int, rng: np.random.Generator, device_types: Sequence[str] | None) -> list[str]:
    """``n`` device types drawn uniformly from ``device_types`` (default: the whole catalog)."""
    pool = sorted(catalog()) if device_types is None else list(device_types)
    if not pool:
        raise ValueError("device_types must name at least one type")
    for name in pool:
        device_type(name)  # KeyError listing the known types if unknown
    return [pool[int(i)] for i in rng.integers(0, len(pool), size=n)]


def _check_positive(**values: float) -> None:
    for name, value in values.items():
        if not value > 0:
            raise ValueError(f"{name} must be positive, got {value}")


def seifer_bandwidth_mbps(distance_m: float, a: float = SEIFER_A) -> float:
    """Bandwidth of a device ``distance_m`` from the router, SEIFER eq. 12.

    ``D(d) = log2(1 + a / d**2)``: Shannon capacity with a signal decaying as ``1/d**2``.

    Parameters
    ----------
    distance_m : float
        Distance to the WiFi router in metres (SEIFER assumes ``d > 1``).
    a : float
        Signal-to-noise constant; the paper's 283230 gives 5.5 Mbps at 80 m.

    Returns
    -------
    float
        Bandwidth in Mbit/s.

    Examples
    --------
    >>> round(seifer_bandwidth_mbps(80.0), 2)
    5.5
    """
    _check_positive(distance_m=distance_m)
    return math.log2(1.0 + a / distance_m**2)


def seifer_positions(
    n_devices: int, seed: Seed, *, range_m: float = SEIFER_RANGE_M
) -> npt.NDArray[np.float64]:
    """Device positions around a router at the origin, SEIFER eq. 13–14.

    Each coordinate is uniform on ``(-B, -1) ∪ (1, B)``: uniform magnitude in ``(1, B)`` and
    a fair random sign, so no device is within 1 m of the router on either axis.

    Returns
    -------
    numpy.ndarray
        Shape ``(n_devices, 2)``, metres.
    """
    if range_m <= 1.0:
        raise ValueError(f"range_m must exceed 1 m, got {range_m}")
    rng = np.random.default_rng(seed)
    magnitude = rng.uniform(1.0, range_m, size=(n_devices, 2))
    sign = rng.choice(np.array([-1.0, 1.0]), size=(n_devices, 2))
    return np.asarray(magnitude * sign, dtype=np.float64)


def random_geometric(
    n_devices: int,
    seed: Seed,
    *,
    range_m: float = SEIFER_RANGE_M,
    a: float = SEIFER_A,
    latency_ms: float = 2.0,
    device_types: Sequence[str] | None = None,
) -> Cluster:
    """SEIFER's wireless edge cluster (§5.3.1): devices scattered around one WiFi router.

    Device ``i`` at distance ``d_i`` from the router gets ``log2(1 + a / d_i**2)`` Mbps
    (eq. 12–13). Devices talk through the router, so the pair ``(i, j)`` gets
    ``min(D(d_i), D(d_j))``: the slower radio hop bounds the relay. Every pair has an
    explicit link; ``default_link`` is the slowest of them. Types are drawn uniformly from
    ``device_types`` (default: the whole catalog). O(n²) links.

    Examples
    --------
    >>> random_geometric(4, seed=0) == random_geometric(4, seed=0)
    True
    """
    _check_positive(n_devices=n_devices, a=a)
    rng = np.random.default_rng(seed)
    xy = seifer_positions(n_devices, rng, range_m=range_m)
    radio = [seifer_bandwidth_mbps(float(math.hypot(x, y)), a) for x, y in xy]
    names = _names(n_devices)
    types = _draw_types(n_devices, rng, device_types)
    devices = tuple(_device(n, t) for n, t in zip(names, types, strict=True))
    links = tuple(
        Link(names[i], names[j], min(radio[i], radio[j]), latency_ms)
        for i, j in itertools.combinations(range(n_devices), 2)
    )
    default = Link("*", "*", min(radio), latency_ms)
    return Cluster("random-geometric", devices, default, links)


def _multihop_cluster(
    name: str, graph: nx.Graph, names: dict[object, str], devices: tuple[Device, ...]
) -> Cluster:
    """A cluster whose every pair uses the lowest-latency path of ``graph``.

    A multi-hop pair's bandwidth is the minimum over its path's hops (the bottleneck) and
    its latency the sum of the hops' latencies (store-and-forward without queueing).
    """
    links: list[Link] = []
    paths = dict(nx.all_pairs_dijkstra_path(graph, weight="latency_ms"))
    order = list(graph.nodes)
    for u, v in itertools.combinations(order, 2):
        hops = list(itertools.pairwise(paths[u][v]))
        bandwidth = min(float(graph.edges[h]["bandwidth_mbps"]) for h in hops)
        latency = sum(float(graph.edges[h]["latency_ms"]) for h in hops)
        links.append(Link(names[u], names[v], bandwidth, latency))
    # The default only matters for a single device; make it the slowest pair, if any.
    slowest = min(links, key=lambda lk: (lk.bandwidth_mbps, -lk.latency_ms), default=None)
    default = Link("*", "*", 1000.0, 0.5)
    if slowest is not None:
        default = Link("*", "*", slowest.bandwidth_mbps, slowest.latency_ms)
    return Cluster(name, devices, default, tuple(links))


def ring(
    n_devices: int,
    seed: Seed,
    *,
    bandwidth_mbps: float = 100.0,
    latency_ms: float = 1.0,
    device_types: Sequence[str] | None = None,
) -> Cluster:
    """Devices on a ring; each neighbour pair gets ``bandwidth_mbps`` and ``latency_ms``.

    A non-neighbour pair is routed along the shorter arc: bandwidth is the minimum over its
    hops, latency the sum (``k`` hops apart → ``k * latency_ms``). Types are drawn uniformly
    from ``device_types`` (default: the whole catalog). O(n² log n).
    """
    _check_positive(n_devices=n_devices, bandwidth_mbps=bandwidth_mbps)
    rng = np.random.default_rng(seed)
    graph = nx.cycle_graph(n_devices)
    nx.set_edge_attributes(graph, bandwidth_mbps, "bandwidth_mbps")
    nx.set_edge_attributes(graph, latency_ms, "latency_ms")
    names = _names(n_devices)
    types = _draw_types(n_devices, rng, device_types)
    devices = tuple(_device(n, t) for n, t in zip(names, types, strict=True))
    return _multihop_cluster("ring", graph, dict(enumerate(names)), devices)


def grid(
    rows: int,
    cols: int,
    seed: Seed,
    *,
    bandwidth_mbps: float = 100.0,
    latency_ms: float = 1.0,
    device_types: Sequence[str] | None = None,
) -> Cluster:
    """Devices on a ``rows × cols`` mesh; horizontal and vertical neighbours are linked.

    Devices are named ``d00, d01, ...`` in row-major order. A non-neighbour pair is routed
    along a shortest (Manhattan) path: bandwidth is the minimum over its hops, latency the
    sum. Types are drawn uniformly from ``device_types`` (default: the whole catalog).
    """
    _check_positive(rows=rows, cols=cols, bandwidth_mbps=bandwidth_mbps)
    rng = np.random.default_rng(seed)
    graph = nx.grid_2d_graph(rows, cols)
    nx.set_edge_attributes(graph, bandwidth_mbps, "bandwidth_mbps")
    nx.set_edge_attributes(graph, latency_ms, "latency_ms")
    names = _names(rows * cols)
    node_names: dict[object, str] = {(r, c): names[r * cols + c] for r, c in graph.nodes}
    types = _draw_types(rows * cols, rng, device_types)
    devices = tuple(_device(n, t) for n, t in zip(names, types, strict=True))
    return _multihop_cluster("grid", graph, node_names, devices)


def clustered(
    n_clusters: int,
    devices_per_cluster: int,
    seed: Seed,
    *,
    intra_mbps: float = 1000.0,
    inter_mbps: float = 100.0,
    intra_latency_ms: float = 0.5,
    inter_latency_ms: float = 10.0,
    device_types: Sequence[str] | None = None,
) -> Cluster:
    """Devices grouped into sites: fast links inside a site, slow links between sites.

    Site ``k`` is named ``site{k}`` and holds devices ``s{k}d00, s{k}d01, ...``. A pair in
    the same site gets ``intra_mbps``/``intra_latency_ms``, any other pair
    ``inter_mbps``/``inter_latency_ms`` (the sites' uplinks, as in Okita's geo-distributed
    setting). All links are explicit; ``default_link`` is the inter-site link.
    """
    _check_positive(
        n_clusters=n_clusters,
        devices_per_cluster=devices_per_cluster,
        intra_mbps=intra_mbps,
        inter_mbps=inter_mbps,
    )
    rng = np.random.default_rng(seed)
    sites = tuple(
        Site(f"site{k}", tuple(_names(devices_per_cluster, prefix=f"s{k}d")))
        for k in range(n_clusters)
    )
    names = [n for s in sites for n in s.devices]
    site_of = {n: s.name for s in sites for n in s.devices}
    types = _draw_types(len(names), rng, device_types)
    devices = tuple(_device(n, t) for n, t in zip(names, types, strict=True))
    links = tuple(
        Link(u, v, intra_mbps, intra_latency_ms)
        if site_of[u] == site_of[v]
        else Link(u, v, inter_mbps, inter_latency_ms)
        for u, v in itertools.combinations(names, 2)
    )
    default = Link("*", "*", inter_mbps, inter_latency_ms)
    return Cluster("clustered", devices, default, links, sites)


def _background_apps(
    devices: tuple[Device, ...], rng: np.random.Generator, probability: float
) -> tuple[BackgroundApp, ...]:
    """A SIFT-like app on each worker with ``probability``; deadline = period."""
    apps: list[BackgroundApp] = []
    for d in devices:
        if d.has_role(Role.WORKER) and rng.random() < probability:
            period = float(rng.choice(_APP_PERIODS_MS))
            apps.append(BackgroundApp(f"sift-{d.name}", d.name, "sift", period, period))
    return tuple(apps)


def random_cluster(
    n_devices: int,
    seed: Seed,
    *,
    device_types: Sequence[str] | None = None,
    bandwidth_range_mbps: tuple[float, float] = (10.0, 1000.0),
    latency_range_ms: tuple[float, float] = (0.2, 5.0),
    app_probability: float = 0.0,
) -> Cluster:
    """A random heterogeneous model-update cluster with roles (Deep-Edge §IV-A).

    Types are drawn uniformly from ``device_types`` (default: the whole catalog). One device
    is the parameter server, another the data store and manager, the rest are workers. Each
    pair's bandwidth is log-uniform in ``bandwidth_range_mbps`` and its latency uniform in
    ``latency_range_ms``. Each worker runs a SIFT-like background app with probability
    ``app_probability``, its period drawn from {100, 200, 250, 500} ms and deadline = period.
    """
    if n_devices < 3:
        raise ValueError(f"a random cluster needs at least 3 devices, got {n_devices}")
    low, high = bandwidth_range_mbps
    _check_positive(bandwidth_low=low, bandwidth_high=high)
    rng = np.random.default_rng(seed)
    names = _names(n_devices)
    types = _draw_types(n_devices, rng, device_types)
    ps, store = (int(i) for i in rng.choice(n_devices, size=2, replace=False))
    roles = {ps: (Role.PARAMETER_SERVER,), store: (Role.DATA_STORE, Role.MANAGER)}
    devices = tuple(
        _device(n, t, roles.get(i, (Role.WORKER,)))
        for i, (n, t) in enumerate(zip(names, types, strict=True))
    )
    pairs = list(itertools.combinations(names, 2))
    bandwidths = np.exp(rng.uniform(math.log(low), math.log(high), size=len(pairs)))
    latencies = rng.uniform(*latency_range_ms, size=len(pairs))
    links = tuple(
        Link(u, v, float(bw), float(lat))
        for (u, v), bw, lat in zip(pairs, bandwidths, latencies, strict=True)
    )
    apps = _background_apps(devices, rng, app_probability)
    default = Link("*", "*", low, float(latency_range_ms[1]))
    return Cluster("random", devices, default, links, (), apps)
