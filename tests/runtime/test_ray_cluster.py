"""The pure parts of the Ray runtime: join lines and actor options (Ray is not started)."""

from __future__ import annotations

import json
import math
import shlex

import pytest

from edgewise.cluster.model import Cluster, Device
from edgewise.cluster.schema import cluster_from_dict
from edgewise.runtime import ray_cluster
from edgewise.runtime.ray_cluster import DEVICE_SLOTS, RayRuntime, head_device, ray_start_line

NANO = Device(
    name="nano-0",
    type="jetson-nano",
    cpu_cores=4,
    accelerator="gpu-maxwell",
    memory_mb=4096,
    speed=1.0,
)


def test_ray_start_line_for_a_jetson_nano() -> None:
    line = ray_start_line(NANO)

    assert line == (
        "ray start --address=HEAD_IP:6379 --num-cpus=4 --labels=edgewise.io/device=nano-0 "
        """--resources='{"device:nano-0": 1000, "device-mem:nano-0": 4096}'"""
    )


def test_ray_start_line_is_a_valid_shell_command_with_json_resources() -> None:
    line = ray_start_line(NANO, head="10.0.0.1:6379")

    argv = shlex.split(line)
    resources = json.loads(argv[-1].removeprefix("--resources="))

    assert argv[:5] == ["ray", "start", "--address=10.0.0.1:6379", "--num-cpus=4",
                        "--labels=edgewise.io/device=nano-0"]
    assert resources == {"device:nano-0": DEVICE_SLOTS, "device-mem:nano-0": 4096}


@pytest.fixture(scope="module")
def runtime() -> RayRuntime:
    cluster: Cluster = cluster_from_dict(
        {
            "name": "rt",
            "devices": [
                {"name": "nano-0", "type": "jetson-nano"},
                {"name": "pi5", "type": "raspberry-pi-5"},
            ],
        },
        source="test",
    )
    return RayRuntime(cluster, {"nano-0": 2.0, "pi5": 3.7}, emulated=True)


def test_actor_options_pin_device_and_reserve_memory(runtime: RayRuntime) -> None:
    options = runtime.actor_options("pi5", 512, name="worker-pi5")

    assert options == {
        "num_cpus": 0,
        "resources": {"device:pi5": 1, "device-mem:pi5": 512},
        "max_restarts": 0,
        "namespace": "edgewise",
        "name": "worker-pi5",
    }


def test_actor_options_without_name_have_no_name(runtime: RayRuntime) -> None:
    options = runtime.actor_options("nano-0", 64)

    assert "name" not in options
    assert options["resources"] == {"device:nano-0": 1, "device-mem:nano-0": 64}
    assert options["num_cpus"] == 0


def test_actor_options_for_unknown_device_raise_key_error(runtime: RayRuntime) -> None:
    with pytest.raises(KeyError, match="ghost"):
        runtime.actor_options("ghost", 64)


def test_transport_link_emulates_what_the_network_does_not(runtime: RayRuntime) -> None:
    link = runtime.cluster.link("nano-0", "pi5")
    testbed = RayRuntime(runtime.cluster, {}, emulated=False, time_dilation=4.0, links="latency")
    network = RayRuntime(runtime.cluster, {}, emulated=False, links="network")

    assert runtime.transport_link("nano-0", "pi5") == link  # one host: bandwidth and latency
    on_testbed = testbed.transport_link("nano-0", "pi5")  # tc shapes bandwidth, no netem
    assert on_testbed.bandwidth_mbps == math.inf
    assert on_testbed.latency_ms == pytest.approx(4.0 * link.latency_ms)
    assert network.transport_link("nano-0", "pi5").transfer_seconds(10**9) == 0.0


def test_the_head_runs_on_the_manager_else_a_server_else_the_parameter_server() -> None:
    def cluster(*devices: dict[str, object]) -> Cluster:
        return cluster_from_dict({"name": "h", "devices": list(devices)}, source="test")

    nano = {"name": "nano", "type": "jetson-nano"}
    assert head_device(cluster(nano, {"name": "m", "type": "raspberry-pi-5",
                                      "roles": ["manager"]})).name == "m"
    assert head_device(cluster(nano, {"name": "s", "type": "edge-server-rtx3060"},
                               {"name": "p", "type": "raspberry-pi-5",
                                "roles": ["parameter-server"]})).name == "s"
    assert head_device(cluster(nano, {"name": "p", "type": "raspberry-pi-5",
                                      "roles": ["parameter-server"]})).name == "p"
    assert head_device(cluster(nano)).name == "nano"


def test_connect_emulates_without_an_address_and_joins_with_one(
        runtime: RayRuntime, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(ray_cluster, "start_local", lambda c, cfg=None: calls.append("local"))
    monkeypatch.setattr(ray_cluster, "join_cluster", lambda c, a: calls.append(a))
    monkeypatch.delenv("EDGEWISE_RAY_ADDRESS", raising=False)
    ray_cluster.connect(runtime.cluster)
    ray_cluster.connect(runtime.cluster, "10.0.0.1:6379")
    monkeypatch.setenv("EDGEWISE_RAY_ADDRESS", "auto")
    ray_cluster.connect(runtime.cluster)
    ray_cluster.connect(runtime.cluster, "local")
    assert calls == ["local", "10.0.0.1:6379", "auto", "local"]
