"""Load on loopback: 50 concurrent clients make 2,000 requests to the status and metrics
routes of a running manager while a training job runs; none fails, and the job is not
slowed by more than 10 %. Each epoch of the job under load is compared with the same epoch
of the same job run without load just before and just after, in the same manager, and the
slowdown is the median of these ratios. The runs alternate, quiet, loaded, quiet, loaded,
quiet, loaded, quiet: the quiet runs around each loaded one cancel a drift of the host,
and three loaded runs damp what one run's luck (where the scheduler put its processes)
does to the figure.
A quiet run takes the same steps as a loaded one, with a sleep in place of the clients.
Same epochs, not the job's own unloaded epochs around the load: a job's epochs drift on
their own (about 0.85 s for epochs 1–7 and 1.1 s from epoch 8 on in two unloaded runs).
The p50 and p99 latencies and the slowdown are printed and written to
``$EDGEWISE_LOAD_REPORT``."""

from __future__ import annotations

import csv
import io
import json
import os
import resource
import shutil
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from managerproc import ManagerProcess, skip_unless_ci

pytestmark = pytest.mark.ray
CLIENTS, REQUESTS = 50, 2000
PAUSE_S = 0.2
"""Each client's period between its requests: 50 clients then ask 250 times a second
(the dashboard polls every 2 s), and the 2,000 requests span about 8 s, 8 of the job's
epochs, instead of a burst of about 1 s that overlaps two epochs at most."""
SLOWDOWN_LIMIT = 1.10
"""The issue's 10 % (measurements in docs/manager-api.md)."""
LOADED_RUNS = 3
"""Loaded runs, each between quiet ones. One run's figure swings widely on this host: with
two, the idle host read 1.028, 1.072, 0.963 and 1.254 (single runs from 0.78 to 1.30)."""
PLACEBO_S = REQUESTS / CLIENTS * PAUSE_S
"""How long a quiet run's placebo waits: about as long as the load lasts (8.05-8.35 s)."""
BASELINE_EPOCHS = 4
"""Epochs done before the load starts (the first is a warm-up and never counted)."""
SPEC = {"epochs": 16, "batch_sizes": {"tx2-0": 16, "nano-0": 16, "nano-1": 16, "nano-2": 16}}


def _hey_or_skip() -> str:
    """hey's path; a skip, saying why, where it cannot be had, but never in CI (make test
    installs it)."""
    found = shutil.which("hey")
    if found is None:
        skip_unless_ci("hey is not installed (make load-deps, or apt-get install hey)")
    assert found is not None
    return found


