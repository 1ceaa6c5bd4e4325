"""The manager's Ekya endpoints, mounted with create_app(routers=[continual_router()])."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from edgewise.cluster.model import Cluster, Device, Link
from edgewise.continual.api import continual_router
from edgewise.service import JobManager, Store, create_app
from edgewise.service.problems import discover_problems, job_kinds

TOKEN = "test-token-0123456789abcdef"
BASE = "/api/v1/continual"


@pytest.fixture
def manager(tmp_path: Path) -> JobManager:
    device = Device("edge", "edge-server", 2, "gpu", 4096, 1.0)
    cluster = Cluster("c", (device,), Link("edge", "edge", 1000.0, 0.1))
    return JobManager(Store(tmp_path / "m.db"), job_kinds(discover_problems()), cluster,
                      state_dir=tmp_path)


@pytest.fixture
def client(manager: JobManager) -> TestClient:
    app = create_app(manager, TOKEN, problems=[], routers=[continual_router()])
    return TestClient(app, headers={"Authorization": f"Bearer {TOKEN}"})


def _problem(policy: str = "thief") -> dict[str, Any]:
    """§3.2's window 1 (Table 1): two streams, 3 GPUs, 120 s, a_MIN 40%."""
    infer = [{"config": "full", "accuracy_factor": 1.0, "demand": 0.5},
             {"config": "half", "accuracy_factor": 0.8, "demand": 0.25}]
    return {"accelerators": 3, "window_s": 120, "a_min": 0.4, "policy": policy, "streams": [
        {"name": "A", "accuracy": 0.65, "inference": infer, "retrain": [
            {"config": "Cfg1A", "accuracy": 0.75, "cost_s": 85},
            {"config": "Cfg2A", "accuracy": 0.70, "cost_s": 65}]},
        {"name": "B", "accuracy": 0.50, "inference": infer, "retrain": [
            {"config": "Cfg1B", "accuracy": 0.90, "cost_s": 80},
            {"config": "Cfg2B", "accuracy": 0.85, "cost_s": 50}]}]}


def test_plan_then_get(client: TestClient) -> None:
    thief = client.post(f"{BASE}/plan", json=_problem())
    assert thief.status_code == 201, thief.text
    body = thief.json()
    assert {d["stream"] for d in body["decisions"]} == {"A", "B"}
    shares = sum(d["retrain_share"] + d["inference_share"] for d in body["decisions"])
    assert shares <= 3 + 1e-6
    uniform = client.post(f"{BASE}/plan", json=_problem("uniform")).json()
    assert body["accuracy"] >= uniform["accuracy"]
    got = client.get(f"{BASE}/plans/{body['id']}")
    assert got.status_code == 200 and got.json() == body
    assert [p["id"] for p in client.get(f"{BASE}/plans").json()] == [body["id"],
                                                                       uniform["id"]]


def test_bad_requests(client: TestClient) -> None:
    bad = _problem()
    bad["streams"][0]["accuracy"] = 1.5
    assert client.post(f"{BASE}/plan", json=bad).status_code == 422
    bad = _problem()
    bad["streams"][1]["name"] = "A"  # duplicate names: the problem refuses them
    response = client.post(f"{BASE}/plan", json=bad)
    assert response.status_code == 422 and "unique" in response.text
    bad = _problem()
    bad["policy"] = "nope"
    assert client.post(f"{BASE}/plan", json=bad).status_code == 422
    bad = _problem()
    bad["streams"] = bad["streams"] * 40
    assert client.post(f"{BASE}/plan", json=bad).status_code == 422
    assert client.get(f"{BASE}/plans/{'0' * 32}").status_code == 404
    assert client.get(f"{BASE}/plans/../etc").status_code == 404


def test_requires_the_token(client: TestClient) -> None:
    anonymous = TestClient(client.app)
    assert anonymous.post(f"{BASE}/plan", json=_problem()).status_code == 401


@pytest.mark.parametrize(("change", "fragment"), [
    ({"delta": 5e-324}, "delta"),  # once an OverflowError in floor(accelerators / delta)
    ({"delta": 1e-5}, "delta"),  # once a 74.5 GiB MemoryError
    ({"policy": "exact", "accelerators": 1000, "delta": 0.05}, "at most 100 for exact"),
    ({"accelerators": 1000, "delta": 0.1}, "at most 2000 for thief"),
])
def test_problem_sizes_are_bounded_in_the_schema(client: TestClient, change: dict[str, Any],
                                                 fragment: str) -> None:
    response = client.post(f"{BASE}/plan", json={**_problem(), **change})
    assert response.status_code == 422 and fragment in response.text


def test_a_continual_job_shares_the_accelerator_device(manager: JobManager) -> None:
    job = manager.submit("continual", {"streams": 2, "windows": 1})
    assert job.kind == "continual" and job.state == "pending"
    with pytest.raises(Exception, match="no such device"):
        manager.submit("continual", {"device": "ghost"})
    with pytest.raises(Exception, match="limited to 4 streams"):
        manager.submit("continual", {"streams": 5, "policy": "exact"})
