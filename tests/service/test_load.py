"""Load on loopback, behaviour only: while an update job runs, 10 concurrent clients
(hey) make 200 requests to the status and metrics routes; every request is answered 200,
and the job still succeeds with every training sample applied exactly once in each epoch.

How much the load slows the job is a benchmark figure, not a test verdict:
``edgewise bench manager --json`` (``running_job_slowdown_under_50_clients``, with 50
clients and quiet and loaded windows; docs/manager-api.md)."""

from __future__ import annotations

import csv
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from managerproc import ManagerProcess, skip_unless_ci

pytestmark = pytest.mark.ray
CLIENTS, REQUESTS, PER_CLIENT_RPS = 10, 200, 10
PATHS = ("/api/v1/jobs/{job}", "/metrics", "/api/v1/health", "/api/v1/devices/metrics",
         "/api/v1/jobs?limit=20")
EPOCHS, TRAINING_SAMPLES = 8, 1437
SPEC = {"epochs": EPOCHS, "seed": 3, "background_apps": False,
        "batch_sizes": {"tx2-0": 16, "nano-0": 16, "nano-1": 16, "nano-2": 16}}
"""About 0.7 s an epoch on an idle 2-core host; the load (about 2 s) starts after the
first epoch."""


def _hey() -> str:
    found = shutil.which("hey")
    if found is None:
        skip_unless_ci("hey is not installed (make load-deps, or apt-get install hey)")
    assert found is not None
    return found


def _load(manager: ManagerProcess, job_id: str, out: Path) -> list[dict[str, str]]:
    """hey on every route at once (its share of the clients and requests each); the rows
    of all of them."""
    headers = [a for k, v in manager.headers.items() for a in ("-H", f"{k}: {v}")]
    runs, outputs = [], []
    for k, path in enumerate(PATHS):
        outputs.append(out / f"hey-{k}.csv")
        with outputs[-1].open("w") as file:
            runs.append(subprocess.Popen(
                [_hey(), "-n", str(REQUESTS // len(PATHS)), "-c", str(CLIENTS // len(PATHS)),
                 "-q", str(PER_CLIENT_RPS), "-t", "30", "-o", "csv", *headers,
                 manager.url + path.format(job=job_id)],
                stdout=file, stderr=subprocess.PIPE, text=True))
    rows = []
    for run, output in zip(runs, outputs, strict=True):
        _, err = run.communicate(timeout=120)
        assert run.returncode == 0, err
        with output.open() as file:
            rows += list(csv.DictReader(file))
    return rows


@pytest.mark.timeout(300)
def test_clients_are_all_answered_and_the_running_job_loses_nothing(
        manager: ManagerProcess, tmp_path: Path) -> None:
    _hey()
    job = manager.post("/api/v1/jobs", {"kind": "update", "spec": SPEC})
    for _ in range(600):  # bounded: the first epoch within 2 minutes
        if manager.get(f"/api/v1/jobs/{job['id']}/metrics").get("epoch"):
            break
        time.sleep(0.2)
    # The load overlaps the job: it starts while the job runs, with all but an epoch or two
    # of 8 left (0.7 s each idle) against the first requests' start (milliseconds). Whether
    # the job outlasts the whole load is a race of two speeds a loaded host changes apart.
    before = manager.get(f"/api/v1/jobs/{job['id']}")
    assert before["state"] == "running", f"the job ended before the load began: {before}"
    rows = _load(manager, job["id"], tmp_path)
    assert len(rows) == REQUESTS
    assert [r for r in rows if r["status-code"] != "200"] == []
    done = manager.wait_job(job["id"], timeout_s=180)
    assert done["state"] == "succeeded", done
    history = manager.get(f"/api/v1/jobs/{job['id']}/metrics")
    for name in ("samples_applied", "samples_distinct"):
        assert [(step, value) for _, step, value in history[name]] == [
            (float(e), float(TRAINING_SAMPLES)) for e in range(1, EPOCHS + 1)], name
