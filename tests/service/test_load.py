"""Load on loopback: 50 concurrent clients make 2,000 requests to the status and metrics
routes of a running manager while a training job runs; none fails, and the job is not
slowed by more than 10 %: its epochs under load are compared (median) with the same epochs
of the same job run without the load just before and just after it (their mean, which
also cancels a drift of the host over the test), in the same manager. (Same epochs, not
the job's own unloaded epochs around the load: the job's epochs drift on their own, about
0.85 s for epochs 1–7 and 1.1 s from epoch 8 on in two unloaded runs, so a comparison with
the epochs around the load measured the drift as slowdown.) The p50 and p99 latencies and
the slowdown are printed and written to ``$EDGEWISE_LOAD_REPORT``."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from managerproc import ManagerProcess

pytestmark = pytest.mark.ray
CLIENTS, REQUESTS = 50, 2000
SLOWDOWN_LIMIT = 1.10
"""The issue's 10 % (measured 1.062, 0.922, 1.058 on the idle 2-core host; with another
core busy, 1.18-1.37: docs/manager-api.md)."""
BASELINE_EPOCHS = 4
"""Epochs done before the load starts (the first is a warm-up and never counted)."""
SPEC = {"epochs": 16, "batch_sizes": {"tx2-0": 16, "nano-0": 16, "nano-1": 16, "nano-2": 16}}


async def _load(url: str, headers: dict[str, str], job_id: str) -> dict[str, Any]:
    """``REQUESTS`` requests from ``CLIENTS`` concurrent clients, round-robin over the routes;
    the latency of each and the failures."""
    paths = [f"/api/v1/jobs/{job_id}", "/metrics", "/api/v1/health", "/api/v1/devices/metrics",
             "/api/v1/jobs"]
    latencies: list[float] = []
    failures: list[str] = []
    sent = 0
    limits = httpx.Limits(max_connections=CLIENTS, max_keepalive_connections=CLIENTS)
    async with httpx.AsyncClient(base_url=url, headers=headers, limits=limits,
                                 timeout=30) as client:

        async def one_client() -> None:
            nonlocal sent
            while sent < REQUESTS:
                path = paths[sent % len(paths)]
                sent += 1
                started = time.perf_counter()
                try:
                    response = await client.get(path)
                    if response.status_code != 200:
                        failures.append(f"{path}: {response.status_code}")
                except httpx.HTTPError as exc:
                    failures.append(f"{path}: {type(exc).__name__}")
                latencies.append(time.perf_counter() - started)

        started_at = time.time()
        await asyncio.gather(*(one_client() for _ in range(CLIENTS)))
    return {"latencies": latencies, "failures": failures, "start": started_at,
            "end": time.time()}


def _load_niced(url: str, headers: dict[str, str], job_id: str) -> dict[str, Any]:
    """The load from a process of the lowest priority: the load generator shares the host's
    two cores with the manager and the emulated devices, and its own CPU time is not what
    the test measures (the manager's is; real clients run elsewhere)."""
    os.nice(19)
    return asyncio.run(_load(url, headers, job_id))


def _epochs(manager: ManagerProcess, job_id: str) -> list[tuple[float, float]]:
    """(end time, seconds) of every completed epoch."""
    rows = manager.get(f"/api/v1/jobs/{job_id}/metrics").get("epoch_seconds", [])
    return [(at, seconds) for at, _, seconds in rows]


def _finished_epochs(manager: ManagerProcess, job_id: str) -> list[tuple[float, float]]:
    done = manager.wait_job(job_id, timeout_s=300)
    assert done["state"] == "succeeded", done
    return _epochs(manager, job_id)


def _quiet_run(manager: ManagerProcess) -> list[tuple[float, float]]:
    return _finished_epochs(manager, manager.post("/api/v1/jobs",
                                                  {"kind": "update", "spec": SPEC})["id"])


@pytest.mark.timeout(600)
def test_fifty_clients_do_not_fail_or_slow_a_running_job(manager: ManagerProcess,
                                                         tmp_path: Path) -> None:
    quiet = [_quiet_run(manager)]
    job = manager.post("/api/v1/jobs", {"kind": "update", "spec": SPEC})
    deadline = time.monotonic() + 300
    while len(_epochs(manager, job["id"])) < BASELINE_EPOCHS:
        assert time.monotonic() < deadline, manager.get(f"/api/v1/jobs/{job['id']}")
        time.sleep(0.2)
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=spawn) as pool:
        result = pool.submit(_load_niced, manager.url, manager.headers, job["id"]).result()
    loaded_run = _finished_epochs(manager, job["id"])
    quiet.append(_quiet_run(manager))
    hit = [k for k, (end, s) in enumerate(loaded_run)
           if k > 0 and end > result["start"] and end - s < result["end"]]
    loaded = [loaded_run[k][1] for k in hit]
    baseline = [statistics.fmean(q[k][1] for q in quiet) for k in hit
                if all(k < len(q) for q in quiet)]
    latencies = np.array(result["latencies"])
    report = {"requests": len(latencies), "clients": CLIENTS, "errors": len(result["failures"]),
              "p50_ms": round(1e3 * float(np.percentile(latencies, 50)), 1),
              "p99_ms": round(1e3 * float(np.percentile(latencies, 99)), 1),
              "load_seconds": round(result["end"] - result["start"], 2),
              "loaded_epochs": hit, "baseline_epoch_s": baseline, "loaded_epoch_s": loaded,
              "slowdown": round(statistics.median(loaded) / statistics.median(baseline), 3)
              if loaded and baseline else None}
    print("load test:", json.dumps(report))
    (Path(os.environ.get("EDGEWISE_LOAD_REPORT", tmp_path / "load.json"))).write_text(
        json.dumps(report, indent=1))
    assert result["failures"] == [] and len(latencies) == REQUESTS
    assert len(hit) >= 2 and len(baseline) == len(loaded), report
    assert report["slowdown"] <= SLOWDOWN_LIMIT, report
