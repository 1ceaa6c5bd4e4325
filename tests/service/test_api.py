"""The manager API over the dry-run backend: auth on every route, validation, limits, jobs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

import pytest
from fastapi import APIRouter, Depends
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from edgewise.service import InMemoryBackend, JobBackend, create_app, get_backend

JOBS = "/api/v1/jobs"
TOKEN = "test-token-0123456789abcdef"
MAX_BODY = 4096


@pytest.fixture
def client(backend: InMemoryBackend) -> Iterator[TestClient]:
    app = create_app(backend, TOKEN, max_body_bytes=MAX_BODY)
    with TestClient(app, headers={"Authorization": f"Bearer {TOKEN}"}) as c:
        yield c


@pytest.fixture
def anon(backend: InMemoryBackend) -> Iterator[TestClient]:
    with TestClient(create_app(backend, TOKEN, max_body_bytes=MAX_BODY)) as c:
        yield c


def _routes(client: TestClient) -> list[tuple[str, str]]:
    """Every route of the app, included routers' too (read from the OpenAPI document)."""
    out = []
    for route in client.app.routes:  # type: ignore[attr-defined]
        if isinstance(route, APIRoute):
            path = route.path.replace("{job_id}", "job-0001")
            out += [(method, path) for method in sorted(route.methods or ())]
    schema = client.app.openapi()  # type: ignore[attr-defined]
    for path, item in schema["paths"].items():
        out += [(m.upper(), path.replace("{job_id}", "job-0001")) for m in item]
    return sorted(set(out))


def test_every_route_refuses_a_request_without_a_token(anon: TestClient) -> None:
    routes = _routes(anon)
    assert ("GET", "/openapi.json") in routes and ("GET", "/docs") in routes
    for method, path in routes:
        response = anon.request(method, path)
        assert response.status_code == 401, (method, path)
        assert response.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize(
    "header",
    [f"Bearer {TOKEN}x", "Bearer wrong", f"Basic {TOKEN}", TOKEN, "Bearer", f"Bearer  {TOKEN} x"],
)
@pytest.mark.parametrize("path", ["/api/v1/health", "/openapi.json", "/docs"])
def test_wrong_or_malformed_tokens_are_refused(anon: TestClient, header: str, path: str) -> None:
    response = anon.get(path, headers={"Authorization": header})
    assert response.status_code == 401
    assert response.json() == {"detail": "missing or invalid bearer token"}


def test_non_ascii_token_is_a_401_not_a_crash(anon: TestClient) -> None:
    response = anon.get("/api/v1/health", headers={"Authorization": "Bearer t\u00e9st".encode()})
    assert response.status_code == 401


def test_health_cluster_and_docs_with_the_token(client: TestClient) -> None:
    assert client.get("/api/v1/health").json() == {"status": "ok"}
    summary = client.get("/api/v1/cluster").json()
    assert summary["name"] == "lab"
    assert [d["name"] for d in summary["devices"]] == ["tx2", "nano", "ps"]
    assert summary["devices"][2]["roles"] == ["parameter-server"]
    assert summary["links"] == [{"a": "tx2", "b": "ps", "bandwidth_mbps": 100.0, "latency_ms": 0.5}]
    assert client.get("/docs").status_code == 200


