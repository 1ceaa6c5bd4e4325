"""The testbed's plan (pure): time dilation, quotas, rates, addresses, names; the record."""

from __future__ import annotations

import ipaddress
import math
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgewise.cluster.catalog import catalog
from edgewise.cluster.model import Cluster
from edgewise.cluster.schema import cluster_from_dict
from edgewise.errors import ConfigError, InfeasibleError
from edgewise.testbed.plan import HostFacts, cfs_period_us, plan_testbed
from edgewise.testbed.record import Record, read_record, write_record, write_token
from edgewise.testbed.status import default_name

TYPES = sorted(catalog())


def _cluster(types: list[str], bandwidths: list[float], manager: int | None) -> Cluster:
    devices: list[dict[str, Any]] = [{"name": f"d{i}", "type": t} for i, t in enumerate(types)]
    if manager is not None:
        devices[manager % len(devices)]["roles"] = ["manager"]
    links = [{"between": [f"d{i}", f"d{i + 1}"], "bandwidth_mbps": bw}
             for i, bw in enumerate(bandwidths[: len(types) - 1])]
    return cluster_from_dict({"name": "h", "devices": devices, "links": links,
                              "default_link": {"bandwidth_mbps": 1000}}, source="test")


@settings(max_examples=60, deadline=None)
@given(types=st.lists(st.sampled_from(TYPES), min_size=1, max_size=8),
       bandwidths=st.lists(st.floats(1, 10_000), max_size=7),
       manager=st.none() | st.integers(0, 7),
       cores=st.integers(1, 16), speed=st.floats(0.05, 5), share=st.floats(0.05, 1.0))
def test_quotas_fit_the_budget_keep_proportions_and_links_share_the_dilation(
        types: list[str], bandwidths: list[float], manager: int | None, cores: int,
        speed: float, share: float) -> None:
    cluster = _cluster(types, bandwidths, manager)
    host = HostFacts(cores, 64_000, speed, cores * share)
    try:
        plan = plan_testbed(cluster, "prop", host)
    except InfeasibleError as exc:  # only when a quota would fall below the kernel's least
        assert "kernel's smallest quota" in str(exc)
        return
    d = plan.time_dilation
    total = sum(n.quota_cores for n in plan.nodes)
    assert d >= 1 and total <= host.cpu_budget_cores * (1 + 1e-9)
    if d > 1:  # the smallest dilation: the budget is used in full
        assert math.isclose(total, host.cpu_budget_cores, rel_tol=1e-9)
    for node, device in zip(plan.nodes, cluster.devices, strict=True):
        # a device second takes D testbed seconds: quota x host speed x D = device speed
        assert math.isclose(node.quota_cores * host.speed * d, device.speed, rel_tol=1e-9)
        # a period holds at least 2 ms of quota (twice the kernel's least), or is 1 s
        assert 10_000 <= node.cfs_period_us <= 1_000_000
        assert node.quota_cores * node.cfs_period_us >= 1_999 or node.cfs_period_us == 10**6
        for peer in node.peers:
            link = cluster.link(node.device, peer.device)
            assert math.isclose(peer.rate_mbit * d, link.bandwidth_mbps, rel_tol=1e-9)
    heads = [n.device for n in plan.nodes if n.head]
    managers = [dv.name for dv in cluster.devices if "manager" in dv.roles]
    assert len(heads) == 1 and (not managers or heads == managers[:1])


@pytest.mark.parametrize(("cores", "period_us"), [
    (0.41, 10_000), (0.29, 10_000), (0.2, 10_000), (0.1, 20_000), (0.02, 100_000),
    (0.001, 1_000_000), (1.5, 10_000)])
def test_periods_are_10_ms_or_long_enough_for_2_ms_of_quota(cores: float,
                                                            period_us: int) -> None:
    assert cfs_period_us(cores) == period_us


def test_two_nanos_on_a_half_nano_core_run_four_times_slower() -> None:
    # Worked by hand: two Nanos (speed 1 each) need 2 Nano-units; one host core at 0.5
    # Nano gives 0.5 units, so D = 2 / 0.5 = 4, each Nano gets 1 / (0.5 x 4) = 0.5 cores
    # and their 1000 Mbit/s link carries 250 Mbit/s.
    cluster = _cluster(["jetson-nano", "jetson-nano"], [], None)
    plan = plan_testbed(cluster, "worked", HostFacts(2, 8000, 0.5, 1.0))
    assert plan.time_dilation == pytest.approx(4.0)
    assert [n.quota_cores for n in plan.nodes] == pytest.approx([0.5, 0.5])
    assert plan.nodes[0].peers[0].rate_mbit == pytest.approx(250.0)


def test_a_port_carries_its_rate_over_the_dilation_and_survives_the_record(
        tmp_path: Path) -> None:
    # the worked case above (D = 4) with a 400 Mbit/s port on d0: tc shapes it at 100
    document = {"name": "h", "default_link": {"bandwidth_mbps": 1000},
                "devices": [{"name": "d0", "type": "jetson-nano", "port_mbps": 400},
                            {"name": "d1", "type": "jetson-nano"}]}
    plan = plan_testbed(cluster_from_dict(document), "port", HostFacts(2, 8000, 0.5, 1.0))
    assert [n.port_rate_mbit for n in plan.nodes] == [pytest.approx(100.0), None]
    assert plan.nodes[0].peers[0].rate_mbit == pytest.approx(250.0)  # the pair as before
    record = Record(plan, document, "c.yaml", "up", 1, 0.0, str(write_token("port", tmp_path)),
                    1, "transport", 3.5)
    write_record(record, tmp_path)
    assert read_record("port", tmp_path) == record


