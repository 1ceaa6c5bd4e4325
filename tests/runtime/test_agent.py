"""Device agents: an emulated cluster's devices beat from one agent process, each device on
its own heartbeat (a stalled device falls silent alone); the host's metrics are sampled
once for all of them."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray
import yaml

from edgewise.cluster.model import Cluster
from edgewise.runtime.agent import EMULATED_AGENT, SharedSample
from edgewise.runtime.ray_cluster import RayRuntime, start_local
from edgewise.service.cluster import RayDeviceServices

PERIOD_S = 0.5
SILENT_S = 10 * PERIOD_S


def test_a_shared_sample_is_taken_once_per_age_and_copied() -> None:
    calls: list[int] = []

    def sample() -> dict[str, float]:
        calls.append(1)
        return {"cpu_percent": float(len(calls))}

    shared = SharedSample(sample, max_age_s=60.0)
    first, second = shared(), shared()
    assert first == second == {"cpu_percent": 1.0} and len(calls) == 1
    first["cpu_percent"] = -1.0  # a caller's copy, not the cache
    assert shared() == {"cpu_percent": 1.0}
    assert SharedSample(sample, max_age_s=0.0)() == {"cpu_percent": 2.0}


@pytest.fixture(scope="module")
def runtime(small_cluster: Cluster) -> Iterator[RayRuntime]:
    rt = start_local(small_cluster)
    yield rt
    rt.shutdown()


def _beating(services: RayDeviceServices) -> set[str]:
    """The devices whose last beat is younger than ten periods."""
    return {d for d, m in services.device_metrics().items() if m["age_seconds"] < SILENT_S}


def _age(services: RayDeviceServices, device: str) -> float:
    return float(services.device_metrics().get(device, {}).get("age_seconds", 0.0))


@pytest.mark.ray
def test_one_agent_beats_for_every_emulated_device_and_a_stall_silences_one(
        runtime: RayRuntime) -> None:
    devices = set(runtime.cluster.device_names)
    services = RayDeviceServices(runtime, heartbeat_s=PERIOD_S)
    try:
        assert len({id(a) for a in services._agents.values()}) == 1
        assert set(services._agents) == devices
        deadline = time.monotonic() + 60
        while _beating(services) != devices and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _beating(services) == devices
        metrics = services.device_metrics()
        assert all(0.0 <= m["cpu_percent"] <= 100.0 for m in metrics.values())

        services.inject_fault("stall", "nano-1", None, 60.0)
        deadline = time.monotonic() + 50
        while _age(services, "nano-1") < SILENT_S and time.monotonic() < deadline:
            time.sleep(0.2)
        ages = {d: m["age_seconds"] for d, m in services.device_metrics().items()}
        assert ages["nano-1"] >= SILENT_S  # silent since the stall
        # the others beat on after it fell silent (ten periods: slack for a loaded host)
        assert all(ages[d] < ages["nano-1"] for d in devices - {"nano-1"}), ages
    finally:
        services._monitor.clear_faults.remote()  # the instance's monitor outlives the test
        services.close()
    assert not [a for a in ray.util.list_named_actors(all_namespaces=True)
                if str(a.get("name", "")).startswith(EMULATED_AGENT)]


@pytest.mark.ray
def test_cluster_up_shows_every_devices_live_metrics(small_cluster: Cluster,
                                                     tmp_path: Path) -> None:
    """`cluster up --seconds`: the emulated cluster up, its agent beating for every device,
    the live table showing each device's heartbeat (an emulated device's load is the
    host's, shown once), then a clean stop."""
    from tests.clusters import SMALL_CLUSTER
    from typer.testing import CliRunner

    from edgewise.cli import app

    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(SMALL_CLUSTER))
    result = CliRunner().invoke(app, ["cluster", "up", str(path), "--seconds", "3",
                                      "--period", "0.5"], env={"COLUMNS": "200"})

    assert result.exit_code == 0, result.output
    last = result.output[result.output.rindex("heartbeat age"):]  # the final live table
    for device in small_cluster.device_names:
        row = next(line for line in last.splitlines() if f" {device} " in line)
        assert re.search(r"│\s+\d+\.\d\s+│\s*$", row), row  # an age, not a blank
    assert re.search(r"this host: cpu \d+ %", " ".join(last.split()))
