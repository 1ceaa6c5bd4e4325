"""Load on loopback: 50 concurrent clients make 2,000 requests to the status and metrics
routes of a running manager while a training job runs; none fails, and the job is not
slowed by more than 10 %, measured against the same job without the load in the same run.

Each job alternates quiet and loaded windows. After ``WARMUP_EPOCHS`` it runs
``QUIET_EPOCHS`` epochs with no load, then the clients send ``WINDOW_REQUESTS`` requests,
then quiet again, and so on, ending quiet; ``WINDOWS`` loaded windows make the 2,000
requests. Each epoch that ran wholly inside a loaded window is divided by the mean of the
epochs that ran wholly inside the quiet windows just before and just after it; the
slowdown is the median of these ratios over ``JOBS`` jobs. The test polls the job at the
same period in both kinds of window.

Why within one job: the test once compared whole runs of a job (quiet, loaded, quiet...)
epoch by epoch, and a run's own luck (where the scheduler put its processes) moved every
epoch of it. Beside ``stress-ng --cpu 1``, four consecutive quiet runs had median epochs of
0.70, 0.92, 1.05 and 0.74 s, so one loaded run read from 0.97 to 1.25 with the same load.
The p50 and p99 latencies and the slowdown are printed and written to
``$EDGEWISE_LOAD_REPORT``."""

from __future__ import annotations

import csv
import json
import os
import resource
import shutil
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from managerproc import ManagerProcess, skip_unless_ci

pytestmark = pytest.mark.ray
CLIENTS, REQUESTS = 50, 2000
PAUSE_S = 0.2
"""Each client's period between its requests: 50 clients then ask 250 times a second
(the dashboard polls every 2 s)."""
WINDOWS = 4
WINDOW_REQUESTS = REQUESTS // WINDOWS
"""Requests of one loaded window: 500, about 2 s, one or two whole epochs of the job. Four
windows rather than two of 1,000: with two, one job of a placebo (a sleep for the load)
read 1.21 beside ``stress-ng --cpu 1``, a few seconds of bad luck filling a window."""
WARMUP_EPOCHS, QUIET_EPOCHS = 2, 2
"""Epochs before the first window (never counted), and whole epochs in each quiet one."""
JOBS = 3
POLL_S = 0.2
SLOWDOWN_LIMIT = 1.10
"""The issue's 10 % (measurements in docs/manager-api.md)."""
SPEC = {"epochs": 40, "batch_sizes": {"tx2-0": 16, "nano-0": 16, "nano-1": 16, "nano-2": 16}}
"""More epochs than the windows need (about 24): the test stops the job after its last."""
PATHS = ("/api/v1/jobs/{job}", "/metrics", "/api/v1/health", "/api/v1/devices/metrics",
         "/api/v1/jobs")


@dataclass
class Window:
    """A span of wall-clock time, loaded or quiet, and what its clients saw."""

    loaded: bool
    start: float
    end: float = float("inf")
    latencies: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    client_cpu_s: float = 0.0

    def holds(self, end: float, seconds: float) -> bool:
        return self.start <= end - seconds and end <= self.end


def _hey_or_skip() -> str:
    """hey's path; a skip, saying why, where it cannot be had, but never in CI (make test
    installs it)."""
    found = shutil.which("hey")
    if found is None:
        skip_unless_ci("hey is not installed (make load-deps, or apt-get install hey)")
    assert found is not None
    return found


