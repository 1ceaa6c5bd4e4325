"""The manager bench's run: one served manager (a store of finished jobs made beforehand),
measured part by part, then the runs outside ``serve`` whose Ray listeners are checked."""

from __future__ import annotations

import functools
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from edgewise.bench import BenchContext, Figures
from edgewise.service.loadbench.crowds import big_workload, half_open, planning_flood
from edgewise.service.loadbench.errors import server_errors
from edgewise.service.loadbench.listeners import COMMANDS, run_listeners
from edgewise.service.loadbench.served import ServedManager
from edgewise.service.loadbench.slowdown import running_job_slowdown
from edgewise.service.store import Store

__all__ = ["jobs_pages", "real", "store_finished_jobs"]


def store_finished_jobs(path: Path, count: int) -> None:
    """``count`` finished update jobs, as a busy manager leaves them (summary figures, a
    reason for the failed ones), in the store at ``path``."""
    store = Store(path)
    now = time.time()
    try:
        for k in range(count):
            row = store.create_job("update", {"epochs": 3, "seed": k}, now=now - count + k)
            failed = k % 10 == 0
            store.update_job(row.id, state="failed" if failed else "succeeded", progress=1.0,
                             attempts=1, started_at=now - count + k, finished_at=now - count + k,
                             reason="lost tx2-0: the worker died (strike 3)" if failed else None,
                             summary={"epoch": 3, "epochs": 3, "val_accuracy": 0.9478,
                                      "restarts": 0, "stopped_early": 0})
    finally:
        store.close()


def jobs_pages(manager: ServedManager) -> dict[str, Any]:
    """Every page of ``GET /api/v1/jobs`` at the default size: the largest in bytes, and
    how many jobs they hold (each once)."""
    sizes, ids = [], []
    cursor: str | None = None
    with manager.client(timeout=30) as client:
        for _ in range(10_000):  # bounded: 10,000 pages of at least one job
            answer = client.get("/api/v1/jobs", params={"cursor": cursor} if cursor else {})
            answer.raise_for_status()
            sizes.append(len(answer.content))
            page = answer.json()
            ids += [j["id"] for j in page["jobs"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
    return {"bytes_max": max(sizes), "pages": len(sizes), "jobs": len(ids),
            "each_once": len(ids) == len(set(ids))}


def _part(figures: Figures, key: str, measure: Callable[[], Any]) -> None:
    """``figures[key] = measure()``; a part that fails is recorded with its error (and
    its traceback on stderr), so that the other parts still report."""
    try:
        figures[key] = measure()
    except Exception as exc:  # one part's failure must not hide the others' figures
        traceback.print_exc(file=sys.stderr)
        figures[key] = {"error": f"{type(exc).__name__}: {exc}"}


def _served_parts(ctx: BenchContext, manager: ServedManager, folder: Path) -> Figures:
    hold_s = min(10.0, ctx.option("hold_s")) if ctx.quick else float(ctx.option("hold_s"))
    load_jobs = 1 if ctx.quick else int(ctx.option("load_jobs"))
    cases = min(2, ctx.option("cases")) if ctx.quick else int(ctx.option("cases"))
    figures: Figures = {}
    listeners = set(manager.listeners())
    steps: list[tuple[str, str, Callable[[], Any]]] = [
        ("jobs pages", "jobs_pages", lambda: jobs_pages(manager)),
        ("600 half-open connections without a token", "half_open_600",
         lambda: half_open(manager, 600, hold_s, "/api/v1/health")),
        ("5,000 half-open connections without a token", "half_open_5000",
         lambda: half_open(manager, 5000, hold_s, "/api/v1/jobs?limit=10")),
        ("45 exact solves at once", "planning_flood", lambda: planning_flood(manager)),
        ("a 227 M-parameter workload", "big_workload", lambda: big_workload(manager)),
        ("a running job under 50 clients", "load",
         lambda: running_job_slowdown(manager, load_jobs, folder)),
        ("bad requests and Schemathesis", "errors",
         lambda: server_errors(manager, cases, ctx.seed))]
    for k, (what, key, measure) in enumerate(steps):
        ctx.progress(what, 0.8 * k / len(steps))
        _part(figures, key, measure)
        listeners |= set(manager.listeners())
    figures["serve_listeners"] = sorted(listeners)
    return figures


def real(ctx: BenchContext) -> Figures:
    """Every part; the issue's keys at the top level, the details beside them."""
    with tempfile.TemporaryDirectory(prefix="edgewise-bench-manager-") as tmp:
        folder = Path(tmp)
        stored = int(ctx.option("stored_jobs"))
        store_finished_jobs(folder / "manager.db", stored)
        manager = ServedManager(folder, options=("--keep-jobs", str(stored + 1000)))
        manager.start()
        try:
            parts = _served_parts(ctx, manager, folder)
        except Exception:
            print(f"the manager's log ends:\n{manager.log_tail(40)}", file=sys.stderr)
            raise
        finally:
            manager.stop()
        ray: Figures = {"serve": {"listeners": parts.pop("serve_listeners")}}
        for k, (name, args) in enumerate(COMMANDS.items()):
            ctx.progress(f"Ray's listeners in {name}", 0.8 + 0.1 * k)
            _part(ray, name, functools.partial(run_listeners, name, args, folder))
    return _figures(parts, ray)


def _get(parts: Figures, part: str, key: str) -> Any:
    """A part's figure, None where the part failed (its error is in ``details``)."""
    return parts.get(part, {}).get(key)


def _figures(parts: Figures, ray: Figures) -> Figures:
    errors = [_get(parts, "errors", "server_errors"), _get(parts, "load", "errors")]
    listeners = [r.get("listeners") for r in ray.values()]
    return {
        "server_errors": None if None in errors else sum(errors),
        "health_ok_fraction_under_half_open_600": _get(parts, "half_open_600", "ok_fraction"),
        "authenticated_ok_fraction_under_half_open_5000":
            _get(parts, "half_open_5000", "ok_fraction"),
        "cheap_read_p99_ms_under_planning_flood":
            _get(parts, "planning_flood", "cheap_read_p99_ms"),
        "planning_flood_429_seconds_max": _get(parts, "planning_flood", "busy_seconds_max"),
        "manager_rss_growth_mb_big_workload": _get(parts, "big_workload", "rss_growth_mb"),
        "jobs_page_bytes_max": _get(parts, "jobs_pages", "bytes_max"),
        "ray_non_loopback_listeners":
            None if None in listeners else sum(len(found) for found in listeners),
        "running_job_slowdown_under_50_clients": _get(parts, "load", "slowdown"),
        "running_job_p50_ms_under_50_clients": _get(parts, "load", "p50_ms"),
        "running_job_p99_ms_under_50_clients": _get(parts, "load", "p99_ms"),
        "details": {**parts, "ray_listeners": ray},
    }
