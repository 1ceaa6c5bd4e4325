"""The manager API over a dry-run manager: the token gate, the error contract, jobs of
every kind, bodies and limits, Prometheus metrics and the dashboard's files."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Annotated, Any

import pytest
from fastapi import APIRouter, Depends
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from edgewise.jobs import JobBackend, get_backend
from edgewise.service import JobManager, create_app
from edgewise.service.app import Limits
from edgewise.service.errors import ValidationProblems

JOBS = "/api/v1/jobs"
TOKEN = "test-token-0123456789abcdef"
SCRAPE = "scrape-token-abcdef"
MAX_BODY = 4096
KINDS = {"update", "pipeline", "continual", "modelparallel"}  # the test cluster has no sites


@pytest.fixture
def app(backend: JobManager) -> Any:
    return create_app(backend, TOKEN, scrape_token=SCRAPE, limits=Limits(max_body_bytes=MAX_BODY))


@pytest.fixture
def client(app: Any) -> Iterator[TestClient]:
    with TestClient(app, headers={"Authorization": f"Bearer {TOKEN}"}) as c:
        yield c


@pytest.fixture
def anon(app: Any) -> Iterator[TestClient]:
    with TestClient(app) as c:
        yield c


def _operations(client: TestClient) -> list[tuple[str, str]]:
    """Every (method, path) of the OpenAPI document, with path parameters filled in."""
    spec = client.app.openapi()  # type: ignore[attr-defined]
    return sorted((m.upper(), p.replace("{job_id}", "job-0001").replace("{plan_id}", "0" * 32)
                   .replace("{profile_id}", "abc")) for p, item in spec["paths"].items()
                  for m in item)


def test_every_route_and_every_unknown_path_is_401_without_the_token(anon: TestClient) -> None:
    routes = _operations(anon)
    assert len(routes) > 20
    probes = [*routes, ("GET", "/openapi.json"), ("GET", "/docs"), ("GET", "/metrics"),
              ("GET", "/api/v1/no-such-route"), ("DELETE", JOBS), ("PUT", "/api/v1/health"),
              ("GET", "/admin"), ("POST", "/"), ("GET", "/api/v1/jobs/job-0001/nothing")]
    for method, path in probes:
        response = anon.request(method, path)
        assert response.status_code == 401, (method, path)  # no route or method leaks
        assert response.headers["www-authenticate"] == "Bearer"
        assert response.json() == {"detail": "missing or invalid bearer token"}


@pytest.mark.parametrize(
    "header", [f"Bearer {TOKEN}x", "Bearer wrong", f"Basic {TOKEN}", TOKEN, "Bearer",
               f"Bearer  {TOKEN} x", f"Bearer {SCRAPE}"])
@pytest.mark.parametrize("path", ["/api/v1/health", "/openapi.json", "/docs", JOBS])
def test_wrong_or_malformed_tokens_are_refused(anon: TestClient, header: str, path: str) -> None:
    assert anon.get(path, headers={"Authorization": header}).status_code == 401


def test_non_ascii_token_is_a_401_not_a_crash(anon: TestClient) -> None:
    response = anon.get("/api/v1/health", headers={"Authorization": "Bearer t\u00e9st".encode()})
    assert response.status_code == 401


def test_the_dashboard_is_served_without_a_token_and_holds_no_data(anon: TestClient) -> None:
    page = anon.get("/")
    assert page.status_code == 200 and "<html" in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["x-frame-options"] == "DENY"
    for asset in ("/ui/app.js", "/ui/app.css", "/ui/vendor/uPlot.iife.min.js"):
        assert anon.get(asset).status_code == 200, asset
    assert anon.get("/ui/../manager.db").status_code in (401, 404)
    links = re.findall(r'(?:src|href)="([^"#]+)"', page.text)
    assert links and all(link.startswith("/ui/") for link in links)  # nothing from a CDN


def test_health_cluster_and_docs_with_the_token(client: TestClient) -> None:
    assert client.get("/api/v1/health").json() == {"status": "ok"}
    summary = client.get("/api/v1/cluster").json()
    assert [d["name"] for d in summary["devices"]] == ["tx2", "nano", "ps"]
    assert [d["port_mbps"] for d in summary["devices"]] == [None, None, None]  # none given
    assert summary["links"] == [{"a": "tx2", "b": "ps", "bandwidth_mbps": 100.0,
                                 "latency_ms": 0.5}]
    assert client.get("/docs").status_code == 200
    assert client.get("/api/v1/strikes").json() == {"strikes": {}, "limit": 3}


def test_a_repaired_devices_strikes_are_cleared_and_stay_cleared(
        client: TestClient, backend: JobManager) -> None:
    """Three strikes put nano out of every plan; DELETE /strikes/nano brings it back, with
    a cluster event, in the manager's store (a restarted manager reads 0); an unknown
    device is 404 and changes nothing."""
    for _ in range(3):
        backend.ledger.strike("nano")
    backend.ledger.strike("tx2")
    assert backend.ledger.struck_out() == {"nano"}

    cleared = client.delete("/api/v1/strikes/nano")

    assert cleared.status_code == 200, cleared.text
    assert cleared.json() == {"strikes": {"tx2": 1}, "limit": 3}
    assert backend.ledger.struck_out() == frozenset()
    assert backend.store.strikes() == {"tx2": 1}  # as if never struck, after a restart too
    event = [e for e in client.get("/api/v1/events").json() if e["kind"] == "strikes-cleared"]
    assert [e["data"] for e in event] == [{"device": "nano", "strikes": 0, "cleared": 3}]
    missing = client.delete("/api/v1/strikes/ghost")
    assert missing.status_code == 404 and "ghost" in missing.json()["detail"]
    assert client.get("/api/v1/strikes").json() == {"strikes": {"tx2": 1}, "limit": 3}


def test_openapi_declares_every_error_on_every_operation(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    assert spec["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    for path, item in spec["paths"].items():
        for method, operation in item.items():
            declared = set(operation["responses"])
            assert {"401", "404", "409", "413", "422"} <= declared, (method, path)
            schema = operation["responses"]["422"]["content"]["application/json"]["schema"]
            assert schema == {"$ref": "#/components/schemas/ValidationProblems"}
    assert set(spec["paths"][JOBS]) == {"get", "post"}


def test_a_405_lists_every_allowed_method(client: TestClient) -> None:
    response = client.delete(JOBS)
    assert response.status_code == 405
    assert response.headers["allow"] == "GET, POST"
    assert client.put("/api/v1/jobs/job-0001/stop").headers["allow"] == "POST"


@pytest.mark.parametrize("bad", [b"NaN", b"Infinity", b"-Infinity", b"1e400", b"-1e400"])
def test_non_finite_numbers_are_a_422_not_a_crash(client: TestClient, bad: bytes) -> None:
    body = b'{"kind": "update", "spec": {"learning_rate": ' + bad + b"}}"
    response = client.post(JOBS, content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 422
    problems = ValidationProblems.model_validate(response.json())
    assert problems.detail[0].loc[-1] == "learning_rate"
    plan = b'{"accelerators": ' + bad + b', "window_s": 1, "streams": []}'
    answer = client.post("/api/v1/continual/plan", content=plan,
                         headers={"Content-Type": "application/json"})
    assert answer.status_code == 422
    ValidationProblems.model_validate(answer.json())


def test_deeply_nested_json_is_a_400_and_a_huge_body_a_quick_413(backend: JobManager) -> None:
    app = create_app(backend, TOKEN)  # the default limit: 64 KiB
    with TestClient(app, headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        deep = client.post(JOBS, content=b"[" * 10_000 + b"]" * 10_000,
                           headers={"Content-Type": "application/json"})
        assert deep.status_code == 400 and "detail" in deep.json()
        huge = client.post(JOBS, content=b"x" * 10_000_000)
        assert huge.status_code == 413
    assert backend.jobs() == []


def test_lone_surrogates_are_a_422_not_a_crash(client: TestClient) -> None:
    headers = {"Content-Type": "application/json"}
    for body in (b'{"kind": "update", "spec": {"workers": ["\\ud800"]}}',
                 b'{"kind": "update", "spec": {"shards": {"\\udfff": 5}}}',
                 b'{"kind": "\\ud800", "spec": {}}'):
        response = client.post(JOBS, content=body, headers=headers)
        assert response.status_code == 422, body
        ValidationProblems.model_validate(response.json())
        response.content.decode("utf-8")


def test_a_request_the_cluster_refuses_is_a_422_in_the_documented_form(
        client: TestClient) -> None:
    response = client.post(JOBS, json={"kind": "update", "spec": {"workers": ["tx2", "ghost"]}})
    assert response.status_code == 422
    problem = ValidationProblems.model_validate(response.json()).detail[0]
    assert problem.loc == ["body", "workers"] and "ghost" in problem.msg
    bad = client.post(JOBS, json={"kind": "update",
                                  "spec": {"workers": ["tx2"], "shards": {"tx2": 100}}})
    assert bad.status_code == 422 and "1437" in bad.text


def test_jobs_of_every_kind_from_their_examples(client: TestClient, backend: JobManager) -> None:
    examples = client.get(f"{JOBS}/examples").json()
    assert {e["kind"] for e in examples} == KINDS
    ids = []
    for example in examples:
        created = client.post(JOBS, json={"kind": example["kind"], "spec": example["spec"]})
        assert created.status_code == 201, created.text
        job = created.json()
        assert job["state"] == "pending" and job["kind"] == example["kind"]
        ids.append(job["id"])
    assert [j["id"] for j in client.get(JOBS).json()["jobs"]] == ids[::-1]  # newest first
    updates = [i for i, e in zip(ids, examples, strict=True) if e["kind"] == "update"]
    page = client.get(JOBS, params={"kind": "update"}).json()
    assert [j["id"] for j in page["jobs"]] == updates[::-1] and not page["has_more"]
    first = ids[0]
    assert client.get(f"{JOBS}/{first}").json()["id"] == first
    assert client.get(f"{JOBS}/{first}/plan").status_code == 404  # a dry run plans nothing
    assert [e["kind"] for e in client.get(f"{JOBS}/{first}/events").json()] == ["submitted"]
    assert client.get(f"{JOBS}/{first}/metrics").json() == {}
    stopped = client.post(f"{JOBS}/{first}/stop").json()
    assert stopped["state"] == "stopped" and stopped["finished_at"] is not None
    assert client.post(f"{JOBS}/{first}/stop").json()["state"] == "stopped"


def test_unknown_and_malformed_job_ids(client: TestClient) -> None:
    for path in ("", "/plan", "/events", "/metrics"):
        assert client.get(f"{JOBS}/job-9999{path}").status_code == 404
    assert client.post(f"{JOBS}/job-9999/stop").status_code == 404
    assert client.get(f"{JOBS}/bad.id!").status_code == 422
    assert client.get(f"{JOBS}/{'x' * 65}").status_code == 422


@pytest.mark.parametrize("spec", [
    {"epochs": 3, "gpus": 2}, {"epochs": 0}, {"epochs": 101}, {"epochs": "3"},
    {"mode": "semi-sync"}, {"model": "resnet50"}, {"learning_rate": 0}, {"learning_rate": 11},
    {"shards": {"tx2": 0}}, {"batch_sizes": {"tx2": 5000}}, {"workers": []},
    {"workers": ["tx2", "tx2"]}])
def test_invalid_update_specs_are_422(client: TestClient, spec: dict[str, object]) -> None:
    assert client.post(JOBS, json={"kind": "update", "spec": spec}).status_code == 422
    assert client.get(JOBS).json()["jobs"] == []


def test_bodies_over_the_limit_and_bad_lengths(client: TestClient) -> None:
    assert client.post(JOBS, content=b"{" + b" " * MAX_BODY + b"}").status_code == 413

    def chunks(n: int) -> Iterator[bytes]:
        yield b'{"kind": "update", "spec": {"epochs": 2}'
        for _ in range(n):
            yield b" " * 512
        yield b"}"

    headers = {"Content-Type": "application/json"}
    assert client.post(JOBS, content=chunks(MAX_BODY // 512 + 1),
                       headers=headers).status_code == 413
    assert client.post(JOBS, content=chunks(1), headers=headers).status_code == 201
    bad = client.post(JOBS, content=b"{}", headers={"Content-Length": "abc"})
    assert bad.status_code == 400 and bad.json() == {"detail": "invalid Content-Length header"}


def test_metrics_with_either_token_in_the_exposition_format(app: Any, anon: TestClient,
                                                           backend: JobManager) -> None:
    backend.submit("update", {"epochs": 1})
    assert anon.get("/metrics").status_code == 401
    for token in (TOKEN, SCRAPE):
        response = anon.get("/metrics", headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/plain")
        families = {f.name: f for f in text_string_to_metric_families(response.text)}
        assert {"edgewise_jobs", "edgewise_device_strikes", "edgewise_device_cpu_percent",
                "edgewise_pipeline_request_latency_seconds",
                "edgewise_training_validation_accuracy"} <= set(families)
        pending = [s.value for s in families["edgewise_jobs"].samples
                   if s.labels == {"kind": "update", "state": "pending"}]
        assert pending == [1.0]
    assert anon.get(JOBS, headers={"Authorization": f"Bearer {SCRAPE}"}).status_code == 401


def test_extra_routers_get_the_prefix_the_auth_and_the_backend(backend: JobManager) -> None:
    extra = APIRouter()

    @extra.get("/extra")
    def extra_route(found: Annotated[JobBackend, Depends(get_backend)]) -> dict[str, object]:
        return {"cluster": found.cluster_summary()["name"]}

    app = create_app(backend, TOKEN, routers=[extra])
    with TestClient(app) as c:
        assert c.get("/api/v1/extra").status_code == 401
        ok = c.get("/api/v1/extra", headers={"Authorization": f"Bearer {TOKEN}"})
    assert ok.json() == {"cluster": "lab"}
