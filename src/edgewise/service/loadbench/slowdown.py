"""A running job under 50 clients (moved here from the test suite: a ratio of timings is a
benchmark's figure, not a test's verdict).

Each job alternates quiet and loaded windows. After ``WARMUP_EPOCHS`` it runs
``QUIET_EPOCHS`` epochs with no load, then the clients send ``WINDOW_REQUESTS`` requests,
then quiet again, and so on, ending quiet. Each epoch that ran wholly inside a loaded window
is divided by the mean of the epochs wholly inside the quiet windows just before and after
it; the slowdown is the median of these ratios over the jobs. The bench polls the job at the
same period in both kinds of window. Within one job, because a run's own luck (where the
scheduler put its processes) moves every epoch of it (docs/manager-api.md).

The clients are hey (compiled; 0.07 ms of CPU a request, against 0.35-0.55 ms for aiohttp's
client, more than the manager spends answering), one per route with its share of the 50
clients, each client sending a request every ``PAUSE_S``, all at the lowest CPU priority.
"""

from __future__ import annotations

import csv
import shutil
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from edgewise.errors import ConfigError, RuntimeFault
from edgewise.service.loadbench.served import ServedManager

__all__ = ["CLIENTS", "running_job_slowdown"]

CLIENTS, PAUSE_S, WINDOWS, WINDOW_REQUESTS = 50, 0.2, 4, 500
WARMUP_EPOCHS, QUIET_EPOCHS, POLL_S = 2, 2, 0.2
SPEC = {"epochs": 40, "batch_sizes": {"tx2-0": 16, "nano-0": 16, "nano-1": 16, "nano-2": 16}}
"""More epochs than the windows need (about 24): the bench stops the job after its last."""
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

    def holds(self, end: float, seconds: float) -> bool:
        return self.start <= end - seconds and end <= self.end


def hey_path() -> str:
    found = shutil.which("hey")
    if found is None:
        raise ConfigError("hey is not installed (make load-deps, or apt-get install hey)",
                          field="hey")
    return found


class Load:
    """One loaded window: hey runs, one per route."""

    def __init__(self, manager: ServedManager, job_id: str, out: Path) -> None:
        self.window = Window(loaded=True, start=time.time())
        self._outputs = [out / f"hey-{k}.csv" for k in range(len(PATHS))]
        headers = [a for k, v in manager.headers.items() for a in ("-H", f"{k}: {v}")]
        self._runs = []
        for path, output in zip(PATHS, self._outputs, strict=True):
            with output.open("w") as file:
                self._runs.append(subprocess.Popen(
                    ["nice", "-n", "19", hey_path(), "-n", str(WINDOW_REQUESTS // len(PATHS)),
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
        return self.window


def _epochs(client: httpx.Client, job_id: str) -> list[tuple[float, float]]:
    rows = client.get(f"/api/v1/jobs/{job_id}/metrics").json().get("epoch_seconds", [])
    return [(at, seconds) for at, _, seconds in rows]


def _alternate(manager: ServedManager, client: httpx.Client, job_id: str,
               out: Path) -> list[Window]:
    """Quiet and loaded windows over a running job, polling it every ``POLL_S``, until the
    last quiet window holds ``QUIET_EPOCHS`` whole epochs (at most 10 minutes)."""
    windows: list[Window] = []
    load: Load | None = None
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        epochs = _epochs(client, job_id)
        job = client.get(f"/api/v1/jobs/{job_id}").json()
        if job["state"] not in ("pending", "planning", "running"):
            raise RuntimeFault(f"the load job ended {job['state']} before its windows were "
                               f"done: {job.get('reason')}")
        if load is not None:
            if load.done():
                windows += [load.finish(), Window(loaded=False, start=time.time())]
                load = None
        elif not windows:
            if len(epochs) >= WARMUP_EPOCHS:
                windows.append(Window(loaded=False, start=time.time()))
        elif sum(1 for end, s in epochs if end - s >= windows[-1].start) >= QUIET_EPOCHS:
            windows[-1].end = time.time()
            if sum(w.loaded for w in windows) == WINDOWS:
                return windows
            load = Load(manager, job_id, out)
        time.sleep(POLL_S)
    raise RuntimeFault("the load windows did not complete within 10 minutes")


def _ratios(epochs: list[tuple[float, float]], windows: list[Window]) -> list[float]:
    ratios = []
    for k, window in enumerate(windows):
        if window.loaded:
            quiet = [s for w in (windows[k - 1], windows[k + 1]) for end, s in epochs
                     if w.holds(end, s)]
            ratios += [s / statistics.fmean(quiet) for end, s in epochs
                       if window.holds(end, s)]
    return ratios


def _one_job(manager: ServedManager, out: Path) -> tuple[list[float], list[Window]]:
    with manager.client(timeout=60) as client:
        job = client.post("/api/v1/jobs", json={"kind": "update", "spec": SPEC}).json()
        windows = _alternate(manager, client, job["id"], out)
        epochs = _epochs(client, job["id"])
        client.post(f"/api/v1/jobs/{job['id']}/stop")
        for _ in range(240):  # bounded: 2 minutes for the stop to land
            if client.get(f"/api/v1/jobs/{job['id']}").json()["state"] in (
                    "stopped", "succeeded", "failed", "interrupted"):
                break
            time.sleep(0.5)
    return _ratios(epochs, windows), windows


def running_job_slowdown(manager: ServedManager, jobs: int, out: Path) -> dict[str, Any]:
    """The slowdown of ``jobs`` update jobs, one after the other, under the 50 clients."""
    hey_path()
    runs = [_one_job(manager, out) for _ in range(jobs)]
    loads = [w for _, windows in runs for w in windows if w.loaded]
    latencies = np.concatenate([w.latencies for w in loads])
    ratios = [r for rs, _ in runs for r in rs]
    return {"slowdown": round(statistics.median(ratios), 3) if ratios else None,
            "slowdown_per_job": [round(statistics.median(r), 3) if r else None
                                 for r, _ in runs],
            "p50_ms": round(1e3 * float(np.percentile(latencies, 50)), 1),
            "p99_ms": round(1e3 * float(np.percentile(latencies, 99)), 1),
            "requests": len(latencies),
            "errors": sum(len(w.failures) for w in loads),
            "failures": [f for w in loads for f in w.failures][:10]}
