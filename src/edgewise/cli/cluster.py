"""`edgewise cluster ...`: check a cluster file, list device types, bring a cluster up."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import ray
import typer
from rich.live import Live
from rich.markup import escape

from edgewise.cli.common import err, out, user_errors
from edgewise.cli.render import catalog_table, cluster_table, metrics_table
from edgewise.cluster.schema import load_cluster
from edgewise.runtime.agent import DeviceAgent
from edgewise.runtime.launch import monitor_handle
from edgewise.runtime.ray_cluster import join_cluster, ray_start_line, start_local

__all__ = ["app"]

app = typer.Typer(help="Cluster files: check them, list device types, start an emulated cluster.",
                  no_args_is_help=True)

ClusterFile = Annotated[Path, typer.Argument(help="a cluster YAML file (see docs/cluster.md)")]


@app.command()
@user_errors
def check(file: ClusterFile) -> None:
    """Validate a cluster file; exit 0 with a summary, or 2 naming the field and problem."""
    cluster = load_cluster(file)
    out.print(cluster_table(cluster))
    out.print(f"[green]ok[/]: {escape(str(file))}")


@app.command()
def types() -> None:
    """The catalog of real edge device types and their datasheet figures."""
    out.print(catalog_table())


@app.command("join-lines")
@user_errors
def join_lines(
    file: ClusterFile, head: str = typer.Option("HEAD_IP:6379", help="head address")
) -> None:
    """The `ray start` line each real device runs to join as its cluster-file device."""
    cluster = load_cluster(file)
    for d in cluster.devices:
        print(f"# {d.name} ({d.type})\n{ray_start_line(d, head)}")


@app.command()
@user_errors
def up(
    file: ClusterFile,
    seconds: float = typer.Option(0, help="stop after this many seconds (0: until Ctrl-C)"),
    address: str = typer.Option("", help="join this Ray cluster instead of emulating locally"),
    period: float = typer.Option(1.0, help="heartbeat and refresh period, seconds"),
) -> None:
    """Start the cluster (emulated on this host, or joined), then show live device metrics."""
    cluster = load_cluster(file)
    runtime = join_cluster(cluster, address) if address else start_local(cluster)
    try:
        out.print(cluster_table(cluster, runtime.stretch if runtime.emulated else None))
        monitor = monitor_handle(runtime, period)
        agents = [DeviceAgent.options(  # type: ignore[attr-defined]
            **runtime.actor_options(d.name, 64, name=f"agent-{d.name}"), get_if_exists=True
        ).remote(d.name, monitor, period) for d in cluster.devices]
        ray.get([a.ping.remote() for a in agents])
        err.print("[dim]running; Ctrl-C stops the cluster[/]")
        deadline = time.monotonic() + seconds if seconds > 0 else float("inf")
        with Live(metrics_table(cluster, {}), console=out, refresh_per_second=2) as live:
            while time.monotonic() < deadline:
                time.sleep(min(period, max(deadline - time.monotonic(), 0)))
                live.update(metrics_table(cluster, ray.get(monitor.device_metrics.remote())))
    finally:
        runtime.shutdown()
