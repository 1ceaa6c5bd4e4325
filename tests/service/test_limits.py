"""Planning under limits: a child process per request, with a deadline, a memory cap and a
cap on parallel plannings; the API answers 413 naming the limit."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from edgewise.errors import ConfigError, InfeasibleError
from edgewise.runtime.jobs import PlanningLimitError
from edgewise.service import JobManager, create_app
from edgewise.service.limits import ProcessLimiter

TOKEN = "test-token-0123456789abcdef"
PRELOAD = ["edgewise.update.api", "edgewise.pipeline.api"]
"""The forkserver starts once per process: the first limiter's preload is the one kept."""


def _square(x: int) -> int:
    return x * x


def _spin(seconds: float) -> int:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    return 0


def _hog(mb: int) -> int:
    return int(np.ones(mb * 2**20 // 8).sum())


def _refuse(field: str) -> None:
    raise ConfigError("not that", field=field)


def _infeasible() -> None:
    raise InfeasibleError("nothing fits")


@pytest.fixture(scope="module")
def limiter() -> ProcessLimiter:
    found = ProcessLimiter(seconds=3.0, memory_mb=256, parallel=2,
                           preload=[__name__, *PRELOAD])
    found.warm()
    return found


def test_results_and_user_errors_come_back(limiter: ProcessLimiter) -> None:
    assert limiter(_square, 7) == 49
    with pytest.raises(ConfigError) as raised:
        limiter(_refuse, "streams")
    assert raised.value.field == "streams" and "not that" in str(raised.value)
    with pytest.raises(InfeasibleError, match="nothing fits"):
        limiter(_infeasible)


def test_a_planning_past_the_deadline_is_killed(limiter: ProcessLimiter) -> None:
    started = time.monotonic()
    with pytest.raises(PlanningLimitError, match="longer than 3 s"):
        limiter(_spin, 60.0)
    assert time.monotonic() - started < 10.0


def test_a_planning_past_the_memory_cap_is_refused(limiter: ProcessLimiter) -> None:
    assert limiter(_hog, 16) == 16 * 2**20 // 8
    with pytest.raises(PlanningLimitError, match="more than 256 MB"):
        limiter(_hog, 2048)


def test_limits_must_be_positive() -> None:
    with pytest.raises(ConfigError):
        ProcessLimiter(seconds=0)


@pytest.fixture
def client(backend: JobManager, tmp_path: Path) -> Iterator[TestClient]:
    limiter = ProcessLimiter(seconds=2.0, memory_mb=512, preload=PRELOAD)
    app = create_app(backend, TOKEN, limiter=limiter)
    with TestClient(app, headers={"Authorization": f"Bearer {TOKEN}"}) as c:
        yield c


def test_the_api_answers_413_naming_the_limit(client: TestClient) -> None:
    """A planning request inside its schema's bounds that still takes too long: the exact
    oracle on 6 workers (the schema's limit) with the widest batch range takes about 30 s
    (8 workers took 80 s and 2.8 GB)."""
    workers = [{"device": f"nano-{i}", "device_type": "jetson-nano",
                "apps": [{"name": f"sift-{i}", "kind": "sift", "deadline_ms": 200}]}
               for i in range(6)]
    body = {"policy": "exact", "n_samples": 1_000_000, "workers": workers, "b_max": 4096,
            "b_min": 1}
    started = time.monotonic()
    response = client.post("/api/v1/update/solve", json=body)
    assert response.status_code == 413, response.text
    assert time.monotonic() - started < 10.0
    assert response.json()["detail"].startswith("planning took longer than 2 s")
    seven = {**body, "workers": [*workers, {**workers[0], "device": "nano-6",
                                            "apps": []}]}
    refused = client.post("/api/v1/update/solve", json=seven)
    assert refused.status_code == 422 and "limited to 6 workers" in refused.text


def test_a_planning_request_runs_in_a_child_and_answers(client: TestClient) -> None:
    body = {"model": "digits-cnn", "policy": "bottleneck-search", "on": "cluster",
            "memory_mb": 0.15}
    response = client.post("/api/v1/pipeline/plan", json=body)
    assert response.status_code == 200, response.text
    plan = response.json()
    assert plan["segments"] == 9 and plan["dispatcher"] == "ps"
    covered = [(s["first"], s["end"]) for s in plan["stages"]]
    assert covered[0][0] == 0 and covered[-1][1] == 9
    assert all(a[1] == b[0] for a, b in itertools.pairwise(covered))
    assert all(s["memory_bytes"] <= 0.15e6 for s in plan["stages"])
