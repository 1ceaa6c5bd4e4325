"""`edgewise cluster ...`: check a cluster file, list device types, bring a cluster up."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Annotated

import ray
import typer
from rich.live import Live
from rich.markup import escape

from edgewise.cli.common import err, out, user_errors
from edgewise.cli.render import catalog_table, cluster_table, metrics_table
from edgewise.cli.tables import print_fitted
from edgewise.cluster.catalog import catalog
from edgewise.cluster.schema import load_cluster
from edgewise.runtime.agent import distinct, start_agents
from edgewise.runtime.launch import monitor_handle
from edgewise.runtime.ray_cluster import (
    ADDRESS_ENV,
    INLINE_ENV,
    connect,
    head_device,
    head_start_line,
    ray_start_line,
)

__all__ = ["app"]

app = typer.Typer(help="Cluster files: check them, list device types, start an emulated cluster.",
                  no_args_is_help=True)

ClusterFile = Annotated[Path, typer.Argument(help="a cluster YAML file (see docs/cluster.md)")]


@app.command()
@user_errors
def check(file: ClusterFile) -> None:
    """Validate a cluster file; exit 0 with a summary, or 2 naming the field and problem."""
    cluster = load_cluster(file)
    print_fitted(cluster_table(cluster), out)
    out.print(f"[green]ok[/]: {escape(str(file))}")


@app.command()
def types(as_json: bool = typer.Option(False, "--json",
                                       help="print one JSON object: type name → figures")
          ) -> None:
    """The catalog of real edge device types and their datasheet figures."""
    if as_json:
        print(json.dumps({name: dataclasses.asdict(t) for name, t in catalog().items()}))
        return
    print_fitted(catalog_table(), out)


@app.command("join-lines")
@user_errors
def join_lines(
    file: ClusterFile, head: str = typer.Option("HEAD_IP:6379", help="head address")
) -> None:
    """The `ray start` lines that make real devices the cluster file's devices: the head's
    first (on the manager or server device), then each other device's; with token
    authentication (Ray 2.x), and how the head's token reaches each device."""
    cluster = load_cluster(file)
    first = head_device(cluster)
    host, _, port = head.rpartition(":")
    # token authentication (Ray 2.x), and a parameter server's frames passed inline
    env = "\n".join(f"export {k}={v}" for k, v in {"RAY_AUTH_MODE": "token", **INLINE_ENV}.items())
    print(f"# 1. On the head, {first.name} ({first.type}): make the cluster's token "
          f"(~/.ray/auth_token), then start Ray.\n{env}\n"
          f"ray get-auth-token --generate\n{head_start_line(first, int(port or 6379))}")
    print("# 2. Give every other device (and every machine that runs edgewise with "
          f"--address {head}) the head's token, e.g.\n"
          f"#      scp {host or 'HEAD_IP'}:.ray/auth_token ~/.ray/auth_token\n"
          "#    or `export RAY_AUTH_TOKEN=...` with the output of `ray get-auth-token` on "
          "the head.\n# 3. On each device:")
    for d in cluster.devices:
        if d.name != first.name:
            print(f"# {d.name} ({d.type})\n{env}\n{ray_start_line(d, head)}")


@app.command()
@user_errors
def up(
    file: ClusterFile,
    seconds: float = typer.Option(0, help="stop after this many seconds (0: until Ctrl-C)"),
    address: str = typer.Option("", envvar=ADDRESS_ENV,
                                help="join this Ray cluster (host:port or auto) instead of "
                                "emulating locally"),
    period: float = typer.Option(1.0, help="heartbeat and refresh period, seconds"),
) -> None:
    """Start the cluster (emulated on this host, or joined), then show live device metrics."""
    cluster = load_cluster(file)
    runtime = connect(cluster, address)
    try:
        print_fitted(cluster_table(cluster, runtime.stretch if runtime.emulated else None), out)
        monitor = monitor_handle(runtime, period)
        agents = distinct(start_agents(runtime, monitor, period, 64))
        ray.get([a.ping.remote() for a in agents])
        err.print("[dim]running; Ctrl-C stops the cluster[/]")
        deadline = time.monotonic() + seconds if seconds > 0 else float("inf")
        with Live(metrics_table(cluster, {}, runtime.emulated), console=out,
                  refresh_per_second=2) as live:
            while time.monotonic() < deadline:
                time.sleep(min(period, max(deadline - time.monotonic(), 0)))
                live.update(metrics_table(cluster, ray.get(monitor.device_metrics.remote()),
                                          runtime.emulated))
    finally:
        runtime.shutdown()
