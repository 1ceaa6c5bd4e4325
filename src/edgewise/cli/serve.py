"""`edgewise serve`: the manager (API, dashboard, metrics) over an emulated cluster."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from edgewise.cli.common import err, state_dir, user_errors
from edgewise.cluster.examples import example_path
from edgewise.jobs.workload import DATA_DIR_ENV

__all__ = ["serve"]

EXAMPLE = example_path("deep-edge-testbed.yaml")


@user_errors
def serve(
    cluster: Path = typer.Option(EXAMPLE, help="cluster YAML file to emulate (or to join)"),
    host: str = typer.Option("127.0.0.1", help="address to bind (loopback by default)"),
    port: int = typer.Option(8765, min=1, max=65535),
    allow_remote: bool = typer.Option(False, help="allow binding a non-loopback address"),
    heartbeat: float = typer.Option(1.0, min=0.05, help="heartbeat period, seconds"),
    address: str | None = typer.Option(
        None, help="join this Ray cluster (real devices, a testbed) instead of emulating"),
    db: Path | None = typer.Option(
        None, help="the job store (SQLite); default: <state dir>/manager.db"),
    max_running: int = typer.Option(2, min=1, max=64, help="jobs that run at once"),
    planning_seconds: float = typer.Option(20.0, min=1.0, max=3600.0,
                                           help="time limit of one planning request"),
    api_nice: int = typer.Option(
        0, min=0, max=19, help="how much lower than the jobs' the CPU priority of the API "
                               "is (nice levels; 0: the same); higher: the jobs first, "
                               "slower answers (docs/manager-api.md)"),
    keep_jobs: int = typer.Option(
        1000, min=0, max=10_000_000, help="finished jobs kept; older ones are pruned (never "
                                          "an active one)"),
    keep_days: float = typer.Option(30.0, min=0.001, max=36_500.0,
                                    help="days a finished job is kept at most"),
    data_dir: Path | None = typer.Option(
        None, help="the folder whose images, npz and safetensors files update jobs' "
                   "workloads may name (relative paths); default: <state dir>/data"),
) -> None:
    """Start the cluster and serve the manager: API, dashboard at /, Prometheus /metrics
    (bearer token required; the dashboard asks for it). Update jobs may train a workload
    (a built-in or hf: model) on files in the data folder (--data-dir)."""
    from edgewise.cluster.schema import load_cluster
    from edgewise.service.app import check_bind
    from edgewise.service.retention import Retention
    from edgewise.service.server import ManagerConfig, loopback_ray, run_manager

    check_bind(host, port, allow_remote)
    if address is None:
        loopback_ray()  # before anything imports Ray
    spec = load_cluster(cluster)
    state = state_dir()
    os.environ[DATA_DIR_ENV] = str((data_dir or state / "data").absolute())
    err.print(f"manager for cluster {spec.name}: dashboard http://{host}:{port}/, "
              f"API /api/v1, OpenAPI /openapi.json, state in {state}")
    run_manager(ManagerConfig(cluster=spec, state_dir=state, db_path=db, host=host, port=port,
                              allow_remote=allow_remote, address=address,
                              heartbeat_s=heartbeat, max_running=max_running,
                              planning_seconds=planning_seconds, api_nice=api_nice,
                              retention=Retention(keep_jobs, keep_days)))
