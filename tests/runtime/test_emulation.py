"""Device emulation on one host: host speed and stretch factors (the stretched compute itself
is tested with the Throttle, tests/runtime/test_throttle.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from edgewise.cluster.model import Cluster
from edgewise.cluster.schema import cluster_from_dict
from edgewise.errors import ConfigError
from edgewise.runtime.emulation import EmulationConfig, auto_host_speed, stretch_factors


def _cluster(*speeds: float) -> Cluster:
    devices = [{"name": f"d{i}", "type": "jetson-nano", "speed": s} for i, s in enumerate(speeds)]
    return cluster_from_dict({"name": "emu", "devices": devices}, source="test")


# --- auto_host_speed -----------------------------------------------------------------------


def test_auto_host_speed_is_total_speed_over_the_share_of_cores() -> None:
    cluster = _cluster(1.0, 2.0, 0.5)  # total 3.5, fastest 2

    speed = auto_host_speed(cluster, cores=1, share=1.0)

    assert speed == pytest.approx(3.5)


def test_auto_host_speed_is_at_least_the_fastest_device() -> None:
    cluster = _cluster(1.0, 2.0, 0.5)  # 3.5 / (4 * 0.5) = 1.75 < 2

    speed = auto_host_speed(cluster, cores=4, share=0.5)

    assert speed == pytest.approx(2.0)


@given(
    speeds=st.lists(st.floats(min_value=0.1, max_value=10.0), min_size=1, max_size=6),
    cores=st.integers(min_value=1, max_value=64),
    share=st.floats(min_value=0.01, max_value=1.0),
)
def test_auto_host_speed_matches_formula(speeds: list[float], cores: int, share: float) -> None:
    cluster = _cluster(*speeds)

    speed = auto_host_speed(cluster, cores, share)

    assert speed == pytest.approx(max(max(speeds), sum(speeds) / (cores * share)))
    # All devices computing at once need sum(s_i / host) host cores: within the share.
    assert sum(s / speed for s in speeds) <= cores * share * (1 + 1e-9)


@pytest.mark.parametrize("share", [0.0, -0.5, 1.01, 2.0])
def test_host_share_outside_zero_one_is_rejected(share: float) -> None:
    cluster = _cluster(1.0, 2.0)

    with pytest.raises(ConfigError) as info:
        stretch_factors(cluster, EmulationConfig(host_share=share, host_cores=4))

    assert info.value.field == "emulation.host_share"


# --- stretch_factors -----------------------------------------------------------------------


def test_stretch_factors_are_host_speed_over_device_speed() -> None:
    cluster = _cluster(1.0, 2.0, 0.5)

    stretch = stretch_factors(cluster, EmulationConfig(host_speed=4.0))

    assert stretch == pytest.approx({"d0": 4.0, "d1": 2.0, "d2": 8.0})


@given(
    speeds=st.lists(st.floats(min_value=0.1, max_value=10.0), min_size=1, max_size=6),
    cores=st.integers(min_value=1, max_value=64),
    share=st.floats(min_value=0.01, max_value=1.0),
)
def test_auto_stretch_factors_at_least_one_and_inverse_to_speed(
    speeds: list[float], cores: int, share: float
) -> None:
    cluster = _cluster(*speeds)

    stretch = stretch_factors(cluster, EmulationConfig(host_cores=cores, host_share=share))

    assert all(f >= 1.0 - 1e-12 for f in stretch.values())
    products = [stretch[f"d{i}"] * s for i, s in enumerate(speeds)]  # = host speed for all
    assert products == pytest.approx([products[0]] * len(products))
    assert min(stretch.values()) == pytest.approx(stretch[f"d{speeds.index(max(speeds))}"])


def test_host_speed_below_a_device_speed_is_rejected() -> None:
    cluster = _cluster(1.0, 2.0, 3.0)

    with pytest.raises(ConfigError) as info:
        stretch_factors(cluster, EmulationConfig(host_speed=1.5))

    assert info.value.field == "emulation.host_speed"
    assert "d1" in str(info.value) and "d2" in str(info.value)
    assert "d0" not in str(info.value)


def test_host_speed_equal_to_fastest_device_gives_stretch_one() -> None:
    cluster = _cluster(1.0, 2.0)

    stretch = stretch_factors(cluster, EmulationConfig(host_speed=2.0))

    assert stretch == pytest.approx({"d0": 2.0, "d1": 1.0})
