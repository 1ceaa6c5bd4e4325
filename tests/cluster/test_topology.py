"""Topology generators: determinism, SEIFER's bandwidth statistics, link properties."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgewise.cluster import (
    Cluster,
    Role,
    catalog,
    clustered,
    grid,
    random_cluster,
    random_geometric,
    ring,
    seifer_bandwidth_mbps,
    seifer_positions,
)

A, B = 283230.0, 150.0
LOWEST = math.log2(1 + A / (2 * B**2))  # a corner of the square, d = sqrt(2) B
HIGHEST = math.log2(1 + A / 2)  # the closest point allowed, d = sqrt(2)

seeds = st.integers(min_value=0, max_value=2**32 - 1)
GENERATORS: dict[str, Callable[[int | np.random.Generator], Cluster]] = {
    "random_geometric": lambda s: random_geometric(6, s),
    "ring": lambda s: ring(6, s),
    "grid": lambda s: grid(2, 3, s),
    "clustered": lambda s: clustered(2, 3, s),
    "random_cluster": lambda s: random_cluster(6, s, app_probability=0.5),
}


def _pairs(cluster: Cluster) -> list[tuple[str, str]]:
    return list(itertools.combinations(cluster.device_names, 2))


def test_bandwidth_at_80_m_is_5_5_mbps() -> None:
    assert seifer_bandwidth_mbps(80.0) == pytest.approx(5.5, abs=0.01)


def test_bandwidth_decreases_with_distance() -> None:
    values = [seifer_bandwidth_mbps(d) for d in (1.5, 10.0, 80.0, 150.0, 212.0)]
    assert values == sorted(values, reverse=True)


def test_mean_and_sd_match_seifer_eq_18() -> None:
    xy = seifer_positions(40_000, 7)
    bandwidth = np.array([seifer_bandwidth_mbps(float(d)) for d in np.hypot(*xy.T)])
    # Standard errors with 40k samples: ~0.007 for the mean, ~0.006 for the s.d.
    assert bandwidth.mean() == pytest.approx(4.766, abs=0.04)
    assert bandwidth.std() == pytest.approx(1.398, abs=0.04)


def test_positions_avoid_the_router_square() -> None:
    xy = seifer_positions(5_000, 1)
    assert np.all(np.abs(xy) > 1.0) and np.all(np.abs(xy) < B)
    assert (xy < 0).any() and (xy > 0).any()


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_same_seed_same_cluster_different_seed_different(name: str) -> None:
    make = GENERATORS[name]
    assert make(3) == make(3)
    assert make(3) != make(4)
    assert make(3) == make(np.random.default_rng(3))


@settings(max_examples=30, deadline=None)
@given(n=st.integers(2, 12), seed=seeds)
def test_random_geometric_links(n: int, seed: int) -> None:
    cluster = random_geometric(n, seed)
    assert len(cluster.links) == n * (n - 1) // 2  # every pair explicit
    for a, b in _pairs(cluster):
        link = cluster.link(a, b)
        assert link == cluster.link(b, a)
        assert LOWEST <= link.bandwidth_mbps <= HIGHEST
    # A pair's bandwidth is the min of its devices' radio bandwidths: so, with three devices,
    # one device (the farthest) is the bottleneck of both its links.
    if n >= 3:
        slowest = min(cluster.links, key=lambda lk: lk.bandwidth_mbps)
        far = {slowest.a, slowest.b}
        assert any(
            all(
                cluster.link(d, o).bandwidth_mbps == slowest.bandwidth_mbps
                for o in cluster.device_names
                if o != d
            )
            for d in far
        )


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 10), seed=seeds, bw=st.floats(1, 1e4), lat=st.floats(0, 10))
def test_ring_multihop(n: int, seed: int, bw: float, lat: float) -> None:
    cluster = ring(n, seed, bandwidth_mbps=bw, latency_ms=lat)
    assert len(cluster.devices) == n
    for (i, a), (j, b) in itertools.combinations(enumerate(cluster.device_names), 2):
        link = cluster.link(a, b)
        assert link == cluster.link(b, a)
        assert 0 < link.bandwidth_mbps <= bw
        hops = min(j - i, n - (j - i))
        assert link.latency_ms == pytest.approx(hops * lat)


@settings(max_examples=25, deadline=None)
@given(rows=st.integers(1, 4), cols=st.integers(1, 4), seed=seeds, lat=st.floats(0.1, 10))
def test_grid_multihop(rows: int, cols: int, seed: int, lat: float) -> None:
    cluster = grid(rows, cols, seed, bandwidth_mbps=80.0, latency_ms=lat)
    names = cluster.device_names
    assert len(names) == rows * cols
    for i, j in itertools.combinations(range(rows * cols), 2):
        link = cluster.link(names[i], names[j])
        assert link == cluster.link(names[j], names[i])
        assert 0 < link.bandwidth_mbps <= 80.0
        manhattan = abs(i // cols - j // cols) + abs(i % cols - j % cols)
        assert link.latency_ms == pytest.approx(manhattan * lat)


@settings(max_examples=25, deadline=None)
@given(
    k=st.integers(1, 4),
    m=st.integers(1, 4),
    seed=seeds,
    inter=st.floats(1, 100),
    ratio=st.floats(1.01, 100),
)
def test_clustered_intra_faster_than_inter(
    k: int, m: int, seed: int, inter: float, ratio: float
) -> None:
    cluster = clustered(k, m, seed, intra_mbps=inter * ratio, inter_mbps=inter)
    assert [len(s.devices) for s in cluster.sites] == [m] * k
    site_of = {n: s.name for s in cluster.sites for n in s.devices}
    assert set(site_of) == set(cluster.device_names)
    for a, b in _pairs(cluster):
        link = cluster.link(a, b)
        assert link == cluster.link(b, a)
        expected = inter * ratio if site_of[a] == site_of[b] else inter
        assert link.bandwidth_mbps == expected
    if k >= 2 and m >= 2:
        intra = cluster.link(*cluster.sites[0].devices[:2]).bandwidth_mbps
        cross = cluster.link(cluster.sites[0].devices[0], cluster.sites[1].devices[0])
        assert intra > cross.bandwidth_mbps


@settings(max_examples=30, deadline=None)
@given(n=st.integers(3, 15), seed=seeds, p=st.floats(0, 1))
def test_random_cluster_roles_links_apps(n: int, seed: int, p: float) -> None:
    cluster = random_cluster(n, seed, app_probability=p)
    assert len(cluster.with_role(Role.PARAMETER_SERVER)) == 1
    assert len(cluster.with_role(Role.DATA_STORE)) == 1
    assert len(cluster.with_role(Role.WORKER)) == n - 2
    assert all(d.type in catalog() for d in cluster.devices)
    for a, b in _pairs(cluster):
        link = cluster.link(a, b)
        assert link == cluster.link(b, a)
        assert 10.0 <= link.bandwidth_mbps <= 1000.0
        assert 0.2 <= link.latency_ms <= 5.0
    workers = {d.name for d in cluster.with_role(Role.WORKER)}
    assert all(app.device in workers for app in cluster.background_apps)
    assert all(app.deadline_ms == app.period_ms > 0 for app in cluster.background_apps)


def test_device_types_restrict_the_draw_and_use_catalog_figures() -> None:
    cluster = random_cluster(12, 0, device_types=["jetson-nano", "jetson-tx2"])
    assert {d.type for d in cluster.devices} == {"jetson-nano", "jetson-tx2"}
    tx2 = next(d for d in cluster.devices if d.type == "jetson-tx2")
    assert (tx2.speed, tx2.memory_mb, tx2.cpu_cores) == (1.423, 8192, 6)


def test_app_probability_extremes() -> None:
    assert random_cluster(8, 1, app_probability=0.0).background_apps == ()
    assert len(random_cluster(8, 1, app_probability=1.0).background_apps) == 6


def test_names_are_deterministic_and_sorted() -> None:
    names = ring(12, 0).device_names
    assert names[:2] == ("d00", "d01") and list(names) == sorted(names)
    assert clustered(2, 2, 0).device_names == ("s0d00", "s0d01", "s1d00", "s1d01")


@pytest.mark.parametrize(
    "call",
    [
        lambda: random_geometric(0, 0),
        lambda: ring(3, 0, bandwidth_mbps=0),
        lambda: grid(0, 3, 0),
        lambda: clustered(2, 2, 0, inter_mbps=-1),
        lambda: random_cluster(2, 0),
        lambda: random_geometric(3, 0, range_m=0.5),
        lambda: ring(3, 0, device_types=[]),
    ],
)
def test_bad_arguments_raise(call: Callable[[], Cluster]) -> None:
    with pytest.raises(ValueError):
        call()


def test_unknown_device_type_raises_key_error() -> None:
    with pytest.raises(KeyError, match="known types"):
        ring(3, 0, device_types=["cray-1"])
