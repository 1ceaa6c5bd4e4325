"""The Deep-Edge Manager's endpoints over the dry-run backend: solve, launch, monitor, profile."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from edgewise.cluster.model import Cluster
from edgewise.errors import EdgewiseError
from edgewise.perf import profiler
from edgewise.service import JobManager, Store, create_app
from edgewise.service.problems import discover_problems, job_kinds
from edgewise.update.api import update_router

TOKEN = "test-token-0123456789abcdef"
UPDATE = "/api/v1/update"


def _client(backend: JobManager, tmp_path: Path, token: str | None) -> TestClient:
    app = create_app(backend, TOKEN, problems=[],
                     routers=[update_router(tmp_path / "models", tmp_path)])
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    return TestClient(app, headers=headers)


@pytest.fixture
def client(backend: JobManager, tmp_path: Path) -> Iterator[TestClient]:
    with _client(backend, tmp_path, TOKEN) as c:
        yield c


def _detail(response: Any) -> str:
    """The messages of a 422 (a list of problems, as the OpenAPI document says)."""
    return " ".join(problem["msg"] for problem in response.json()["detail"])


def _worker(
    name: str,
    dtype: str,
    state: tuple[float, float, float] = (15.0, 0.0, 25.0),
    deadline_ms: float = 200.0,
) -> dict[str, Any]:
    cpu, gpu, mem = state
    return {
        "device": name,
        "device_type": dtype,
        "state": {"cpu": cpu, "gpu": gpu, "mem": mem},
        "apps": [{"name": f"sift-{name}", "kind": "sift", "deadline_ms": deadline_ms}],
    }


def _testbed(**extra: Any) -> dict[str, Any]:
    workers = [_worker("tx2-0", "jetson-tx2")]
    workers += [_worker(f"nano-{i}", "jetson-nano") for i in range(3)]
    return {
        "n_samples": 3855,
        "workers": workers,
        "ps_state": {"cpu": 10.0, "mem": 30.0},
        "seed": 1,
        **extra,
    }


def test_solve_on_the_testbed_covers_every_sample_within_deadlines(client: TestClient) -> None:
    response = client.post(f"{UPDATE}/solve", json=_testbed())
    assert response.status_code == 200, response.text
    plan = response.json()
    assert sum(plan["shards"].values()) == 3855
    assert set(plan["workers"]) == set(plan["shards"]) == set(plan["batch_sizes"])
    assert plan["policy"] == "deep-edge" and plan["solver_seconds"] >= 0
    assert plan["predicted_exec_ms"]
    assert all(ms <= 200.0 for ms in plan["predicted_exec_ms"].values())


@pytest.mark.parametrize("policy", ["deep-edge", "deep-edge-literal", "deep-edge-goodput",
                                    "fair", "exact"])
def test_every_policy_answers(client: TestClient, policy: str) -> None:
    response = client.post(f"{UPDATE}/solve", json=_testbed(policy=policy, noise_scale=400.0))
    assert response.status_code == 200, response.text
    assert response.json()["policy"] == policy
    assert sum(response.json()["shards"].values()) == 3855


def test_goodput_plans_with_the_noise_scale_it_is_given(client: TestClient) -> None:
    """A small noise scale makes every extra sample of the global batch cost epochs, so the
    goodput plan's global batch is no larger than with a large one (where it is deep-edge's
    plan: batch size then costs no epochs)."""
    plans = {}
    for noise_scale in (1.0, 1e6):
        response = client.post(f"{UPDATE}/solve", json=_testbed(policy="deep-edge-goodput",
                                                                  noise_scale=noise_scale))
        assert response.status_code == 200, response.text
        plans[noise_scale] = response.json()
    deep_edge = client.post(f"{UPDATE}/solve", json=_testbed()).json()
    small, large = (sum(plans[n]["batch_sizes"].values()) for n in (1.0, 1e6))
    assert small < large
    assert plans[1e6]["batch_sizes"] == deep_edge["batch_sizes"]
    assert plans[1e6]["shards"] == deep_edge["shards"]


def test_a_loaded_worker_is_dropped_or_gets_a_smaller_batch(client: TestClient) -> None:
    workers = [_worker("busy", "jetson-nano", (85.0, 90.0, 30.0)), _worker("idle", "jetson-nano")]
    response = client.post(f"{UPDATE}/solve", json={"n_samples": 2000, "workers": workers})
    assert response.status_code == 200, response.text
    plan = response.json()
    assert "idle" in plan["workers"]
    batches = plan["batch_sizes"]
    assert "busy" not in plan["workers"] or batches["busy"] < batches["idle"]


def test_infeasible_request_is_422_with_the_reason(client: TestClient) -> None:
    body = {"n_samples": 1000, "workers": [_worker("hot", "jetson-nano", (95, 95, 30), 50.0)]}
    response = client.post(f"{UPDATE}/solve", json=body)
    assert response.status_code == 422
    assert "no worker can take the model update" in _detail(response)


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"policy": "greedy"}, "policy"),
        ({"models": "../etc"}, "models"),
        ({"models": "a/b"}, "models"),
        ({"models": ".."}, "models"),
        ({"n_samples": 0}, "n_samples"),
        ({"n_samples": 10_000_001}, "n_samples"),
        ({"workers": []}, "workers"),
        ({"ps_state": {"cpu": 101}}, "cpu"),
        ({"extra": 1}, "extra"),
        ({"policy": "deep-edge-goodput"}, "noise_scale"),
        ({"policy": "deep-edge-goodput", "noise_scale": 0.0}, "noise_scale"),
        ({"noise_scale": "400"}, "noise_scale"),
    ],
)
def test_invalid_solve_requests_are_422(
    client: TestClient, change: dict[str, Any], where: str
) -> None:
    response = client.post(f"{UPDATE}/solve", json=_testbed(**change))
    assert response.status_code == 422
    assert where in response.text


def test_duplicate_workers_and_too_many_workers_are_422(client: TestClient) -> None:
    twice = [_worker("a", "jetson-nano"), _worker("a", "jetson-nano")]
    response = client.post(f"{UPDATE}/solve", json={"n_samples": 10, "workers": twice})
    assert response.status_code == 422 and "unique" in response.text
    many = [{"device": f"d{i}", "device_type": "jetson-nano"} for i in range(1025)]
    response = client.post(f"{UPDATE}/solve", json={"n_samples": 10, "workers": many})
    assert response.status_code in (413, 422)  # the body limit may answer first


@pytest.mark.parametrize(
    ("change", "detail"),
    [
        ({"models": "missing"}, "models: no models directory 'missing'"),
        ({"b_min": 64}, "user_batch"),
        ({"workers": [_worker("x", "jetson-nope")]}, "unknown device type 'jetson-nope'"),
    ],
)
def test_solver_errors_name_the_field(
    client: TestClient, change: dict[str, Any], detail: str
) -> None:
    response = client.post(f"{UPDATE}/solve", json=_testbed(**change))
    assert response.status_code == 422
    assert detail in _detail(response)


def test_a_models_directory_without_the_device_type_is_422(
    client: TestClient, tmp_path: Path
) -> None:
    (tmp_path / "models" / "mine" / "jetson-tx2").mkdir(parents=True)
    response = client.post(f"{UPDATE}/solve", json=_testbed(models="mine"))
    assert response.status_code == 422
    assert "none for device type 'jetson-nano'" in _detail(response)


def test_launch_queues_an_update_job(client: TestClient, backend: JobManager) -> None:
    body = {
        "shards": {"tx2": 900, "nano": 537},
        "batch_sizes": {"tx2": 64, "nano": 32},
        "mode": "sync",
        "epochs": 3,
        "learning_rate": 0.05,
        "lr_reference_batch": 64,
        "seed": 7,
    }
    response = client.post(f"{UPDATE}/launch", json=body)
    assert response.status_code == 201, response.text
    job = response.json()
    assert job["state"] == "pending" and job["kind"] == "update"
    stored = backend.store.job(job["id"])
    assert stored is not None
    spec = stored.spec
    assert spec["workers"] == ["tx2", "nano"] and spec["mode"] == "sync" and spec["epochs"] == 3
    assert spec["shards"] == {"tx2": 900, "nano": 537} and spec["seed"] == 7
    assert spec["lr_reference_batch"] == 64
    bad = client.post(f"{UPDATE}/launch", json={**body, "lr_reference_batch": -1})
    assert bad.status_code == 422 and "lr_reference_batch" in bad.text
    task = client.get(f"{UPDATE}/tasks/{job['id']}")
    assert task.status_code == 200 and task.json() == job


def test_launch_refuses_unknown_devices_and_passes_the_target_accuracy(
        client: TestClient, backend: JobManager) -> None:
    response = client.post(f"{UPDATE}/launch", json={"shards": {"ghost": 10}})
    assert response.status_code == 422 and "ghost" in _detail(response)
    body = {"shards": {"tx2": 10}, "target_accuracy": 1.5}
    assert client.post(f"{UPDATE}/launch", json=body).status_code == 422
    body = {"shards": {"tx2": 1437}, "target_accuracy": 0.9}
    job = client.post(f"{UPDATE}/launch", json=body).json()
    stored = backend.store.job(job["id"])
    assert stored is not None and stored.spec["target_accuracy"] == 0.9


def test_unknown_task_is_404(client: TestClient, backend: JobManager) -> None:
    assert client.get(f"{UPDATE}/tasks/job-9999").status_code == 404
    assert client.get(f"{UPDATE}/tasks/bad id!").status_code in (404, 422)
    other = backend.submit("continual", {"streams": 1})
    assert client.get(f"{UPDATE}/tasks/{other.id}").status_code == 404  # not an update


class _Devices:
    """Device metrics as a device agent would report them."""

    def device_metrics(self) -> dict[str, dict[str, float]]:
        return {"tx2": {"cpu_percent": 12.5, "age_seconds": 0.4}}

    def inject_fault(self, kind: str, device: str, peer: str | None,
                     seconds: float) -> dict[str, Any]:
        raise AssertionError("not used")


def test_monitor_shows_strikes_metrics_and_active_jobs(cluster: Cluster, tmp_path: Path) -> None:
    manager = JobManager(Store(tmp_path / "m.db"), job_kinds(discover_problems()), cluster,
                         state_dir=tmp_path, devices=_Devices())
    with _client(manager, tmp_path, TOKEN) as client:
        view = client.get(f"{UPDATE}/monitor").json()
        assert view["strikes"] == {} and view["struck_out"] == [] and view["active_jobs"] == []
        assert view["metrics"]["tx2"]["cpu_percent"] == 12.5
        for device in ("nano", "nano", "nano", "tx2"):
            manager.ledger.strike(device)
        job = manager.submit("update", {"epochs": 1})
        view = client.get(f"{UPDATE}/monitor").json()
    assert view["strikes"] == {"nano": 3, "tx2": 1}
    assert view["struck_out"] == ["nano"] and view["strike_limit"] == 3
    assert view["active_jobs"] == [job.id]


def test_every_update_route_needs_the_token(backend: JobManager, tmp_path: Path) -> None:
    # Read the routes off the router: recent FastAPI wraps included routers in app.routes.
    router = update_router(tmp_path, tmp_path)
    routes = [
        (m, f"/api/v1{r.path}")
        for r in router.routes
        if isinstance(r, APIRoute)
        for m in sorted(r.methods or ())
    ]
    assert len(routes) == 6
    with _client(backend, tmp_path, None) as anon:
        for method, path in routes:
            path = path.replace("{job_id}", "job-0001").replace("{profile_id}", "p1")
            response = anon.request(method, path)
            assert response.status_code == 401, (method, path)
            assert response.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize("name", ["../x", "a/b", "a.csv", "", "x" * 65])
def test_profile_names_must_be_plain(client: TestClient, name: str) -> None:
    response = client.post(f"{UPDATE}/profile", json={"name": name})
    assert response.status_code == 422


def _wait(client: TestClient, profile_id: str) -> dict[str, Any]:
    # generous: the run's thread imports the profiler (torch) first, seconds on a loaded host
    deadline = time.monotonic() + 120.0
    while time.monotonic() < deadline:
        run: dict[str, Any] = client.get(f"{UPDATE}/profile/{profile_id}").json()
        if run["state"] != "running":
            return run
        time.sleep(0.01)
    raise AssertionError("the profile run did not finish")


def test_one_profile_at_a_time(
    client: TestClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release, seen = threading.Event(), []

    def fake(
        output: Path, config: profiler.ProfileConfig, progress: profiler.ProgressFn | None = None
    ) -> profiler.ProfileResult:
        seen.append((output, config))
        if progress:
            progress(1, 2, "cpu=0/mem=0")
        release.wait(120.0)  # set by the test; the bound only frees a failed test's thread
        return profiler.ProfileResult(output, 2, 0, ())

    monkeypatch.setattr(profiler, "profile", fake)
    first = client.post(f"{UPDATE}/profile", json={"name": "host"})
    assert first.status_code == 202 and first.json()["state"] == "running"
    assert client.post(f"{UPDATE}/profile", json={"name": "other"}).status_code == 409
    release.set()
    run = _wait(client, first.json()["profile_id"])
    assert run["state"] == "succeeded" and run["errors"] == [] and run["done"] == 1
    assert seen[0][0] == tmp_path / "profiles" / "host.csv"
    assert seen[0][1] == profiler.quick_config("host-x86")
    assert client.post(f"{UPDATE}/profile", json={"name": "again"}).status_code == 202


def test_a_failed_profile_reports_its_error(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fake(*args: Any, **kwargs: Any) -> profiler.ProfileResult:
        raise EdgewiseError("stress-ng not found")

    monkeypatch.setattr(profiler, "profile", fake)
    started = client.post(f"{UPDATE}/profile", json={"name": "host"}).json()
    run = _wait(client, started["profile_id"])
    assert run["state"] == "failed" and run["errors"] == ["stress-ng not found"]
    assert client.get(f"{UPDATE}/profile/unknown").status_code == 404


def test_http_update_jobs_default_to_the_engines_loop() -> None:
    """The schemas take the loops from ``runtime.loops`` (no engine, no PyTorch): their
    default must be the one the engine's ``TrainConfig`` trains with."""
    from edgewise.runtime.plan import TrainConfig

    DEFAULT_MODE = TrainConfig().mode
    from edgewise.update.api_schemas import LaunchRequest, TrainJobSpec

    assert LaunchRequest.model_fields["mode"].default == DEFAULT_MODE
    assert TrainJobSpec.model_fields["mode"].default == DEFAULT_MODE


