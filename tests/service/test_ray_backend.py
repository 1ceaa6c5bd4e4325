"""The Ray-backed job backend behind the real HTTP app: train, metrics, stop, one at a time."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import ray
from fastapi.testclient import TestClient

from edgewise.cluster.schema import cluster_from_dict
from edgewise.runtime.health import StrikeLedger
from edgewise.runtime.jobs import TrainJobSpec
from edgewise.runtime.ray_cluster import RayRuntime, start_local
from edgewise.service import create_app
from edgewise.service.ray_backend import RayJobBackend, build_plan

pytestmark = pytest.mark.ray
JOBS = "/api/v1/jobs"
TOKEN = "test-token-0123456789abcdef"
HEARTBEAT_S = 0.5
CLUSTER = {
    "name": "lab",
    "devices": [
        {"name": "nano-0", "type": "jetson-nano"},
        {"name": "nano-1", "type": "jetson-nano"},
        {"name": "nano-2", "type": "jetson-nano"},
        {
            "name": "pi",
            "type": "raspberry-pi-5",
            "roles": ["parameter-server", "data-store", "manager"],
        },
    ],
}


@pytest.fixture(scope="module")
def runtime() -> Iterator[RayRuntime]:
    rt = start_local(cluster_from_dict(CLUSTER))
    yield rt
    rt.shutdown()


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("state")


@pytest.fixture(scope="module")
def backend(runtime: RayRuntime, state: Path) -> Iterator[RayJobBackend]:
    with RayJobBackend(runtime, StrikeLedger(), state, heartbeat_s=HEARTBEAT_S) as b:
        yield b


@pytest.fixture
def client(backend: RayJobBackend) -> Iterator[TestClient]:
    with TestClient(create_app(backend, TOKEN), headers={"Authorization": f"Bearer {TOKEN}"}) as c:
        yield c


def _wait(check: Callable[[], Any], timeout_s: float, every_s: float = 0.2) -> Any:
    """Poll ``check`` until it returns something truthy; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if found := check():
            return found
        time.sleep(every_s)
    pytest.fail(f"not done within {timeout_s} s")


def _final(client: TestClient, job_id: str, timeout_s: float) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        job: dict[str, Any] = client.get(f"{JOBS}/{job_id}").json()
        return job if job["state"] in ("succeeded", "failed", "stopped") else None

    found: dict[str, Any] = _wait(done, timeout_s)
    return found


def _run_actors() -> list[str]:
    names = [a["name"] for a in ray.util.list_named_actors(all_namespaces=True)]
    return [n for n in names if n.startswith(("worker-", "ps-"))]


def test_a_one_epoch_job_succeeds_with_an_accuracy(client: TestClient, state: Path) -> None:
    started = client.post(JOBS, json={"epochs": 1, "seed": 1})
    assert started.status_code == 201, started.text
    job_id = started.json()["job_id"]
    job = _final(client, job_id, timeout_s=120)
    assert job["state"] == "succeeded", job
    assert job["epoch"] == 1 and 0.0 < job["val_accuracy"] <= 1.0
    assert job["strikes"] == {"nano-0": 0, "nano-1": 0, "nano-2": 0} and job["restarts"] == 0
    assert job["error"] is None and job["finished_at"] >= job["started_at"]
    assert [j["job_id"] for j in client.get(JOBS).json()] == [job_id]
    assert (state / "jobs" / job_id / "checkpoints" / "epoch-0000.ewt").is_file()


def test_every_device_reports_metrics(client: TestClient) -> None:
    def reported() -> dict[str, Any] | None:
        metrics: dict[str, Any] = client.get("/api/v1/devices/metrics").json()
        return metrics if set(metrics) == set(d["name"] for d in CLUSTER["devices"]) else None

    metrics = _wait(reported, timeout_s=10)
    for values in metrics.values():
        assert values["cpu_percent"] >= 0.0 and 0.0 < values["memory_percent"] <= 100.0
        assert values["age_seconds"] < 10 * HEARTBEAT_S


def test_a_stopped_job_ends_stopped_and_leaves_no_actors(client: TestClient) -> None:
    started = client.post(JOBS, json={"epochs": 20, "workers": ["nano-0", "nano-1"]})
    job_id = started.json()["job_id"]
    # mid-training: a stop during launch is only seen at the first epoch_start
    _wait(lambda: client.get(f"{JOBS}/{job_id}").json()["epoch"] >= 1, timeout_s=60)
    second = client.post(JOBS, json={"epochs": 1})
    assert second.status_code == 422
    assert second.json() == {"detail": f"a job is already running: {job_id}"}
    t0 = time.monotonic()
    assert client.post(f"{JOBS}/{job_id}/stop").status_code == 200
    job = _final(client, job_id, timeout_s=5)
    assert time.monotonic() - t0 < 3
    assert job["state"] == "stopped" and 1 <= job["epoch"] < 20 and job["error"] is None
    _wait(lambda: not _run_actors(), timeout_s=3)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"shards": {"nano-0": 700, "nano-1": 700, "nano-2": 36}}, "shards"),  # 1436 samples
        ({"workers": ["nano-0", "nano-1"], "shards": {"nano-0": 1437}}, "shards"),
        ({"workers": ["nano-0", "pi"]}, "workers"),
        ({"workers": ["ghost"]}, "workers"),
    ],
)
def test_bad_plans_are_rejected_before_anything_runs(
    client: TestClient, body: dict[str, Any], field: str
) -> None:
    before = len(client.get(JOBS).json())
    response = client.post(JOBS, json=body)
    assert response.status_code == 422
    assert response.json()["detail"].startswith(f"{field}: ")
    assert len(client.get(JOBS).json()) == before


def test_plans_follow_the_spec(runtime: RayRuntime) -> None:
    cluster = runtime.cluster
    equal = build_plan(cluster, TrainJobSpec(workers=["nano-0", "nano-2"]), ["nano-0", "nano-2"])
    assert dict(equal.shards) == {"nano-0": 719, "nano-2": 718}
    assert (equal.ps_device, equal.store_device) == ("pi", "pi")
    spec = TrainJobSpec(
        shards={"nano-0": 1000, "nano-1": 400, "nano-2": 37}, batch_sizes={"nano-1": 8}
    )
    given = build_plan(cluster, spec, ["nano-0", "nano-1", "nano-2"])
    assert dict(given.shards) == spec.shards
    assert dict(given.batch_sizes) == {"nano-0": 32, "nano-1": 8, "nano-2": 32}


def test_stop_and_status_of_an_unknown_job(backend: RayJobBackend) -> None:
    assert backend.stop_job("job-nope") is False
    assert backend.job_status("job-nope") is None
