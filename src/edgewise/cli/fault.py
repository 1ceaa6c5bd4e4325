"""`edgewise fault ...`: inject faults into a running cluster (see `edgewise cluster up`):
actor-level ones through Ray, node-level ones through the kernel on a testbed."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import ray
import typer

from edgewise.cli.common import out, state_dir, user_errors
from edgewise.errors import ConfigError, EdgewiseError
from edgewise.runtime.faults import FaultInjector
from edgewise.runtime.ray_cluster import ADDRESS_ENV, NAMESPACE, refresh_auth

__all__ = ["app"]

app = typer.Typer(help="Inject faults into a running edgewise cluster: kill, stall, cut; "
                  "on a testbed also whole devices and links (kill-device, stall-device, "
                  "cut-link, heal-link).", no_args_is_help=True)

Address = typer.Option("auto", envvar=ADDRESS_ENV, help="the Ray cluster to connect to")
Testbed = typer.Option("", "--testbed", help="the testbed (default: the only one up)")


def _connect(address: str) -> FaultInjector:
    refresh_auth()
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


def _nodes(testbed: str) -> FaultInjector:
    """An injector of node-level faults on a testbed (no Ray connection needed)."""
    from edgewise.testbed.control import TestbedNodes
    from edgewise.testbed.lifecycle import require_cgroups
    from edgewise.testbed.record import list_records, read_record

    names = [testbed] if testbed else list_records(state_dir())
    if len(names) != 1:
        found = ", ".join(names) or "none"
        raise ConfigError(f"name the testbed (testbeds up: {found})", field="--testbed")
    record = read_record(names[0], state_dir())
    if record is None:
        raise EdgewiseError(f"no testbed named {names[0]!r}")
    return FaultInjector(TestbedNodes(record, require_cgroups()))


def _hold(seconds: float | None, end: Callable[[], None], what: str) -> None:
    """Wait ``seconds`` (Ctrl-C ends it early), then ``end`` the fault; None: leave it."""
    if seconds is None:
        out.print(f"{what} until undone")
        return
    out.print(f"{what} for {seconds:g} s (Ctrl-C ends it now)")
    try:
        time.sleep(seconds)
    except KeyboardInterrupt:
        pass
    finally:
        end()
    out.print("ended")


@app.command("kill-device")
@user_errors
def kill_device(device: str, testbed: str = Testbed) -> None:
    """Kill a whole device: every process in its cgroup (its Ray node and all on it)."""
    fault = _nodes(testbed).kill_device(device)
    out.print(f"killed {fault.target}; `edgewise testbed restart-node` starts it again")


@app.command("stall-device")
@user_errors
def stall_device(device: str,
                 seconds: float = typer.Argument(None, min=0.1, help="(default: until "
                                                 "resume-device)"),
                 testbed: str = Testbed) -> None:
    """Freeze a whole device (the cgroup freezer): nothing on it runs, nothing answers."""
    injector = _nodes(testbed)
    injector.stall_device(device)
    _hold(seconds, lambda: injector.resume_device(device), f"froze {device}")


@app.command("resume-device")
@user_errors
def resume_device(device: str, testbed: str = Testbed) -> None:
    """Thaw a device frozen by stall-device."""
    _nodes(testbed).resume_device(device)
    out.print(f"resumed {device}")


@app.command("cut-link")
@user_errors
def cut_link(a: str, b: str = typer.Argument(None, help="(default: every link of A)"),
             seconds: float = typer.Option(None, min=0.1, help="heal after this long"),
             testbed: str = Testbed) -> None:
    """Cut the link between devices A and B in the kernel (tc drops what each sends to the
    other); without B, A's port on the switch goes down."""
    injector = _nodes(testbed)
    fault = injector.cut_link(a, b)
    _hold(seconds, lambda: injector.heal_link(a, b), f"cut {fault.target}")


@app.command("heal-link")
@user_errors
def heal_link(a: str, b: str = typer.Argument(None, help="(default: every link of A)"),
              testbed: str = Testbed) -> None:
    """Heal a link cut by cut-link."""
    _nodes(testbed).heal_link(a, b)
    out.print(f"healed {a} <-> {b or '*'}")
