"""Bring a testbed up, take it down, restart one of its nodes.

``up`` makes, in order: the bridge namespace, per device a namespace with a veth to the
bridge, its address and its htb shaping, a cgroup with the device's memory limit, the Ray
node (head first); it then checks that every device registered and sets the CPU quotas
(the nodes boot unthrottled, like devices booted before an experiment). Any failure or
interruption removes everything made so far.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from edgewise.cluster.schema import load_cluster, read_yaml
from edgewise.testbed import net
from edgewise.testbed.cgroups import Cgroups, detect
from edgewise.testbed.driver import joined
from edgewise.testbed.host import TestbedError, host_facts, ray_binary, require
from edgewise.testbed.nodes import start_node, start_nodes
from edgewise.testbed.plan import (
    DEFAULT_SUBNET,
    HostFacts,
    TestbedPlan,
    check_name,
    plan_testbed,
)
from edgewise.testbed.record import (
    Record,
    locked,
    read_record,
    record_path,
    remove_record,
    write_record,
    write_token,
)
from edgewise.testbed.teardown import leftovers, shielded, signals_handled, teardown

__all__ = ["Down", "down", "require_cgroups", "restart_node", "up"]

Echo = Callable[[str], None]


def require_cgroups() -> Cgroups:
    found = detect()
    if found is None:
        raise TestbedError("no usable cgroups on this host")
    return found


def _alive(record: Record, cgroups: Cgroups) -> bool:
    """A testbed that finished ``up`` and still has a process in some node."""
    return record.state == "up" and any(cgroups.pids(n.cgroup) for n in record.plan.nodes)


def _term_as_interrupt() -> contextlib.AbstractContextManager[None]:
    """SIGTERM raises KeyboardInterrupt in the body, so ``up`` cleans up on either."""
    def raise_interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    return signals_handled({signal.SIGTERM: raise_interrupt})


def _make(plan: TestbedPlan, cgroups: Cgroups, token: Path) -> str:
    """Namespaces, links, cgroups and Ray nodes; returns where latency lives."""
    net.netns_add(plan.bridge_netns)
    net.make_bridge(plan.bridge_netns)
    netem = net.netem_available(plan.bridge_netns)
    for node in plan.nodes:
        net.netns_add(node.netns)
        net.add_port(plan.bridge_netns, node, plan.prefix_len)
        net.shape(node, plan.time_dilation, netem)
        net.shape_port_ingress(plan.bridge_netns, node)
        cgroups.create(node.cgroup, node.memory_mb, None, node.cfs_period_us)
    latency_in = "netem" if netem else "transport"
    ray = ray_binary()
    if ray is None:
        raise TestbedError("no `ray` command")
    start_nodes(plan, cgroups, ray, token, latency_in)
    return latency_in


def _refuse_live(name: str, cgroups: Cgroups, state: Path | None) -> Record | None:
    """The record of testbed ``name`` (None: none, or unreadable); TestbedError if it is
    live."""
    try:
        record = read_record(name, state)
    except TestbedError:
        return None
    if record is not None and _alive(record, cgroups):
        raise TestbedError(
            f"testbed {name!r} is already up (head {record.plan.head_address}, "
            f"started by pid {record.owner_pid}); `edgewise testbed down {name}` first")
    return record


def _clean_dead(name: str, cgroups: Cgroups, state: Path | None, echo: Echo) -> None:
    record = _refuse_live(name, cgroups, state)
    found = leftovers(name, cgroups)
    if record is not None or any(found.values()):
        removed = teardown(name, cgroups)
        remove_record(name, state)
        echo(f"cleaned what a dead testbed {name!r} left: "
             + ", ".join(f"{v} {k}" for k, v in removed.items()))


def up(cluster_file: Path, name: str, *, subnet: str = DEFAULT_SUBNET,
       state: Path | None = None, host: HostFacts | None = None,
       echo: Echo = lambda line: None) -> Record:
    """Bring testbed ``name`` up from ``cluster_file``; TestbedUnavailable (naming what
    is missing) before anything is made on a host that cannot; TestbedError if a live
    testbed has this name. A dead one of the same name is cleaned first."""
    require()
    cgroups = require_cgroups()
    cluster = load_cluster(cluster_file)
    check_name(name)
    _refuse_live(name, cgroups, state)  # early, before the host is measured
    plan = plan_testbed(cluster, name, host or host_facts(), subnet)
    with locked(name, state, wait_s=0):
        _clean_dead(name, cgroups, state, echo)
        token = write_token(name, state)
        record = Record(plan, read_yaml(cluster_file), str(cluster_file.resolve()),
                        "starting", os.getpid(), time.time(), str(token), cgroups.version)
        write_record(record, state)
        started = time.perf_counter()
        try:
            with _term_as_interrupt():
                record = dataclasses.replace(record, latency_in=_make(plan, cgroups, token))
                with joined(record):
                    pass  # every device registered with the head
                for node in plan.nodes:
                    cgroups.set_quota(node.cgroup, node.quota_cores, node.cfs_period_us)
        except BaseException:
            with shielded():
                teardown(name, cgroups)
                remove_record(name, state)
            raise
        record = dataclasses.replace(record, state="up",
                                     up_seconds=round(time.perf_counter() - started, 2))
        write_record(record, state)
    return record


@dataclass(frozen=True, slots=True)
class Down:
    """What ``down`` found and removed, and what is left (all zero after a good down)."""

    found: bool
    removed: dict[str, int]
    leftovers: dict[str, int]


def _traces(name: str, state: Path | None) -> bool:
    """Whether anything of testbed ``name`` may exist (cheap: no command, no root)."""
    cgroups = detect()
    return (record_path(name, state).exists() or Path(f"/tmp/ewtb/{name}").exists()
            or any(Path(net.NETNS_DIR).glob(f"ewtb.{name}.*"))
            or (cgroups is not None and bool(cgroups.existing(f"edgewise/{name}"))))


def down(name: str, *, state: Path | None = None) -> Down:
    """Remove testbed ``name`` entirely (also without a record: by its name). A name of
    which nothing exists is not an error, even on a host that cannot run testbeds."""
    if not _traces(name, state):
        zero = dict.fromkeys(("namespaces", "veths", "cgroups", "processes"), 0)
        return Down(False, {}, zero)
    require()
    cgroups = require_cgroups()
    with locked(name, state, wait_s=120), shielded():
        try:
            recorded = read_record(name, state) is not None
        except TestbedError:
            recorded = True
        found = recorded or any(leftovers(name, cgroups).values())
        removed = teardown(name, cgroups) if found else {}
        remove_record(name, state)
        return Down(found, removed, leftovers(name, cgroups))


def restart_node(name: str, device: str, *, state: Path | None = None,
                 verify: bool = True) -> Record:
    """Kill whatever is left of ``device``'s node and start it again (a reboot); with
    ``verify`` join the testbed to check the device registered (not from a process that
    is joined already)."""
    require()
    cgroups = require_cgroups()
    with locked(name, state, wait_s=60):
        record = read_record(name, state)
        if record is None:
            raise TestbedError(f"no testbed named {name!r}")
        node = record.plan.node(device)
        if node.head:
            raise TestbedError(f"{device} runs the Ray head (the cluster's GCS): it cannot "
                               "restart alone; take the testbed down and up again")
        ray = ray_binary()
        if ray is None:
            raise TestbedError("no `ray` command")
        cgroups.kill(node.cgroup)
        cgroups.create(node.cgroup, node.memory_mb, None, node.cfs_period_us)
        start_node(record.plan, node, cgroups, ray, record.token_path, record.latency_in)
        if verify:
            with joined(record):
                pass
        cgroups.set_quota(node.cgroup, node.quota_cores, node.cfs_period_us)
        return record
