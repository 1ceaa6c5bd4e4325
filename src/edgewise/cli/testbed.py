"""`edgewise testbed ...`: a cluster file made real on this host (namespaces, cgroups, tc)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from edgewise.cli.common import err, out, state_dir, user_errors
from edgewise.cli.tables import print_fitted
from edgewise.cluster.schema import load_cluster
from edgewise.errors import ConfigError
from edgewise.testbed import lifecycle
from edgewise.testbed.driver import exec_env, joined
from edgewise.testbed.host import TestbedError, host_facts
from edgewise.testbed.plan import DEFAULT_SUBNET
from edgewise.testbed.record import Record, list_records, read_record
from edgewise.testbed.status import default_name, ray_states, status

__all__ = ["app"]

app = typer.Typer(help="A kernel-enforced edge testbed: every device a Ray node in its own "
                  "network namespace, cgroup CPU/memory limits, tc-shaped links.",
                  no_args_is_help=True)

ClusterFile = Annotated[Path, typer.Argument(help="a cluster YAML file (see docs/cluster.md)")]
Name = Annotated[str | None, typer.Argument(help="the testbed (default: the only one up)")]


def _state() -> Path:
    return state_dir()


def _named(name: str | None) -> str:
    """``name``, or the only recorded testbed's; ConfigError when there are several."""
    if name:
        return name
    names = list_records(_state())
    if len(names) == 1:
        return names[0]
    if not names:
        raise TestbedError("no testbed is up (edgewise testbed up FILE)")
    raise ConfigError(f"several testbeds are up ({', '.join(names)}): name one", field="NAME")


def _record(name: str | None) -> Record:
    chosen = _named(name)
    record = read_record(chosen, _state())
    if record is None:
        raise TestbedError(f"no testbed named {chosen!r}")
    return record


def _nodes_table(info: dict[str, Any]) -> Table:
    table = Table(title=f"testbed {info['name']} ({info['cluster']}), time dilation "
                        f"{info['time_dilation']:g}x")
    for column in ("device", "address", "ray", "quota (cores)", "memory MB", "procs", "state"):
        table.add_column(column)
    for n in info["nodes"]:
        flags = [f for f, on in (("head", n["head"]), ("no raylet", not n["raylet"]),
                                 ("frozen", n["frozen"]), ("port down", not n["port_up"])) if on]
        cut = [lk["peer"] for lk in n["links"] if lk["cut"]]
        flags += [f"cut from {', '.join(cut)}"] if cut else []
        table.add_row(n["device"], n["address"], n["ray"], f"{n['quota_cores']:.3f}",
                      f"{n['memory_used_mb']:.0f}/{n['memory_mb']}", str(n["processes"]),
                      ", ".join(flags) or "ok")
    return table


def _latency_line(info: dict[str, Any]) -> str:
    if info["latency_in"] == "netem":
        return "latency: netem on every link (x the dilation)"
    return ("latency: this kernel has no netem, so latency stays in edgewise's transport "
            f"(each link's latency x {info['time_dilation']:g}); bandwidth is shaped by tc")


@app.command()
@user_errors
def up(
    file: ClusterFile,
    name: str = typer.Option("", help="testbed name (default: from the cluster's name)"),
    subnet: str = typer.Option(DEFAULT_SUBNET, help="private subnet for the devices"),
    host_speed: float = typer.Option(0.0, help="one host core on the catalog's scale "
                                     "(Jetson Nano = 1); 0: measure it"),
    cpu_budget: float = typer.Option(0.0, help="host cores the devices share (0: all but "
                                     "half a core, left to the driver)"),
) -> None:
    """Bring a testbed up: a namespace, cgroup and Ray node per device of FILE."""
    chosen = name or default_name(load_cluster(file).name)
    host = host_facts(host_speed or None, cpu_budget or None)
    record = lifecycle.up(file, chosen, subnet=subnet, state=_state(), host=host,
                          echo=lambda line: err.print(line, highlight=False))
    registered = dict.fromkeys(record.cluster.device_names, "ALIVE")  # up checked each
    info = status(record, lifecycle.require_cgroups(), registered)
    print_fitted(_nodes_table(info), out)
    out.print(f"up in {record.up_seconds:.1f} s; head {record.plan.head_address}; host core "
              f"= {record.plan.host.speed:g} Nano, CPU budget {record.plan.host.cpu_budget_cores:g}"
              f" cores; times measured here are {info['time_dilation']:g}x device time")
    out.print(_latency_line(info))
    out.print(f"run work on it: edgewise testbed exec {chosen} -- edgewise ... --address auto")


@app.command("status")
@user_errors
def status_command(
    name: Name = None,
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
    ask_ray: bool = typer.Option(True, "--ray/--no-ray", help="ask Ray's head for node states"),
) -> None:
    """Nodes, their Ray state, quotas, limits and links."""
    record = _record(name)
    states = None
    if ask_ray:
        try:
            with joined(record, wait_s=0, require_all=False):
                states = ray_states(record)
        except Exception as exc:  # the head may be dead; the kernel's view still counts
            if not as_json:
                err.print(f"Ray's head did not answer: {str(exc).splitlines()[0][:200]}")
        info = status(record, lifecycle.require_cgroups(), states)
    else:
        info = status(record, lifecycle.require_cgroups())
    if as_json:
        print(json.dumps(info, indent=1))
        return
    print_fitted(_nodes_table(info), out)
    out.print(_latency_line(info))


@app.command("exec", context_settings={"allow_extra_args": True,
                                       "ignore_unknown_options": True})
@user_errors
def exec_command(
    name: str = typer.Argument(..., help="the testbed"),
    command: list[str] = typer.Argument(..., help="the command (after --)"),
) -> None:
    """Run a command as a driver inside the testbed's network: on the head device's
    namespace, with RAY_ADDRESS/EDGEWISE_RAY_ADDRESS and the token set (--address auto)."""
    record = _record(name)
    env = {k: v for k, v in os.environ.items() if k != "RAY_AUTH_TOKEN"} | exec_env(record)
    argv = ["ip", "netns", "exec", record.plan.head.netns, *command]
    try:
        os.execvpe("ip", argv, env)
    except OSError as exc:
        raise TestbedError(f"cannot run {command[0]!r}: {exc.strerror}") from None


@app.command()
@user_errors
def down(name: Name = None) -> None:
    """Remove every namespace, veth, bridge, cgroup and process the testbed made."""
    if name is None and not list_records(_state()):
        out.print("no testbed is up: nothing to remove")
        return
    chosen = _named(name)
    result = lifecycle.down(chosen, state=_state())
    if not result.found:
        out.print(f"no testbed named {chosen!r}: nothing to remove")
        return
    removed = ", ".join(f"{v} {k}" for k, v in result.removed.items())
    left = {k: v for k, v in result.leftovers.items() if v}
    if left:
        raise TestbedError(f"testbed {chosen!r} removed only in part ({removed}); left: "
                           + ", ".join(f"{v} {k}" for k, v in left.items()))
    out.print(f"testbed {chosen!r} is down: removed {removed}; nothing left")


@app.command("restart-node")
@user_errors
def restart_node(name: str = typer.Argument(..., help="the testbed"),
                 device: str = typer.Argument(..., help="the device to start again")) -> None:
    """Start a device's Ray node again (after `edgewise fault kill-device`)."""
    lifecycle.restart_node(_named(name), device, state=_state())
    out.print(f"{device} is back in testbed {name!r}")