def test_addresses_are_private_distinct_and_inside_the_chosen_subnet() -> None:
    cluster = _cluster(["jetson-nano"] * 5, [], 2)
    plan = plan_testbed(cluster, "addr", HostFacts(2, 8000, 1.0, 1.5), subnet="192.168.77.0/29")
    net = ipaddress.ip_network("192.168.77.0/29")
    addresses = [ipaddress.ip_address(n.address) for n in plan.nodes]
    assert len(set(addresses)) == 5 and all(a in net for a in addresses)
    assert net.network_address not in addresses and net.broadcast_address not in addresses
    assert plan.head.device == "d2" and plan.head_address == f"{plan.head.address}:6379"


@pytest.mark.parametrize(("subnet", "words"), [
    ("8.8.8.0/24", "private"), ("10.77.0.0/30", "room for 2"), ("nonsense", "CIDR"),
    ("10.77.0.1/24", "CIDR")])
def test_a_bad_subnet_is_refused_naming_the_field(subnet: str, words: str) -> None:
    cluster = _cluster(["jetson-nano"] * 3, [], None)
    with pytest.raises(ConfigError, match=words) as info:
        plan_testbed(cluster, "net", HostFacts(2, 8000, 1.0, 1.5), subnet=subnet)
    assert info.value.field == "subnet"


@pytest.mark.parametrize("name", ["Upper", "a" * 21, "-lead", "dot.ted", ""])
def test_a_bad_name_is_refused(name: str) -> None:
    with pytest.raises(ConfigError, match="testbed name"):
        plan_testbed(_cluster(["jetson-nano"], [], None), name, HostFacts(2, 8000, 1.0, 1.5))


def test_a_device_larger_than_the_host_is_refused() -> None:
    cluster = _cluster(["edge-server-rtx3060"], [], None)  # 32 GB
    with pytest.raises(InfeasibleError, match="32768 MB"):
        plan_testbed(cluster, "big", HostFacts(2, 16_000, 1.0, 1.5))


def test_default_names_are_valid_testbed_names() -> None:
    assert default_name("Deep-Edge Testbed (v2)") == "deep-edge-testbed-v2"
    assert default_name("___") == "testbed"
    assert len(default_name("x" * 40)) == 20


def test_the_record_round_trips_and_the_token_is_private(tmp_path: Path) -> None:
    cluster = _cluster(["jetson-nano", "jetson-tx2"], [50], 1)
    plan = plan_testbed(cluster, "rec", HostFacts(2, 16_000, 0.6, 1.5))
    token = write_token("rec", tmp_path)
    document = {"name": "h", "devices": [{"name": "d0", "type": "jetson-nano"},
                                         {"name": "d1", "type": "jetson-tx2",
                                          "roles": ["manager"]}],
                "links": [{"between": ["d0", "d1"], "bandwidth_mbps": 50}],
                "default_link": {"bandwidth_mbps": 1000}}
    record = Record(plan, document, "c.yaml", "up", 1, 0.0, str(token), 1, "transport", 3.5)
    write_record(record, tmp_path)
    assert read_record("rec", tmp_path) == record
    assert read_record("rec", tmp_path).cluster == cluster  # type: ignore[union-attr]
    assert os.stat(token).st_mode & 0o777 == 0o600 and len(token.read_text()) == 64
    assert read_record("other", tmp_path) is None


def test_every_node_is_labelled_with_its_device_and_the_testbed() -> None:
    """The device label is what places Ray Train's DDP ranks on named devices."""
    from edgewise.runtime.ray_cluster import LABEL_DEVICE
    from edgewise.testbed.nodes import LABEL_TESTBED, node_argv

    cluster = _cluster(["jetson-nano", "jetson-tx2", "raspberry-pi-4-4gb"], [50, 50], 2)
    plan = plan_testbed(cluster, "labels", HostFacts(2, 16_000, 1.0, 1.5))
    for node in plan.nodes:
        argv = node_argv(plan, node, "ray", "transport")
        flag = next(a for a in argv if a.startswith("--labels="))
        labels = dict(kv.split("=", 1) for kv in flag.removeprefix("--labels=").split(","))
        assert labels[LABEL_DEVICE] == node.device
        assert labels[LABEL_TESTBED] == "labels"


def test_testbed_processes_pass_a_servers_frames_inline(tmp_path: Path) -> None:
    """Every node, and every driver of the testbed, has Ray's inline-object size raised (the
    object store's path cost a small device's quota most of a parameter server's time)."""
    from edgewise.runtime.ray_cluster import INLINE_OBJECT_BYTES
    from edgewise.testbed.nodes import node_env

    env = node_env(tmp_path / "token")
    assert env["RAY_max_direct_call_object_size"] == str(INLINE_OBJECT_BYTES)
    assert INLINE_OBJECT_BYTES >= 2 * 401_252 * 4  # MobileNetV2 x0.35's push, with room
