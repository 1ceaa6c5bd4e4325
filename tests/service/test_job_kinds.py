"""Each of the five job kinds, submitted over HTTP to the served manager, runs to success and
reports what it did: epochs trained, requests answered once, windows, slots and iterations.
(A kind's failure paths and limits are tested in test_api.py, test_limits.py and
test_restart.py.)"""

from __future__ import annotations

from typing import Any

import pytest
from managerproc import ManagerProcess

pytestmark = [pytest.mark.ray, pytest.mark.system, pytest.mark.slow]


DIGITS = {"model": "digits-cnn", "data": "digits"}
"""A workload spec (docs/workloads.md) every kind takes: the built-in CNN named as a user's
model, dry-run at submission like any other."""


def _light(examples: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each kind's example spec at its smallest sensible setting (two cores, five jobs),
    each with a workload."""
    return {
        "update": {**examples["update"], "epochs": 2, "workload": DIGITS,
                   "background_apps": False},  # with them: the test below
        "pipeline": {**examples["pipeline"], "requests": 24, "switch_after": 12,
                     "serve_seconds": 0.0, "workload": DIGITS},
        "continual": {**examples["continual"], "streams": 1, "windows": 1,
                      "workload": DIGITS},
        "sites": {**examples["sites"], "workload": DIGITS},
        "modelparallel": {**examples["modelparallel"], "iterations": 6, "batch_size": 64,
                          "rounds": 5, "workload": DIGITS},
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
    assert summary["update"]["apps"] == 0
    pipeline = summary["pipeline"]
    assert pipeline["results"] == 24 and pipeline["duplicates"] == 0
    assert pipeline["version"] == 1  # switched to the new weights after 12, nothing dropped
    assert pipeline["in_order"] == 1 and pipeline["stages"] >= 2
    assert pipeline["outputs_equal_to_the_model"] == 1 and pipeline["check_vacuous"] == 0
    assert summary["continual"]["window"] == 1
    assert 0.0 <= summary["continual"]["mean_accuracy"] <= 1.0  # a student from random weights
    plans = {kind: manager.get(f"/api/v1/jobs/{ids[kind]}/plan") for kind in ids}
    for kind in ("update", "continual", "pipeline", "modelparallel"):
        assert plans[kind]["workload"]["model"] == "digits-cnn", kind
    assert all(label.startswith("digits-cnn") for label in plans["sites"]["workloads"].values())
    assert summary["sites"]["seconds"] > 0 and summary["sites"]["val_accuracy"] > 0.0
    parallel = summary["modelparallel"]
    assert parallel["stages"] >= 1 and parallel["iterations"] == 6
    assert parallel["model"] == "digits-cnn on digits" and 0.0 <= parallel["val_accuracy"] <= 1.0


@pytest.mark.timeout(400)
def test_an_update_job_runs_the_clusters_apps_beside_it(manager: ManagerProcess) -> None:
    """An update job runs what `update run` runs: the cluster's four SIFT apps beside the
    training, whose deadline misses are the job's figures, events and plan table, with the
    columns of the command's own table. (Alone, one epoch: four SIFT apps at 5 frames a
    second take more than a core of the 2-core host while the job runs.)"""
    from edgewise.cli.update import apps_table

    example = {e["kind"]: e["spec"] for e in manager.get("/api/v1/jobs/examples")}["update"]
    assert example["background_apps"] is True  # the default
    job_id = manager.post("/api/v1/jobs", {"kind": "update",
                                           "spec": {**example, "epochs": 1}})["id"]
    done = manager.wait_job(job_id, timeout_s=300)
    assert done["state"] == "succeeded", (done["state"], done["reason"])
    summary = done["summary"]
    events = [e for e in manager.get(f"/api/v1/jobs/{job_id}/events") if e["kind"] == "app"]
    apps = {e["data"]["app"]: e["data"] for e in events}
    assert sorted(apps) == ["sift-nano-0", "sift-nano-1", "sift-nano-2", "sift-tx2"]
    assert summary["apps"] == 4
    assert summary["app_periods"] == sum(a["periods"] for a in apps.values()) > 0
    assert summary["deadline_misses"] == sum(a["misses"] for a in apps.values())
    assert all(0 <= a["misses"] <= a["periods"] for a in apps.values())
    tables = manager.get(f"/api/v1/jobs/{job_id}/plan")["tables"]
    measured = next(t for t in tables if t["title"].startswith("background apps"))
    assert {r[0]: r[2] for r in measured["rows"]} == {k: a["misses"] for k, a in apps.items()}
    assert measured["columns"] == [c.header for c in apps_table([]).columns]
