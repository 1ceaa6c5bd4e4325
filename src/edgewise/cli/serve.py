"""`edgewise serve`: the manager's HTTP API over an emulated cluster."""

from __future__ import annotations

from pathlib import Path

import typer

from edgewise.cli.common import err, state_dir, user_errors
from edgewise.cluster.examples import example_path
from edgewise.cluster.schema import load_cluster
from edgewise.runtime.health import StrikeLedger
from edgewise.runtime.jobs import ApiContext
from edgewise.runtime.ray_cluster import start_local
from edgewise.service import serve as run_server
from edgewise.service.app import check_bind
from edgewise.service.ray_backend import RayJobBackend

__all__ = ["serve"]

EXAMPLE = example_path("deep-edge-testbed.yaml")


@user_errors
def serve(
    cluster: Path = typer.Option(EXAMPLE, help="cluster YAML file to emulate"),
    host: str = typer.Option("127.0.0.1", help="address to bind (loopback by default)"),
    port: int = typer.Option(8765, min=1, max=65535),
    allow_remote: bool = typer.Option(False, help="allow binding a non-loopback address"),
    heartbeat: float = typer.Option(1.0, help="heartbeat period, seconds"),
) -> None:
    """Start the emulated cluster and serve the manager API (bearer token required)."""
    check_bind(host, port, allow_remote)
    spec = load_cluster(cluster)
    runtime = start_local(spec)
    state = state_dir()
    backend = RayJobBackend(runtime, StrikeLedger(state / "strikes.json"), state,
                            heartbeat_s=heartbeat)
    try:
        err.print(f"manager for cluster {spec.name} on http://{host}:{port}/api/v1 "
                  f"(OpenAPI at /openapi.json)")
        run_server(backend, host=host, port=port, allow_remote=allow_remote,
                   context=ApiContext(state_dir=state, models_dir=state / "models"))
    finally:
        backend.close()
        runtime.shutdown()