def test_the_launcher_passes_the_wire_dtype_to_the_job_and_refuses_others() -> None:
    """A launch's ``wire_dtype`` reaches the job's spec (what the engine's TrainConfig gets);
    the default is the engine's; a dtype the wire does not know is refused."""
    from pydantic import ValidationError

    from edgewise.runtime.plan import TrainConfig
    from edgewise.update.api import _job_spec
    from edgewise.update.api_schemas import LaunchRequest, TrainJobSpec

    assert TrainJobSpec.model_fields["wire_dtype"].default == TrainConfig().wire_dtype
    launch = LaunchRequest(shards={"nano-0": 100, "nano-1": 100}, wire_dtype="bfloat16")
    assert _job_spec(launch).wire_dtype == "bfloat16"
    with pytest.raises(ValidationError, match="wire_dtype"):
        LaunchRequest(shards={"nano-0": 100}, wire_dtype="int4")  # type: ignore[arg-type]
    assert LaunchRequest(shards={"nano-0": 100}, mode="sync", wire_dtype="int8").wire_dtype \
        == "int8"
    for schema in (LaunchRequest, TrainJobSpec):  # 8 bits are for the sync loop's changes
        with pytest.raises(ValidationError, match="int8 needs the sync loop"):
            schema(shards={"nano-0": 100}, mode="async", wire_dtype="int8")  # type: ignore[call-arg]