def _load(url: str, headers: dict[str, str], job_id: str) -> dict[str, Any]:
    """``REQUESTS`` requests from ``CLIENTS`` concurrent clients, spread evenly over the
    routes: one ``hey`` per route, each with its share of the clients, every client sending
    a request each ``PAUSE_S`` (hey's clients tick together: a burst of 50 every 0.2 s), all
    at the lowest CPU priority. hey, a compiled load generator, costs 0.07 ms of CPU a
    request; aiohttp's client, which the test used before, 0.35-0.55 ms (more than the
    manager spends to answer), and with another core busy those clients alone, against a
    stand-in server and no manager, slowed the job by about 10 % (1.008 and 1.025 against a
    placebo's 0.90): the test measured its clients."""
    hey = _hey_or_skip()
    paths = [f"/api/v1/jobs/{job_id}", "/metrics", "/api/v1/health", "/api/v1/devices/metrics",
             "/api/v1/jobs"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started_at = time.time()
    runs = [subprocess.Popen(
        ["nice", "-n", "19", hey, "-n", str(REQUESTS // len(paths)),
         "-c", str(CLIENTS // len(paths)), "-q", f"{1 / PAUSE_S:g}", "-t", "30", "-o", "csv",
         *(a for k, v in headers.items() for a in ("-H", f"{k}: {v}")), url + path],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for path in paths]
    outputs = [run.communicate(timeout=300) for run in runs]
    ended_at = time.time()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    latencies: list[float] = []
    failures: list[str] = []
    for path, run, (out, err) in zip(paths, runs, outputs, strict=True):
        rows = list(csv.DictReader(io.StringIO(out)))
        latencies += [float(row["response-time"]) for row in rows]
        failures += [f"{path}: {row['status-code']}" for row in rows
                     if row["status-code"] != "200"]
        if run.returncode != 0 or len(rows) != REQUESTS // len(paths):
            failures.append(f"{path}: hey exited {run.returncode} with {len(rows)} rows: {err}")
    cpu_s = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return {"latencies": latencies, "failures": failures, "start": started_at,
            "end": ended_at, "client_cpu_s": cpu_s}


def _epochs(manager: ManagerProcess, job_id: str) -> list[tuple[float, float]]:
    """(end time, seconds) of every completed epoch."""
    rows = manager.get(f"/api/v1/jobs/{job_id}/metrics").get("epoch_seconds", [])
    return [(at, seconds) for at, _, seconds in rows]


def _finished_epochs(manager: ManagerProcess, job_id: str) -> list[tuple[float, float]]:
    done = manager.wait_job(job_id, timeout_s=300)
    assert done["state"] == "succeeded", done
    return _epochs(manager, job_id)


def _placebo(url: str, headers: dict[str, str], job_id: str) -> dict[str, Any]:
    """A quiet run's stand-in for the load: the same wait, no request."""
    started_at = time.time()
    time.sleep(PLACEBO_S)
    return {"start": started_at, "end": time.time()}


def _run(manager: ManagerProcess, load: Callable[[str, dict[str, str], str], dict[str, Any]]
         ) -> tuple[list[tuple[float, float]], dict[str, Any]]:
    """The job's epochs, and what ``load`` (called once ``BASELINE_EPOCHS`` are done)
    returned. Quiet and loaded runs take the same steps (the test's own polling
    included) and differ only in ``load``: with the quiet runs just awaited, as they once
    were, they polled the job where the loaded ones waited on the clients, and a placebo
    load (a sleep) came out 0.906 and 0.938 beside ``stress-ng --cpu 1``."""
    job = manager.post("/api/v1/jobs", {"kind": "update", "spec": SPEC})
    deadline = time.monotonic() + 300
    while len(_epochs(manager, job["id"])) < BASELINE_EPOCHS:
        assert time.monotonic() < deadline, manager.get(f"/api/v1/jobs/{job['id']}")
        time.sleep(0.2)
    result = load(manager.url, manager.headers, job["id"])
    return _finished_epochs(manager, job["id"]), result


def _ratios(epochs: list[tuple[float, float]], load: dict[str, Any],
            quiet: list[list[tuple[float, float]]]) -> list[float]:
    """Each epoch that overlapped the load (the first, a warm-up, never counts) over the
    mean of the same epoch in ``quiet``, the quiet runs just before and just after the
    loaded one (the host drifts: with another core busy, three quiet runs in a row took
    1.15, 0.98 and 0.79 s an epoch, so runs further away would measure the drift)."""
    return [seconds / statistics.fmean(q[k][1] for q in quiet)
            for k, (end, seconds) in enumerate(epochs)
            if k > 0 and end > load["start"] and end - seconds < load["end"]
            and all(k < len(q) for q in quiet)]


@pytest.mark.timeout(600)
def test_fifty_clients_do_not_fail_or_slow_a_running_job(manager: ManagerProcess,
                                                         tmp_path: Path) -> None:
    _hey_or_skip()
    loaded: list[tuple[list[tuple[float, float]], dict[str, Any]]] = []
    quiet = [_run(manager, _placebo)[0]]
    for _ in range(LOADED_RUNS):
        loaded.append(_run(manager, _load))
        quiet.append(_run(manager, _placebo)[0])
    ratios = [_ratios(epochs, load, quiet[i:i + 2]) for i, (epochs, load) in enumerate(loaded)]
    assert all(len(run) >= 2 for run in ratios), ratios
    slowdown = round(statistics.median([r for run in ratios for r in run]), 3)
    latencies = np.concatenate([load["latencies"] for _, load in loaded])
    report = {"clients": CLIENTS, "requests": [len(load["latencies"]) for _, load in loaded],
              "errors": sum(len(load["failures"]) for _, load in loaded),
              "p50_ms": round(1e3 * float(np.percentile(latencies, 50)), 1),
              "p99_ms": round(1e3 * float(np.percentile(latencies, 99)), 1),
              "load_seconds": [round(load["end"] - load["start"], 2) for _, load in loaded],
              "client_cpu_s": [round(load["client_cpu_s"], 2) for _, load in loaded],
              "quiet_run_medians_s": [round(statistics.median(s for _, s in q[1:]), 3)
                                      for q in quiet],
              "epoch_ratios": [[round(r, 3) for r in run] for run in ratios],
              "slowdown_per_run": [round(statistics.median(run), 3) for run in ratios],
              "slowdown": slowdown}
    print("load test:", json.dumps(report))
    (Path(os.environ.get("EDGEWISE_LOAD_REPORT", tmp_path / "load.json"))).write_text(
        json.dumps(report, indent=1))
    assert [load["failures"] for _, load in loaded] == [[]] * LOADED_RUNS, report
    assert report["requests"] == [REQUESTS] * LOADED_RUNS, report
    assert slowdown <= SLOWDOWN_LIMIT, report
