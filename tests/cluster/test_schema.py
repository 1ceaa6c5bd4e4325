"""The cluster file schema: examples load, user errors name the file, field and problem."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from edgewise.cluster import Link, Role, cluster_from_dict, load_cluster
from edgewise.errors import ConfigError

EXAMPLES = sorted((Path(__file__).parents[2] / "examples").glob("*.yaml"))


def _doc(**extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "name": "t",
        "devices": [
            {"name": "a", "type": "jetson-nano"},
            {"name": "b", "type": "raspberry-pi-5", "roles": ["parameter-server"]},
        ],
    }
    base.update(extra)
    return base


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    return path


def test_examples_exist() -> None:
    assert len(EXAMPLES) >= 3


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_loads(path: Path) -> None:
    cluster = load_cluster(path)
    assert cluster.devices
    assert len(set(cluster.device_names)) == len(cluster.devices)


def test_deep_edge_testbed_fields() -> None:
    cluster = load_cluster(Path(__file__).parents[2] / "examples" / "deep-edge-testbed.yaml")
    assert [d.name for d in cluster.with_role(Role.PARAMETER_SERVER)] == ["pi-ps"]
    assert cluster.device("tx2-0").speed == pytest.approx(1.423)
    app = cluster.apps_on("nano-0")[0]
    assert app.deadline_ms == app.period_ms == 200  # deadline defaults to the period
    # the paper's layer-2 switch: one 1 GbE port a board, which all its links share
    assert {d.port_mbps for d in cluster.devices} == {1000.0}


def test_a_port_is_optional_and_must_be_positive(tmp_path: Path) -> None:
    path = _write(tmp_path, "name: t\ndevices:\n  - {name: a, type: jetson-nano}\n"
                            "  - {name: b, type: jetson-nano, port_mbps: 100}\n")
    assert [d.port_mbps for d in load_cluster(path).devices] == [None, 100.0]
    bad = _write(tmp_path, "name: t\ndevices:\n  - {name: a, type: jetson-nano, port_mbps: 0}\n")
    with pytest.raises(ConfigError) as info:
        load_cluster(bad)
    assert info.value.field == "devices[0].port_mbps"
    assert "greater than 0" in str(info.value)


def test_negative_memory_names_file_field_and_problem(tmp_path: Path) -> None:
    path = _write(tmp_path, "name: t\ndevices:\n  - {name: a, type: jetson-nano, memory_mb: -5}\n")
    with pytest.raises(ConfigError) as info:
        load_cluster(path)
    message = str(info.value)
    assert str(path) in message
    assert "devices[0].memory_mb" in message
    assert "greater than 0" in message
    assert info.value.field == "devices[0].memory_mb"


def test_unknown_type_lists_known_types() -> None:
    doc = _doc(devices=[{"name": "a", "type": "cray-1"}])
    with pytest.raises(ConfigError) as info:
        cluster_from_dict(doc, source="x.yaml")
    message = str(info.value)
    assert "devices[0].type" in message
    assert "cray-1" in message
    assert "jetson-nano" in message and "raspberry-pi-5" in message


def test_duplicate_device_names() -> None:
    doc = _doc(devices=[{"name": "a", "type": "jetson-nano"}] * 2)
    with pytest.raises(ConfigError, match="unique; repeated: a"):
        cluster_from_dict(doc)


@pytest.mark.parametrize(
    ("extra", "where"),
    [
        ({"links": [{"between": ["a", "zz"], "bandwidth_mbps": 10}]}, "links[0].between"),
        ({"sites": [{"name": "s", "devices": ["a", "zz"]}]}, "sites[0].devices"),
        (
            {"background_apps": [{"name": "x", "device": "zz", "kind": "sift", "period_ms": 1}]},
            "background_apps[0].device",
        ),
    ],
)
def test_reference_to_unknown_device(extra: dict[str, Any], where: str) -> None:
    with pytest.raises(ConfigError) as info:
        cluster_from_dict(_doc(**extra), source="f.yaml")
    assert where in str(info.value)
    assert "'zz'" in str(info.value)


def test_bad_yaml(tmp_path: Path) -> None:
    path = _write(tmp_path, "name: t\ndevices: [\n")
    with pytest.raises(ConfigError, match="not valid YAML") as info:
        load_cluster(path)
    assert info.value.source == str(path)


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError, match="cannot read the file") as info:
        load_cluster(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("text", ["- a\n- b\n", "just a string\n", ""])
def test_non_mapping_document(tmp_path: Path, text: str) -> None:
    with pytest.raises(ConfigError, match="must hold a mapping"):
        load_cluster(_write(tmp_path, text))


def test_unknown_extra_key() -> None:
    with pytest.raises(ConfigError) as info:
        cluster_from_dict(_doc(colour="blue"), source="f.yaml")
    assert info.value.field == "colour"
    assert "not permitted" in str(info.value)


def test_link_falls_back_to_default_and_is_symmetric() -> None:
    doc = _doc(
        default_link={"bandwidth_mbps": 50, "latency_ms": 2},
        devices=[{"name": n, "type": "jetson-nano"} for n in "abc"],
        links=[{"between": ["a", "b"], "bandwidth_mbps": 7, "latency_ms": 1}],
    )
    cluster = cluster_from_dict(doc)
    assert cluster.link("a", "b") == cluster.link("b", "a") == Link("a", "b", 7, 1)
    fallback = cluster.link("c", "a")
    assert (fallback.a, fallback.b) == ("c", "a")
    assert (fallback.bandwidth_mbps, fallback.latency_ms) == (50, 2)
    assert cluster.link("a", "c").bandwidth_mbps == 50


def test_without_removes_devices_links_sites_and_apps() -> None:
    doc = _doc(
        devices=[{"name": n, "type": "jetson-nano"} for n in "abc"],
        links=[{"between": ["a", "b"], "bandwidth_mbps": 7}],
        sites=[{"name": "s", "devices": ["a", "b", "c"]}],
        background_apps=[{"name": "x", "device": "b", "kind": "sift", "period_ms": 100}],
    )
    smaller = cluster_from_dict(doc).without(frozenset({"b"}))
    assert smaller.device_names == ("a", "c")
    assert smaller.links == ()
    assert smaller.sites[0].devices == ("a", "c")
    assert smaller.background_apps == ()
    assert smaller.link("a", "c").bandwidth_mbps == 1000.0