def test_the_launcher_passes_where_the_server_lives_to_the_job_and_refuses_others() -> None:
    """A launch's ``ps_shards`` reaches the job's spec; both default to the engine's (auto);
    a sharded server is the sync loop's alone, and a value not auto, one or workers is
    refused."""
    from pydantic import ValidationError

    from edgewise.runtime.plan import TrainConfig
    from edgewise.update.api import _job_spec
    from edgewise.update.api_schemas import LaunchRequest, TrainJobSpec

    assert TrainJobSpec.model_fields["ps_shards"].default == TrainConfig().ps_shards == "auto"
    launch = LaunchRequest(shards={"nano-0": 100, "nano-1": 100}, ps_shards="one")
    assert _job_spec(launch).ps_shards == "one"
    with pytest.raises(ValidationError, match="ps_shards"):
        LaunchRequest(shards={"nano-0": 100}, ps_shards="all")  # type: ignore[arg-type]
    for schema in (LaunchRequest, TrainJobSpec):
        with pytest.raises(ValidationError, match="workers needs the sync loop"):
            schema(shards={"nano-0": 100}, mode="async", ps_shards="workers")  # type: ignore[call-arg]


def test_the_launcher_passes_the_evaluation_to_the_job_and_refuses_others() -> None:
    """A launch's ``evaluation`` reaches the job's spec; both default to the engine's; a
    value that is neither after nor beside is refused."""
    from pydantic import ValidationError

    from edgewise.runtime.plan import TrainConfig
    from edgewise.update.api import _job_spec
    from edgewise.update.api_schemas import LaunchRequest, TrainJobSpec

    for schema in (LaunchRequest, TrainJobSpec):
        assert schema.model_fields["evaluation"].default == TrainConfig().evaluation
        with pytest.raises(ValidationError, match="evaluation"):
            schema(shards={"nano-0": 100}, evaluation="sideways")  # type: ignore[call-arg]
    launch = LaunchRequest(shards={"nano-0": 100}, evaluation="beside")
    assert _job_spec(launch).evaluation == "beside"


def test_an_update_job_plans_with_goodput_and_its_noise_scale(cluster: Cluster) -> None:
    """A job's spec takes ``deep-edge-goodput`` with the noise scale it plans with (and a
    re-plan after a fault keeps it, in the problem); without one the spec is refused."""
    from pydantic import ValidationError

    from edgewise.update.api_jobs import build_plan
    from edgewise.update.api_schemas import TrainJobSpec

    workers = [d.name for d in cluster.devices if d.has_role("worker")]
    spec = TrainJobSpec(policy="deep-edge-goodput", noise_scale=250.0)
    planned = build_plan(cluster, spec, workers)
    assert planned.problem.noise_scale == 250.0
    assert planned.policy_plan is not None and planned.policy_plan.policy == "deep-edge-goodput"
    assert sum(planned.train.shards.values()) == 1437
    with pytest.raises(ValidationError, match="noise_scale"):
        TrainJobSpec(policy="deep-edge-goodput")
    given = TrainJobSpec(policy="deep-edge-goodput", shards=dict.fromkeys(workers[:1], 1437))
    assert given.noise_scale is None  # given shards: no policy plans, no noise scale needed
