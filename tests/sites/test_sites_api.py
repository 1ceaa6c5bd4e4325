"""The manager's Okita endpoints, through the app built as service/app.py builds it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient

from edgewise.cluster.schema import load_cluster
from edgewise.errors import EdgewiseError
from edgewise.service import JobManager, Store, create_app
from edgewise.service.problems import discover_problems, job_kinds
from edgewise.sites.api import build_sites_router, cluster_scenario
from edgewise.sites.scenario import load_scenario
from edgewise.sites.sim import simulate

TOKEN = "test-token-0123456789abcdef"
ROOT = Path(__file__).parents[2]
SMALL = ROOT / "src" / "edgewise" / "sites" / "examples" / "small.yaml"


def _backend(state: Path) -> JobManager:
    """A dry-run manager of the mixed lab (two sites) offering every installed kind."""
    cluster = load_cluster(ROOT / "examples" / "mixed-edge-lab.yaml")
    return JobManager(Store(state / "m.db"), job_kinds(discover_problems()), cluster,
                      state_dir=state)


@pytest.fixture()
def client(tmp_path: Path) -> TestClient:
    app = create_app(_backend(tmp_path), TOKEN, problems=[], routers=[build_sites_router()])
    return TestClient(app, headers={"Authorization": f"Bearer {TOKEN}"})


def _scenario() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(SMALL.read_text())
    return data


def test_simulate_matches_the_simulator(client: TestClient) -> None:
    response = client.post("/api/v1/sites/simulate",
                           json={"scenario": _scenario(), "policy": "okita"})
    assert response.status_code == 200, response.text
    body = response.json()
    expected = simulate(load_scenario(SMALL), "okita", seed=0)
    assert body["total_cost"] == pytest.approx(expected.total_cost)
    assert body["makespan"] == expected.makespan
    assert body["completion"] == expected.completion
    assert body["total_cost"] == pytest.approx(
        body["latency_cost"] + body["data_transfer_cost"] + body["parameter_exchange_cost"])


def test_plan_lists_every_entry_with_site_names(client: TestClient) -> None:
    response = client.post("/api/v1/sites/plan", json={"scenario": _scenario(), "policy": "fifo"})
    assert response.status_code == 200, response.text
    body = response.json()
    plan = simulate(load_scenario(SMALL), "fifo", seed=0).plan
    assert len(body["entries"]) == len(plan.entries)
    first = body["entries"][0]
    assert set(first["workers"]) <= {"edge-a", "edge-b", "edge-c"}
    assert first["ps_site"] in {"edge-a", "edge-b", "edge-c"}
    chunks = sum(t["chunks"] for e in body["entries"] for t in e["transfers"])
    assert chunks == sum(sum(j["data"]) for j in _scenario()["jobs"])


def test_the_generator_is_bounded_and_works(client: TestClient) -> None:
    ok = client.post("/api/v1/sites/simulate",
                     json={"generator": {"n_sites": 4, "n_jobs": 5, "horizon": 15}})
    assert ok.status_code == 200, ok.text
    too_big = client.post("/api/v1/sites/simulate", json={"generator": {"n_sites": 10_000}})
    assert too_big.status_code == 422


@pytest.mark.parametrize("body, fragment", [
    ({}, "exactly one"),
    ({"scenario": {**_scenario(), "bandwidth_cost": [[0.0]]}}, "bandwidth_cost"),
    ({"scenario": _scenario(), "policy": "nope"}, "policy"),
    ({"generator": {"n_sites": 4, "n_jobs": 5, "horizon": 15}, "policy": "offline-opt"},
     "offline-opt"),
    ({"scenario": {**_scenario(), "extra": 1}}, "extra"),
])
def test_bad_requests_get_422_naming_the_problem(client: TestClient, body: dict[str, Any],
                                                 fragment: str) -> None:
    response = client.post("/api/v1/sites/simulate", json=body)
    assert response.status_code == 422
    assert fragment in response.text


def test_size_limits_are_in_the_schema(client: TestClient) -> None:
    huge = {"generator": {"n_sites": 64, "n_jobs": 256, "horizon": 500}}
    response = client.post("/api/v1/sites/simulate", json=huge)
    assert response.status_code == 422 and "at most 750000" in response.text


def test_a_sites_job_runs_on_the_clusters_sites(tmp_path: Path) -> None:
    manager = _backend(tmp_path)
    scenario = cluster_scenario(manager.cluster)
    assert [s.name for s in scenario.sites] == ["building-a", "building-b"]
    job = manager.submit("sites", {"epochs_per_slot": 1})
    assert job.kind == "sites" and job.state == "pending"
    body = {"scenario": {**_scenario()}}
    with pytest.raises(EdgewiseError, match="no sites named edge-a, edge-b, edge-c"):
        manager.submit("sites", body)


def test_the_routes_need_the_token(tmp_path: Path) -> None:
    bare = TestClient(create_app(_backend(tmp_path), TOKEN))
    for path in ("/api/v1/sites/simulate", "/api/v1/sites/plan"):
        assert bare.post(path, json={"scenario": _scenario()}).status_code == 401