def test_openapi_lists_the_job_routes_and_the_bearer_scheme(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    paths = spec["paths"]
    assert set(paths[JOBS]) == {"get", "post"}
    assert "get" in paths[JOBS + "/{job_id}"] and "post" in paths[JOBS + "/{job_id}/stop"]
    assert spec["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    assert "/openapi.json" not in paths


def test_device_metrics_report_their_age(client: TestClient, backend: InMemoryBackend) -> None:
    backend.record_metrics("nano", {"cpu_percent": 40.0, "memory_percent": 55.5})
    assert client.get("/api/v1/devices/metrics").json() == {
        "nano": {"cpu_percent": 40.0, "memory_percent": 55.5, "age_seconds": 0.0}
    }


def test_job_lifecycle(client: TestClient, backend: InMemoryBackend) -> None:
    started = client.post(JOBS, json={"epochs": 3, "shards": {"tx2": 600, "nano": 400}})
    assert started.status_code == 201
    job = started.json()
    assert job["state"] == "pending" and job["epochs"] == 3 and job["epoch"] == 0
    assert job["strikes"] == {"tx2": 0, "nano": 0}  # default workers: the worker-role devices
    job_id = job["job_id"]
    assert client.get(f"{JOBS}/{job_id}").json() == job
    assert [j["job_id"] for j in client.get(JOBS).json()] == [job_id]
    stopped = client.post(f"{JOBS}/{job_id}/stop").json()
    assert stopped["state"] == "stopped" and stopped["finished_at"] == 1000.0
    assert client.post(f"{JOBS}/{job_id}/stop").json()["state"] == "stopped"
    spec = backend.job_spec(job_id)
    assert spec is not None and spec.mode == "async" and spec.model == "digits-cnn"


def test_unknown_and_malformed_job_ids(client: TestClient) -> None:
    assert client.get(f"{JOBS}/job-9999").status_code == 404
    assert client.post(f"{JOBS}/job-9999/stop").status_code == 404
    assert client.get(f"{JOBS}/bad.id!").status_code == 422
    assert client.get(f"{JOBS}/{'x' * 65}").status_code == 422


@pytest.mark.parametrize(
    "body",
    [
        {"epochs": 3, "gpus": 2},
        {"epochs": 0},
        {"epochs": 101},
        {"epochs": "3"},
        {"mode": "semi-sync"},
        {"model": "resnet50"},
        {"learning_rate": 0},
        {"learning_rate": 11},
        {"shards": {"tx2": 0}},
        {"batch_sizes": {"tx2": 5000}},
        {"workers": []},
        {"workers": ["tx2", "tx2"]},
    ],
)
def test_invalid_specs_are_422(client: TestClient, body: dict[str, object]) -> None:
    response = client.post(JOBS, json=body)
    assert response.status_code == 422
    assert client.get(JOBS).json() == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"workers": ["tx2", "ghost"]}, "workers"),
        ({"shards": {"ghost": 10}}, "shards"),
        ({"batch_sizes": {"ghost": 8}}, "batch_sizes"),
        ({"workers": ["tx2"], "batch_sizes": {"nano": 8}}, "batch_sizes"),
    ],
)
def test_unknown_devices_are_422_naming_the_field(
    client: TestClient, body: dict[str, object], field: str
) -> None:
    response = client.post(JOBS, json=body)
    assert response.status_code == 422
    assert response.json()["detail"].startswith(f"{field}: ")


def test_body_over_the_limit_is_413_by_content_length(client: TestClient) -> None:
    response = client.post(JOBS, content=b"{" + b" " * MAX_BODY + b"}")
    assert response.status_code == 413
    assert client.get(JOBS).json() == []


def test_chunked_body_over_the_limit_is_413(client: TestClient) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"epochs": 2'
        for _ in range(MAX_BODY // 512 + 1):
            yield b" " * 512
        yield b"}"

    response = client.post(JOBS, content=chunks(), headers={"Content-Type": "application/json"})
    assert response.status_code == 413
    assert client.get(JOBS).json() == []


def test_chunked_body_under_the_limit_is_accepted(client: TestClient) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"epochs": '
        yield b"2}"

    response = client.post(JOBS, content=chunks(), headers={"Content-Type": "application/json"})
    assert response.status_code == 201


def test_invalid_content_length_is_400(backend: InMemoryBackend) -> None:
    app = create_app(backend, TOKEN)
    with TestClient(app) as c:
        response = c.post(JOBS, content=b"{}", headers={"Content-Length": "abc"})
    assert response.status_code == 400


def test_extra_routers_get_the_prefix_the_auth_and_the_backend(backend: InMemoryBackend) -> None:
    extra = APIRouter()

    @extra.get("/sites")
    def sites(found: Annotated[JobBackend, Depends(get_backend)]) -> dict[str, object]:
        return {"cluster": found.cluster_summary()["name"]}

    app = create_app(backend, TOKEN, routers=[extra])
    with TestClient(app) as c:
        assert c.get("/api/v1/sites").status_code == 401
        ok = c.get("/api/v1/sites", headers={"Authorization": f"Bearer {TOKEN}"})
    assert ok.json() == {"cluster": "lab"}
