"""Each of the five job kinds, submitted over HTTP to the served manager, runs to success and
reports what it did: epochs trained, requests answered once, windows, slots and iterations.
(A kind's failure paths and limits are tested in test_api.py, test_limits.py and
test_restart.py.)"""

from __future__ import annotations

from typing import Any

import pytest
from managerproc import ManagerProcess

pytestmark = [pytest.mark.ray, pytest.mark.system, pytest.mark.slow]


def _light(examples: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each kind's example spec at its smallest sensible setting (two cores, five jobs)."""
    return {
        "update": {**examples["update"], "epochs": 2},
        "pipeline": {**examples["pipeline"], "requests": 24, "switch_after": 12,
                     "serve_seconds": 0.0},
        "continual": {**examples["continual"], "streams": 1, "windows": 1},
        "sites": examples["sites"],
        "modelparallel": {**examples["modelparallel"], "iterations": 6},
    }


@pytest.mark.timeout(600)
def test_each_kind_runs_to_success_through_the_manager(manager: ManagerProcess) -> None:
    examples = {e["kind"]: e["spec"] for e in manager.get("/api/v1/jobs/examples")}
    assert set(examples) == {"update", "pipeline", "continual", "sites", "modelparallel"}
    ids = {kind: manager.post("/api/v1/jobs", {"kind": kind, "spec": spec})["id"]
           for kind, spec in _light(examples).items()}
    done = {kind: manager.wait_job(job_id, timeout_s=420) for kind, job_id in ids.items()}
    for kind, job in done.items():
        assert job["state"] == "succeeded", (kind, job["state"], job["reason"])
    summary = {kind: job["summary"] for kind, job in done.items()}
    assert summary["update"]["epoch"] == 2 and summary["update"]["val_accuracy"] > 0.3
    pipeline = summary["pipeline"]
    assert pipeline["results"] == 24 and pipeline["duplicates"] == 0
    assert pipeline["version"] == 1  # switched to the new weights after 12, nothing dropped
    assert summary["continual"]["window"] == 1
    assert 0.0 < summary["continual"]["mean_accuracy"] <= 1.0
    assert summary["sites"]["seconds"] > 0 and summary["sites"]["val_accuracy"] > 0.0
    assert summary["modelparallel"]["stages"] >= 1
