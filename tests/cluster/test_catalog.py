"""The device catalog: required types present, datasheet figures sane, TX2:Nano from Deep-Edge."""

from __future__ import annotations

import pytest

from edgewise.cluster import catalog, device_type
from edgewise.cluster.catalog import speed_from_gflops

REQUIRED = [
    "jetson-tx2",
    "jetson-nano",
    "jetson-xavier-nx",
    "jetson-orin-nano",
    "raspberry-pi-4-4gb",
    "raspberry-pi-4-8gb",
    "raspberry-pi-5",
    "edge-server-rtx3060",
]


def test_required_types_present() -> None:
    assert set(REQUIRED) <= set(catalog())


@pytest.mark.parametrize("name", REQUIRED)
def test_figures_positive(name: str) -> None:
    t = device_type(name)
    assert t.name == name
    assert t.cpu_cores > 0 and t.memory_mb > 0 and t.peak_gflops > 0 and t.speed > 0
    assert t.source


def test_tx2_nano_ratio_from_deep_edge() -> None:
    ratio = device_type("jetson-tx2").speed / device_type("jetson-nano").speed
    assert ratio == pytest.approx(2.69 / 1.89, abs=1e-3)


def test_power_law_passes_through_tx2_and_nano() -> None:
    assert speed_from_gflops(472.0) == pytest.approx(1.0)
    assert speed_from_gflops(1330.0) == pytest.approx(2.69 / 1.89, rel=0.01)


def test_unmeasured_speeds_follow_the_power_law_and_order() -> None:
    for name in ("jetson-orin-nano", "raspberry-pi-5", "edge-server-rtx3060"):
        t = device_type(name)
        assert t.speed == pytest.approx(speed_from_gflops(t.peak_gflops), abs=1e-3)
    order = ["raspberry-pi-4-4gb", "raspberry-pi-5", "jetson-nano", "jetson-orin-nano"]
    speeds = [device_type(n).speed for n in order]
    assert speeds == sorted(speeds)


def test_unknown_type_lists_known() -> None:
    with pytest.raises(KeyError, match="jetson-nano"):
        device_type("cray-1")
