"""Bounded answers: the jobs list in pages (newest first, each job exactly once), finished
jobs pruned (never an active one) and counted in /metrics, exact integer bounds in the
OpenAPI document, bounded model arguments."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from edgewise.service import JobManager, create_app
from edgewise.service.retention import DAY_S, Pruner, Retention
from edgewise.service.store import Store

TOKEN = "test-token-0123456789abcdef"
JOBS = "/api/v1/jobs"
FINAL = ("succeeded", "failed", "stopped", "interrupted")


@pytest.fixture
def client(backend: JobManager) -> Iterator[TestClient]:
    with TestClient(create_app(backend, TOKEN),
                    headers={"Authorization": f"Bearer {TOKEN}"}) as c:
        yield c


def _fill(store: Store, n: int, now: float = 1000.0) -> list[str]:
    """``n`` jobs, alternating kinds, every third one still running, the others ended."""
    ids = []
    for k in range(n):
        row = store.create_job("update" if k % 2 else "pipeline", {"k": k}, now=now + k)
        state = "running" if k % 3 == 0 else FINAL[k % 4]
        store.update_job(row.id, state=state,
                         finished_at=None if state == "running" else now + k + 0.5)
        ids.append(row.id)
    return ids


def _pages(client: TestClient, **params: Any) -> list[dict[str, Any]]:
    pages, cursor = [], None
    for _ in range(1000):  # bounded: far more pages than any test makes
        query = {**params, **({"cursor": cursor} if cursor else {})}
        answer = client.get(JOBS, params=query)
        assert answer.status_code == 200, answer.text
        pages.append(answer.json())
        cursor = pages[-1]["next_cursor"]
        assert pages[-1]["has_more"] == (cursor is not None)
        if cursor is None:
            return pages
    raise AssertionError("the pages did not end")


def test_pages_return_every_job_exactly_once_newest_first(client: TestClient,
                                                          backend: JobManager) -> None:
    ids = _fill(backend.store, 250)
    pages = _pages(client, limit=37)
    seen = [j["id"] for page in pages for j in page["jobs"]]
    assert seen == ids[::-1]
    assert [len(p["jobs"]) for p in pages] == [37] * 6 + [28]
    default = client.get(JOBS).json()
    assert [j["id"] for j in default["jobs"]] == ids[::-1][:100] and default["has_more"]
    updates = [j["id"] for page in _pages(client, limit=10, kind="update", state="failed")
               for j in page["jobs"]]
    assert updates == [i for k, i in enumerate(ids) if k % 2 and k % 3 and k % 4 == 1][::-1]


def test_jobs_submitted_between_pages_do_not_shift_them(client: TestClient,
                                                        backend: JobManager) -> None:
    ids = _fill(backend.store, 30)
    first = client.get(JOBS, params={"limit": 20}).json()
    _fill(backend.store, 5)  # newer jobs arrive meanwhile
    rest = client.get(JOBS, params={"limit": 20, "cursor": first["next_cursor"]}).json()
    assert [j["id"] for j in first["jobs"] + rest["jobs"]] == ids[::-1]
    assert not rest["has_more"] and rest["next_cursor"] is None


@pytest.mark.parametrize("params", [{"limit": 0}, {"limit": 1001}, {"cursor": "job-0001"},
                                    {"cursor": "-1"}, {"cursor": "9" * 19}])
def test_bad_page_parameters_are_a_422(client: TestClient, params: dict[str, Any]) -> None:
    assert client.get(JOBS, params=params).status_code == 422


def test_pruning_keeps_the_newest_finished_and_every_active_job(tmp_path: Path) -> None:
    store = Store(tmp_path / "jobs.db")
    ids = _fill(store, 30)
    for job_id in ids:
        store.add_event(job_id, "state", "x")
        store.put_metric(job_id, "loss", 1.0, step=1)
        (tmp_path / "jobs" / job_id).mkdir(parents=True)
    active = [i for k, i in enumerate(ids) if k % 3 == 0]
    finished = [i for i in ids if i not in active]
    pruner = Pruner(store, tmp_path, Retention(keep_jobs=5, keep_days=1))
    gone = pruner.prune(busy=[finished[0]], now=1100.0)
    assert sorted(gone) == sorted(finished[1:-5]) and pruner.pruned_total == len(gone)
    left = {j.id for j in store.jobs()}
    assert left == set(active) | set(finished[-5:]) | {finished[0]}
    assert all(store.events(i) == [] and store.metrics(i) == {} for i in gone)
    assert {p.name for p in (tmp_path / "jobs").iterdir()} == set(ids) - set(gone)
    # a day later every finished job is past its age; the running ones stay
    later = pruner.prune(now=1100.0 + DAY_S)
    assert sorted(later) == sorted([*finished[-5:], finished[0]])
    assert {j.id for j in store.jobs()} == set(active)


def test_the_pruned_count_is_in_the_metrics(client: TestClient, backend: JobManager) -> None:
    _fill(backend.store, 12, now=time.time())  # finished just now: none is too old
    backend.pruner = Pruner(backend.store, backend.state_dir, Retention(keep_jobs=2))
    pruned = backend.prune()
    assert len(pruned) == 8 - 2  # 12 jobs, 4 running, the 2 newest finished kept
    body = client.get("/metrics").text
    assert "edgewise_jobs_pruned_total 6.0" in body.splitlines()


def test_retention_limits_are_checked() -> None:
    with pytest.raises(Exception, match="keep_jobs"):
        Retention(keep_jobs=-1)
    with pytest.raises(Exception, match="keep_days"):
        Retention(keep_days=0)


def _integer_bounds(doc: Any) -> Iterator[Any]:
    if isinstance(doc, list):
        for value in doc:
            yield from _integer_bounds(value)
    elif isinstance(doc, dict):
        if doc.get("type") == "integer":
            yield from (doc[k] for k in ("minimum", "maximum", "exclusiveMinimum",
                                         "exclusiveMaximum") if k in doc)
        for value in doc.values():
            yield from _integer_bounds(value)


def test_integer_bounds_are_published_as_exact_integers(client: TestClient) -> None:
    text = client.get("/openapi.json").text
    bounds = list(_integer_bounds(json.loads(text)))
    assert len(bounds) > 20 and all(type(b) is int for b in bounds)
    assert "e+" not in text
    seed = json.loads(text)["components"]["schemas"]["TrainJobSpec"]["properties"]["seed"]
    accepted = client.post(JOBS, json={"kind": "update", "spec": {"seed": seed["maximum"]}})
    assert accepted.status_code == 201, accepted.text
    over = client.post(JOBS, json={"kind": "update", "spec": {"seed": seed["maximum"] + 1}})
    assert over.status_code == 422


@pytest.mark.parametrize("value", [2**20 + 1, -(2**20) - 1, 1e10, -1e10])
def test_model_arguments_are_bounded(client: TestClient, value: float) -> None:
    spec = {"workload": {"model": "hf:ViTConfig", "model_args": {"hidden_size": value}}}
    answer = client.post(JOBS, json={"kind": "update", "spec": spec})
    assert answer.status_code == 422 and "model_args" in answer.text, answer.text