class Load:
    """One loaded window: ``WINDOW_REQUESTS`` requests from ``CLIENTS`` concurrent clients,
    spread evenly over the routes: one ``hey`` per route with its share of the clients,
    every client sending a request each ``PAUSE_S`` (hey's clients tick together: a burst
    of 50 every 0.2 s), all at the lowest CPU priority. hey, a compiled load generator,
    costs 0.07 ms of CPU a request; aiohttp's client, which the test used before,
    0.35-0.55 ms, more than the manager spends to answer."""

    def __init__(self, manager: ManagerProcess, job_id: str, out: Path) -> None:
        hey = _hey_or_skip()
        self.window = Window(loaded=True, start=time.time())
        self._before = resource.getrusage(resource.RUSAGE_CHILDREN)
        self._outputs = [out / f"hey-{k}.csv" for k in range(len(PATHS))]
        headers = [a for k, v in manager.headers.items() for a in ("-H", f"{k}: {v}")]
        self._runs = []
        for path, output in zip(PATHS, self._outputs, strict=True):
            with output.open("w") as file:  # hey writes to its own copy of the descriptor
                self._runs.append(subprocess.Popen(
                    ["nice", "-n", "19", hey, "-n", str(WINDOW_REQUESTS // len(PATHS)),
                     "-c", str(CLIENTS // len(PATHS)), "-q", f"{1 / PAUSE_S:g}", "-t", "30",
                     "-o", "csv", *headers, manager.url + path.format(job=job_id)],
                    stdout=file, stderr=subprocess.PIPE, text=True))

    def done(self) -> bool:
        return all(run.poll() is not None for run in self._runs)

    def finish(self) -> Window:
        for path, run, output in zip(PATHS, self._runs, self._outputs, strict=True):
            err = run.communicate(timeout=300)[1]
            with output.open() as file:
                rows = list(csv.DictReader(file))
            self.window.latencies += [float(row["response-time"]) for row in rows]
            self.window.failures += [f"{path}: {row['status-code']}" for row in rows
                                     if row["status-code"] != "200"]
            if run.returncode != 0 or len(rows) != WINDOW_REQUESTS // len(PATHS):
                self.window.failures.append(
                    f"{path}: hey exited {run.returncode} with {len(rows)} rows: {err}")
        self.window.end = time.time()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.window.client_cpu_s = ((after.ru_utime + after.ru_stime)
                                    - (self._before.ru_utime + self._before.ru_stime))
        return self.window


def _epochs(manager: ManagerProcess, job_id: str) -> list[tuple[float, float]]:
    """(end time, seconds) of every completed epoch."""
    rows = manager.get(f"/api/v1/jobs/{job_id}/metrics").get("epoch_seconds", [])
    return [(at, seconds) for at, _, seconds in rows]


def _whole_epochs_since(epochs: list[tuple[float, float]], start: float) -> int:
    return sum(1 for end, seconds in epochs if end - seconds >= start)


def _alternate(manager: ManagerProcess, job_id: str, out: Path) -> list[Window]:
    """Quiet and loaded windows over a running job, polling it every ``POLL_S`` throughout,
    until the last quiet window holds ``QUIET_EPOCHS`` whole epochs."""
    windows: list[Window] = []
    load: Load | None = None
    deadline = time.monotonic() + 300
    while True:
        assert time.monotonic() < deadline, (windows, manager.get(f"/api/v1/jobs/{job_id}"))
        epochs = _epochs(manager, job_id)
        job = manager.get(f"/api/v1/jobs/{job_id}")
        assert job["state"] in ("pending", "planning", "running"), (job, windows)
        if load is not None:
            if load.done():
                windows.append(load.finish())
                windows.append(Window(loaded=False, start=time.time()))
                load = None
        elif not windows:
            if len(epochs) >= WARMUP_EPOCHS:
                windows.append(Window(loaded=False, start=time.time()))
        elif _whole_epochs_since(epochs, windows[-1].start) >= QUIET_EPOCHS:
            windows[-1].end = time.time()
            if sum(w.loaded for w in windows) == WINDOWS:
                return windows
            load = Load(manager, job_id, out)
        time.sleep(POLL_S)


def _ratios(epochs: list[tuple[float, float]], windows: list[Window]) -> list[float]:
    """Each epoch wholly inside a loaded window over the mean of the epochs wholly inside
    the quiet windows around it."""
    ratios = []
    for k, window in enumerate(windows):
        if not window.loaded:
            continue
        quiet = [s for w in (windows[k - 1], windows[k + 1]) for end, s in epochs
                 if w.holds(end, s)]
        ratios += [s / statistics.fmean(quiet) for end, s in epochs if window.holds(end, s)]
    return ratios


def _one_job(manager: ManagerProcess, out: Path) -> tuple[list[float], list[Window]]:
    job = manager.post("/api/v1/jobs", {"kind": "update", "spec": SPEC})
    windows = _alternate(manager, job["id"], out)
    epochs = _epochs(manager, job["id"])
    manager.post(f"/api/v1/jobs/{job['id']}/stop")
    assert manager.wait_job(job["id"], timeout_s=120)["state"] in ("stopped", "succeeded")
    return _ratios(epochs, windows), windows


def _report(runs: list[tuple[list[float], list[Window]]]) -> dict[str, Any]:
    loads = [w for _, windows in runs for w in windows if w.loaded]
    latencies = np.concatenate([w.latencies for w in loads])
    return {"clients": CLIENTS, "requests": [len(w.latencies) for w in loads],
            "errors": sum(len(w.failures) for w in loads),
            "failures": [f for w in loads for f in w.failures][:20],
            "p50_ms": round(1e3 * float(np.percentile(latencies, 50)), 1),
            "p99_ms": round(1e3 * float(np.percentile(latencies, 99)), 1),
            "load_seconds": [round(w.end - w.start, 2) for w in loads],
            "client_cpu_s": [round(w.client_cpu_s, 2) for w in loads],
            "epoch_ratios": [[round(r, 3) for r in ratios] for ratios, _ in runs],
            "slowdown_per_job": [round(statistics.median(r), 3) for r, _ in runs],
            "slowdown": round(statistics.median([r for ratios, _ in runs for r in ratios]), 3)}


@pytest.mark.timeout(600)
def test_fifty_clients_do_not_fail_or_slow_a_running_job(manager: ManagerProcess,
                                                         tmp_path: Path) -> None:
    _hey_or_skip()
    runs = [_one_job(manager, tmp_path) for _ in range(JOBS)]
    assert all(len(ratios) >= 2 for ratios, _ in runs), runs
    report = _report(runs)
    print("load test:", json.dumps(report))
    (Path(os.environ.get("EDGEWISE_LOAD_REPORT", tmp_path / "load.json"))).write_text(
        json.dumps(report, indent=1))
    assert report["errors"] == 0, report
    assert sum(report["requests"]) == REQUESTS * JOBS, report
    assert report["slowdown"] <= SLOWDOWN_LIMIT, report
