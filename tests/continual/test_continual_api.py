"""The manager's Ekya endpoints, mounted with create_app(routers=[continual_router()]), and
its ``continual`` job: the student's and golden model's workloads, run by the executor."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest
from fastapi.testclient import TestClient

from edgewise.cluster.model import Cluster, Device, Link
from edgewise.continual import api as api_module
from edgewise.continual.api import CONTINUAL_KIND, continual_router
from edgewise.continual.api_schemas import ContinualJobSpec
from edgewise.continual.problem import ContinualPlan, StreamDecision
from edgewise.continual.run import DEVICE, LiveProblem, WindowResult, edge_cluster
from edgewise.jobs import JobContext, run_inline
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


JOBS = "/api/v1/jobs"
DIGITS_CNN = {"model": "digits-cnn", "data": "digits"}


def _refusal(client: TestClient, spec: dict[str, Any]) -> str:
    response = client.post(JOBS, json={"kind": "continual", "spec": spec})
    assert response.status_code == 422, response.text
    return response.text


def test_a_continual_job_takes_the_student_and_golden_workloads(client: TestClient) -> None:
    hub = _refusal(client, {"workload": {"model": "hf:no-such-org/no-such-model",
                                         "data": "digits"}})
    assert "Hub" in hub and "extra" not in hub
    frames = _refusal(client, {"golden_workload": {**DIGITS_CNN, "data": "npz:cams.npz"}})
    assert "golden_workload.data" in frames and "digits streams" in frames
    assert "workload.task.classes" in _refusal(client, {"workload": {**DIGITS_CNN,
                                                                     "classes": 4}})
    assert client.get(JOBS).json()["jobs"] == []
    spec = {"streams": 1, "windows": 1, "workload": DIGITS_CNN, "golden_workload": DIGITS_CNN}
    created = client.post(JOBS, json={"kind": "continual", "spec": spec})
    assert created.status_code == 201, created.text


class _Recorder:
    """A JobContext that runs everything inline and keeps what it is told."""

    def __init__(self) -> None:
        self.cluster, self.runtime, self.limited = edge_cluster(), "the runtime", run_inline
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.metrics: dict[str, list[float]] = {}
        self.plans: list[dict[str, Any]] = []

    def event(self, kind: str, message: str, **data: Any) -> None:
        self.events.append((kind, data))

    def metric(self, name: str, value: float, *, step: float | None = None) -> None:
        self.metrics.setdefault(name, []).append(value)

    def progress(self, fraction: float, **summary: Any) -> None:
        pass

    def update_plan(self, view: dict[str, Any]) -> None:
        self.plans.append(dict(view))  # as the manager stores it, at the time

    def check_stop(self) -> None:
        pass


def test_the_job_hands_the_workloads_student_to_the_executor(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The job runs ``continual.run.execute`` (a stand-in here: the real one is run by
    tests/continual/test_run_window.py) on the resolved workloads, and reports each window
    it is given; the built-in models stay None."""
    handed: list[tuple[Any, LiveProblem, str]] = []

    def executor(runtime: Any, problem: LiveProblem, policy: str, /, *,
                 progress: Callable[[WindowResult], None]) -> list[WindowResult]:
        handed.append((runtime, problem, policy))
        decision = StreamDecision("cam0", "e5", "s1-r1", 0.5, 0.5)
        results = [WindowResult(i, ContinualPlan((decision,), 0.8), {"cam0": 0.5 + i / 10},
                                {"cam0": 5}, retrained={"cam0": "e5"}) for i in range(2)]
        for result in results:
            progress(result)
        return results

    monkeypatch.setattr(api_module, "execute", executor)
    ctx = _Recorder()
    spec = ContinualJobSpec.model_validate({"streams": 1, "workload": DIGITS_CNN,
                                            "policy": "uniform"})
    planned = CONTINUAL_KIND.plan(spec, cast(JobContext, ctx))
    summary = CONTINUAL_KIND.execute(spec, planned, cast(JobContext, ctx))
    (runtime, problem, policy), = handed
    assert runtime == "the runtime" and policy == "uniform" and problem.device == DEVICE
    assert problem.student is not None and problem.golden is None
    assert problem.student.model.ref == "digits-cnn"
    assert problem.student.task.input_shape == (1, 8, 8)  # resolved by the dry run
    assert [s.name for s in problem.streams] == ["cam0"] and problem.windows == 2
    assert summary == {"window": 2, "mean_accuracy": pytest.approx(0.55)}
    assert ctx.metrics == {"window_accuracy": [0.5, 0.6], "estimated_accuracy": [0.8, 0.8]}
    assert [(k, d["window"]) for k, d in ctx.events] == [("replan", 0), ("replan", 1)]
    assert [len(p["tables"]) for p in ctx.plans] == [1, 2]
    assert ctx.plans[-1]["workload"] == DIGITS_CNN and "golden_workload" not in ctx.plans[-1]
