"""The manager's Okita endpoints, through the app built as service/app.py builds it."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
import yaml
from fastapi.testclient import TestClient

from edgewise.cluster.schema import load_cluster
from edgewise.errors import EdgewiseError
from edgewise.jobs import JobContext, run_inline
from edgewise.service import JobManager, Store, create_app
from edgewise.service.errors import ValidationProblems
from edgewise.service.problems import discover_problems, job_kinds
from edgewise.sites import api as api_module
from edgewise.sites.api import SITES_KIND, build_sites_router, cluster_scenario
from edgewise.sites.api_schemas import SitesJobSpec
from edgewise.sites.run import SitesRun
from edgewise.sites.scenario import load_scenario
from edgewise.sites.sim import simulate

TOKEN = "test-token-0123456789abcdef"
ROOT = Path(__file__).parents[2]
LAB = ROOT / "examples" / "mixed-edge-lab.yaml"
JOBS = "/api/v1/jobs"
DIGITS_CNN = {"model": "digits-cnn", "data": "digits"}
HALF = {**DIGITS_CNN, "val_fraction": 0.5}  # 898 digits to train on, not 1,437
SMALL = ROOT / "src" / "edgewise" / "sites" / "examples" / "small.yaml"


def _backend(state: Path) -> JobManager:
    """A dry-run manager of the mixed lab (two sites) offering every installed kind."""
    cluster = load_cluster(LAB)
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


def _refusal(client: TestClient, spec: dict[str, Any]) -> tuple[str, str]:
    response = client.post(JOBS, json={"kind": "sites", "spec": spec})
    assert response.status_code == 422, response.text
    problem = ValidationProblems.model_validate(response.json()).detail[0]
    return ".".join(str(p) for p in problem.loc), problem.msg


def _lab_scenario(**first: Any) -> dict[str, Any]:
    """The cluster's scenario (a job per building) with ``first`` set on its first job."""
    body = cluster_scenario(load_cluster(LAB)).model_dump(mode="json")
    body["jobs"][0].update(first)
    return body


@pytest.mark.parametrize(("spec", "field", "said"), [
    ({"workload": {"model": "hf:no-such-org/no-such-model", "data": "digits"}},
     "workload.model", "Hugging Face Hub"),
    ({"workload": {**DIGITS_CNN, "classes": 7}}, "workload.task.classes", "7 classes"),
    ({"workload": {**DIGITS_CNN, "data": "npz:x.npz"}}, "workload.data", "no data folder"),
    ({"scenario": _lab_scenario(workload="my-model.yaml")}, "scenario.jobs.0.workload",
     "valid dictionary"),  # a path the caller chooses is never taken
    ({"scenario": _lab_scenario(workload={**DIGITS_CNN, "classes": 7})},
     "scenario.jobs[0].workload.task.classes", "7 classes"),
    ({"scenario": _lab_scenario(data=[1500, 0]), "workload": DIGITS_CNN},
     "scenario.jobs[0].data", "1437 samples"),
])
def test_a_bad_workload_is_refused_at_submission_naming_its_field(
        client: TestClient, spec: dict[str, Any], field: str, said: str) -> None:
    where, message = _refusal(client, spec)
    assert where.endswith(field) and said in message, (where, message)
    assert "Extra inputs" not in message
    assert client.get(JOBS).json()["jobs"] == []


def test_a_good_workload_is_taken(client: TestClient) -> None:
    for spec in ({"epochs_per_slot": 1, "workload": DIGITS_CNN},
                 {"scenario": _lab_scenario(workload=HALF), "workload": DIGITS_CNN}):
        created = client.post(JOBS, json={"kind": "sites", "spec": spec})
        assert created.status_code == 201, created.text


def test_the_job_hands_its_workloads_to_the_executor(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``own`` trains its scenario entry's workload, ``shared`` the spec's: both built from
    the HTTP spec and given to ``sites.run.execute`` with the manager's limiter. (The real
    run of a given workload: tests/sites/test_workload.py.)"""
    calls: list[dict[str, Any]] = []

    def spy(runtime: Any, problem: Any, plan: Any, **kwargs: Any) -> SitesRun:
        calls.append(kwargs)
        return SitesRun(plan, (), (), {"own": 0.5, "shared": 0.7}, 0, 0, {}, 1.0)

    monkeypatch.setattr(api_module, "execute", spy)
    site = {"name": "building-a", "gpu": 0.0, "cpu": 3.0, "mem_gb": 3.0, "disk_gb": 3.0}
    job = {"arrival": 0, "data": [2], "epochs": 1, "rho": 2.0, "chunk_mb": 1.0,
           "param_mb": 0.2, "worker": {"cpu": 1.0, "mem_gb": 1.0, "disk_gb": 1.0},
           "ps": {"cpu": 1.0, "mem_gb": 1.0, "disk_gb": 1.0}}
    scenario = {"horizon": 2, "sites": [site], "bandwidth_cost": [[0.0]],
                "jobs": [{**job, "name": "own", "workload": HALF}, {**job, "name": "shared"}]}
    spec = SitesJobSpec.model_validate({"scenario": scenario, "workload": DIGITS_CNN,
                                        "epochs_per_slot": 1})
    ctx = SimpleNamespace(cluster=load_cluster(LAB), runtime=None, limited=run_inline)
    planned = SITES_KIND.plan(spec, cast(JobContext, ctx))
    summary = SITES_KIND.execute(spec, planned, cast(JobContext, ctx))
    (kwargs,) = calls
    own, shared = kwargs["workloads"]["own"], kwargs["workloads"]["shared"]
    assert (own.data.val_fraction, shared.data.val_fraction) == (0.5, 0.2)
    assert kwargs["limited"] is run_inline and kwargs["config"].epochs_per_slot == 1
    assert planned.view["workloads"] == {"own": "digits-cnn on digits",
                                         "shared": "digits-cnn on digits"}
    assert summary["val_accuracy"] == pytest.approx(0.6)
