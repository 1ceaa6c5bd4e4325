"""``kill -9`` of a manager running two jobs, then a restart on the same state: both jobs keep
their history (and every job before them theirs), the update job resumes from its checkpoint
and completes (no epoch lost or trained twice), the pipeline job, which cannot resume, is
marked interrupted with the reason, and no process of the killed manager (Ray's included)
outlives it. (Resuming from a checkpoint is tested on the engine itself in
tests/runtime/test_training.py; every kind's success through the manager in test_job_kinds.py.)
The manager is the session's served one (tests/service/conftest.py), killed and started again
on its own state directory: one start of Ray, the API and the device agents, where a manager
of the test's own needed two (one before the kill, one after)."""

from __future__ import annotations

import time
from typing import Any

import psutil
import pytest
from managerproc import FINAL, ManagerProcess

pytestmark = [pytest.mark.ray, pytest.mark.system, pytest.mark.slow]
EPOCHS = 8
CAUGHT = EPOCHS - 4
"""The kill comes at an epoch from 1 to CAUGHT: a window of four epochs to be seen in by a
poll every 0.3 s, and four epochs left for the kill to land before the job ends, whatever
the speed of the host (a load slows the job and the polls alike)."""


def _specs(manager: ManagerProcess) -> dict[str, dict[str, Any]]:
    specs = {e["kind"]: e["spec"] for e in manager.get("/api/v1/jobs/examples")}
    # the update long enough to be killed mid-job; the pipeline serving until it is killed
    return {"update": {**specs["update"], "epochs": EPOCHS, "background_apps": False},
            "pipeline": {**specs["pipeline"], "requests": 10, "switch_after": None,
                         "serve_seconds": 600.0}}


def _wait_for_a_checkpoint(manager: ManagerProcess, job_id: str, timeout_s: float) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        job = manager.get(f"/api/v1/jobs/{job_id}")
        # the epochs whose checkpoint is saved (it lands while the next epoch trains)
        saved = [e["data"]["epoch"] for e in manager.get(f"/api/v1/jobs/{job_id}/events")
                 if e["kind"] == "checkpoint"]
        epoch = max(saved, default=0)
        if 1 <= epoch <= CAUGHT:
            return int(epoch)
        assert job["state"] in ("pending", "planning", "running"), (job["state"], job["reason"])
        time.sleep(0.3)
    pytest.fail(f"no checkpoint of {job_id} within {timeout_s} s")


def _gone_within(processes: list[psutil.Process], seconds: float) -> list[psutil.Process]:
    """The processes still running after ``seconds`` (psutil checks their start time)."""
    _, alive = psutil.wait_procs(processes, timeout=seconds)
    return [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def _when_idle(manager: ManagerProcess, timeout_s: float = 240.0) -> set[str]:
    """The served manager's jobs once none of an earlier test is still active."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        jobs = manager.get("/api/v1/jobs")["jobs"]
        if all(job["state"] in FINAL for job in jobs):
            return {job["id"] for job in jobs}
        time.sleep(0.5)
    pytest.fail(f"earlier jobs still active after {timeout_s} s")


@pytest.mark.timeout(600)
def test_kill_9_then_restart_resumes_or_interrupts_every_job(manager: ManagerProcess) -> None:
    before = _when_idle(manager)  # the served manager runs two jobs at once, these two
    ids = {kind: manager.post("/api/v1/jobs", {"kind": kind, "spec": spec})["id"]
           for kind, spec in _specs(manager).items()}
    manager.wait_job(ids["pipeline"], states=("running",), timeout_s=240)
    epoch = _wait_for_a_checkpoint(manager, ids["update"], timeout_s=240)
    assert manager.get(f"/api/v1/jobs/{ids['pipeline']}")["state"] == "running"
    helpers = manager.descendants()
    assert any("raylet" in p.name() or "gcs_server" in p.name() for p in helpers)
    manager.kill9()
    # the reaper ended Ray with the manager (generous: it returns once they are gone)
    assert _gone_within(helpers, 120.0) == []

    manager.start()
    update = manager.wait_job(ids["update"], timeout_s=300)
    assert update["state"] == "succeeded", update
    assert update["attempts"] == 2 and update["summary"]["epoch"] == EPOCHS
    events = manager.get(f"/api/v1/jobs/{ids['update']}/events")
    resumed = [e for e in events if e["kind"] == "resumed"]
    assert resumed and resumed[-1]["data"]["epoch"] >= epoch
    steps = [row[1] for row in manager.get(f"/api/v1/jobs/{ids['update']}/metrics")["epoch"]]
    assert steps == [float(e) for e in range(1, EPOCHS + 1)]  # none lost, none twice

    pipeline = manager.get(f"/api/v1/jobs/{ids['pipeline']}")
    history = [e["kind"] for e in manager.get(f"/api/v1/jobs/{ids['pipeline']}/events")]
    assert history[0] == "submitted" and "interrupted" in history, history
    assert pipeline["state"] == "interrupted", (pipeline["state"], pipeline["reason"])
    assert "cannot resume" in pipeline["reason"]
    listed = [job["id"] for job in manager.get("/api/v1/jobs")["jobs"]]
    assert len(listed) == len(set(listed))  # nothing duplicated
    assert set(listed) == before | set(ids.values())  # nothing lost, nothing new
