"""Running the manager: its store, its cluster on Ray (emulated on loopback, or joined),
its jobs recovered from the last run, and the hardened HTTP server, until a signal."""

from __future__ import annotations

import logging
import os
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from edgewise.cluster.model import Cluster
from edgewise.jobs import ProblemApi
from edgewise.runtime.local_instance import loopback_only
from edgewise.service.app import Limits, announce, check_bind, create_app, make_server
from edgewise.service.auth import load_or_create_token, load_scrape_token, token_source
from edgewise.service.limits import ProcessLimiter
from edgewise.service.manager import JobManager
from edgewise.service.problems import discover_problems, job_kinds
from edgewise.service.reaper import start_reaper
from edgewise.service.retention import Retention
from edgewise.service.store import Store

if TYPE_CHECKING:
    from edgewise.runtime.ray_cluster import RayRuntime

__all__ = ["ManagerConfig", "loopback_ray", "lower_api_priority", "run_manager"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ManagerConfig:
    """Where the manager listens, keeps its state, and finds its cluster."""

    cluster: Cluster
    state_dir: Path
    db_path: Path | None = None
    host: str = "127.0.0.1"
    port: int = 8765
    allow_remote: bool = False
    address: str | None = None
    heartbeat_s: float = 1.0
    max_running: int = 2
    planning_seconds: float = 20.0
    planning_memory_mb: int = 2048
    api_nice: int = 0
    limits: Limits = field(default_factory=Limits)
    retention: Retention = field(default_factory=Retention)


CHECK_PRELOAD = ("edgewise.nn.workload.dryrun", "transformers.modeling_utils",
                 "transformers.models.auto.modeling_auto")
"""What the planning children import before any request, beside the problems' routers: a
job's workload is dry-run there (an ``hf:`` model needs transformers, 15-20 s to import on
a busy 2-core host, most of the 20 s limit)."""

JOB_CHECK_MIN_S = 120.0
"""The least time a running job's own checks get in their child (``JobContext.limited``):
its workload already passed the planning limit at submission; the same dry run, repeated
while jobs train beside it, may take longer, and a job must not fail for the host's load."""

GIL_SWITCH_S = 0.0005
"""The interpreter's thread switch interval in the manager (Python's default: 5 ms). The
HTTP server and the jobs' driver threads share one interpreter; under a crowd of clients
the server holds the GIL almost always, and each time a job's thread wants it back (to
start an epoch's tasks, to see them finish: some ten times an epoch) it waited up to the
interval. Measured with the load test (50 clients, 250 requests/s): the job's slowdown was
1.16, 1.04, 1.08 at 5 ms and 1.09, 0.90, 0.99 at 0.5 ms; docs/manager-api.md."""


def loopback_ray() -> None:
    """Keep a local Ray on loopback with no metrics exporter, before anything imports Ray
    (``init_local`` does it again; by then this process has read Ray's settings)."""
    if "ray" in sys.modules:
        _log.warning("Ray was imported before the manager set it to loopback")
    loopback_only()


def lower_api_priority(nice: int) -> None:
    """Lower this thread's CPU priority by ``nice`` levels (Linux: a thread's own nice):
    the HTTP server runs here, and the threads it starts (its thread pool) inherit it, while
    the jobs' threads come from the manager's starter thread and the devices' work from Ray,
    both at the process's priority. Off by default (``serve --api-nice 0``). Load test beside
    ``stress-ng --cpu 1``, slowdown of a running update: 0.976 at nice 10, 1.018 and 1.022
    at 0, with p50 latencies of 27 ms and 12-14 ms (docs/manager-api.md). Until the emulated
    devices ran at nice 0 (Ray starts workers at 15) no nice up to 14 could put the API
    below them."""
    if nice <= 0 or not hasattr(os, "setpriority"):
        return
    tid = threading.get_native_id()
    try:
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + nice))
    except OSError as exc:  # a platform without per-thread priorities: serve as it is
        _log.warning("could not lower the API's CPU priority: %s", exc)


def run_manager(config: ManagerConfig) -> None:
    """Serve until SIGINT or SIGTERM. A local emulation of the cluster runs on a loopback
    Ray guarded by a reaper (nothing outlives the manager, even after ``kill -9``); with
    ``address``, the manager joins that Ray cluster instead."""
    check_bind(config.host, config.port, config.allow_remote)
    sys.setswitchinterval(GIL_SWITCH_S)
    if config.address is None:
        loopback_ray()
        start_reaper()
    token, scrape = load_or_create_token(), load_scrape_token()
    store = Store(config.db_path or config.state_dir / "manager.db")
    problems = discover_problems()
    runtime = _ray(config)
    try:
        _serve(config, store, problems, runtime, (token, scrape))
    finally:
        runtime.shutdown()
        store.close()


def _ray(config: ManagerConfig) -> RayRuntime:
    """The cluster on Ray, with its serialization ready: made here, in the main thread,
    the modules it imports cannot race with a job's thread importing them too."""
    import ray

    from edgewise.runtime.ray_cluster import join_cluster, start_local

    runtime = (start_local(config.cluster) if config.address is None
               else join_cluster(config.cluster, config.address))
    ray.get(ray.put(0))
    return runtime


def _serve(config: ManagerConfig, store: Store, problems: list[ProblemApi],
           runtime: RayRuntime, tokens: tuple[str, str | None]) -> None:
    """Build the manager and its app, then (every import done) start the device agents and
    the jobs a previous run left, and serve until a signal."""
    from edgewise.service.cluster import BackgroundDeviceServices

    preload = [*sorted({p.router.__module__ for p in problems}), *CHECK_PRELOAD]
    limiter = ProcessLimiter(seconds=config.planning_seconds, memory_mb=config.planning_memory_mb,
                             preload=preload)
    limiter.warm()
    # a running job's dry runs, in children of their own: never refused (one place per
    # running job), so that a flood of planning requests cannot fail a job; at the job's
    # own priority (a request's planning runs niced, a job's start must not wait on it)
    job_limiter = ProcessLimiter(seconds=max(config.planning_seconds, JOB_CHECK_MIN_S),
                                 memory_mb=config.planning_memory_mb,
                                 parallel=config.max_running, queue=config.max_running,
                                 nice=0, preload=preload)
    manager = JobManager(store, job_kinds(problems), config.cluster, state_dir=config.state_dir,
                         runtime=runtime, max_running=config.max_running, limiter=limiter,
                         job_limiter=job_limiter, retention=config.retention)
    app = create_app(manager, tokens[0], scrape_token=tokens[1], limiter=limiter,
                     problems=problems, limits=config.limits)
    server = make_server(app, host=config.host, port=config.port,
                         allow_remote=config.allow_remote, limits=config.limits)
    devices = BackgroundDeviceServices(runtime, config.heartbeat_s)
    manager.devices = devices
    manager.recover()
    announce(config.host, config.port, token_source())
    lower_api_priority(config.api_nice)
    try:
        server.run()
    finally:
        manager.close("the manager shut down while the job ran")
        devices.close()
