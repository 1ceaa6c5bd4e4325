"""`edgewise fault ...`: inject faults into a running cluster (see `edgewise cluster up`)."""

from __future__ import annotations

import logging

import ray
import typer

from edgewise.cli.common import out, user_errors
from edgewise.errors import EdgewiseError
from edgewise.runtime.faults import FaultInjector
from edgewise.runtime.ray_cluster import NAMESPACE

__all__ = ["app"]

app = typer.Typer(help="Inject faults into a running edgewise cluster: kill, stall, cut.",
                  no_args_is_help=True)

Address = typer.Option("auto", help="the Ray cluster to connect to")


def _connect(address: str) -> FaultInjector:
    try:
        ray.init(address=address, namespace=NAMESPACE, logging_level=logging.ERROR,
                 log_to_driver=False)
    except (ConnectionError, RuntimeError) as exc:
        raise EdgewiseError(f"cannot reach a Ray cluster at {address!r}: {exc}") from None
    return FaultInjector()


@app.command("list")
@user_errors
def list_actors(address: str = Address) -> None:
    """The edgewise actors that faults can target."""
    for name in _connect(address).actors():
        out.print(name)


@app.command()
@user_errors
def kill(name: str, address: str = Address) -> None:
    """Kill an actor by name (e.g. a worker-... from `edgewise fault list`)."""
    fault = _connect(address).kill(name)
    out.print(f"killed {fault.target}")


@app.command()
@user_errors
def stall(device: str, seconds: float = typer.Argument(..., min=0.1),
          address: str = Address) -> None:
    """Freeze a device for SECONDS: its members stop working and stop beating."""
    _connect(address).stall(device, seconds)
    out.print(f"stalled {device} for {seconds:g} s")


@app.command()
@user_errors
def cut(a: str, b: str, seconds: float = typer.Argument(..., min=0.1),
        address: str = Address) -> None:
    """Cut the emulated link between devices A and B for SECONDS."""
    _connect(address).cut(a, b, seconds)
    out.print(f"cut {a} <-> {b} for {seconds:g} s")
