"""The testbed's network: namespaces, a bridge, veth pairs, addresses and tc shaping.

Everything lives inside namespaces the testbed made: the bridge sits in its own namespace,
each device's ``eth0`` in the device's, and nothing is added to the host's namespace.
Each device's egress is an htb qdisc with one class per peer (its pair rate, matched by
destination address) and a default class; a cut link is a filter in front of them that
sends everything to a class that drops it, a cut device its bridge port set down. A device
with a port rate (a switch port) has every class under one at that rate, and its bridge
port delivers to it at that rate: all its links share the port each way.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence

from edgewise.testbed.host import TestbedError
from edgewise.testbed.plan import NodePlan

__all__ = ["NETNS_DIR", "add_port", "drop", "make_bridge", "netem_available", "netns_add",
           "netns_delete", "netns_list", "netns_pids", "run", "set_port", "shape",
           "shape_port_ingress"]

NETNS_DIR = "/var/run/netns"  # where `ip netns add` names each namespace
BRIDGE = "br0"
DEV = "eth0"
_CLASS_PREF = 2000  # drop filters (pref 1 + peer index) come before the classifiers
_DEFAULT_CLASS = "ffff"
_CUT_CLASS = "fffe"  # its leaf is a pfifo of length 0: whatever is sent to it is dropped
_PORT_CLASS = "1"  # the device's port: every other class under it, where it has a rate


def run(argv: Sequence[str], *, check: bool = True, timeout: float = 30) -> str:
    """Run a command; TestbedError with its first error line when it fails."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TestbedError(f"`{' '.join(argv)}` failed: {exc}") from None
    if check and done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines() or ["(no output)"]
        raise TestbedError(f"`{' '.join(argv)}` failed: {lines[0]}")
    return done.stdout


def netns_list() -> list[str]:
    """Names of every network namespace on the host."""
    return [line.split()[0] for line in run(["ip", "netns", "list"]).splitlines() if line]


def netns_add(name: str) -> None:
    run(["ip", "netns", "add", name])
    run(["ip", "-n", name, "link", "set", "lo", "up"])


def netns_delete(name: str) -> None:
    run(["ip", "netns", "delete", name], check=False)


def netns_pids(name: str) -> set[int]:
    """Processes whose network namespace is ``name``."""
    out = run(["ip", "netns", "pids", name], check=False)
    return {int(p) for p in out.split() if p.isdigit()}


def make_bridge(netns: str) -> None:
    """The testbed's switch: a bridge in its own namespace."""
    run(["ip", "-n", netns, "link", "add", BRIDGE, "type", "bridge"])
    run(["ip", "-n", netns, "link", "set", BRIDGE, "up"])


def add_port(bridge_netns: str, node: NodePlan, prefix_len: int) -> None:
    """A veth pair from the bridge (``node.port``) to the node's namespace (``eth0``)."""
    run(["ip", "-n", bridge_netns, "link", "add", node.port, "type", "veth",
         "peer", "name", DEV, "netns", node.netns])
    run(["ip", "-n", bridge_netns, "link", "set", node.port, "master", BRIDGE, "up"])
    run(["ip", "-n", node.netns, "addr", "add", f"{node.address}/{prefix_len}", "dev", DEV])
    run(["ip", "-n", node.netns, "link", "set", DEV, "up"])


def _kbit(mbit: float) -> str:
    return f"{max(8, round(mbit * 1000))}kbit"


def _burst(mbit: float) -> str:
    """A burst of 2 ms at the rate, at least 16 KB: htb's own default is too small for
    fast links and lets them run below their rate."""
    return f"{max(16 * 1024, round(mbit * 1e6 / 8 * 0.002))}b"


def _class(netns: str, minor: str, mbit: float, latency_ms: float | None, *,
           parent: str = "1:", assured_mbit: float | None = None, dev: str = DEV) -> None:
    """An htb class of ceiling ``mbit``; ``assured_mbit`` (default: the ceiling) is what it
    sends without borrowing from ``parent``."""
    assured = mbit if assured_mbit is None else min(assured_mbit, mbit)
    run(["tc", "-n", netns, "class", "add", "dev", dev, "parent", parent,
         "classid", f"1:{minor}", "htb", "rate", _kbit(assured), "ceil", _kbit(mbit),
         "burst", _burst(mbit), "cburst", _burst(mbit), "quantum", "60000"])
    if latency_ms is not None:  # netem under the class where the kernel has it
        run(["tc", "-n", netns, "qdisc", "add", "dev", dev, "parent", f"1:{minor}",
             "netem", "delay", f"{latency_ms:.3f}ms", "limit", "100000"])


def shape(node: NodePlan, dilation: float, netem: bool) -> None:
    """The node's egress: one htb class per peer at the pair's dilated rate (and, with
    netem, its dilated latency), the default link's rate for anything else. Where the
    device has a port rate, every class hangs under one class at that rate: each is
    assured an equal share of the port and borrows up to its own rate, so the links
    together carry no more than the port (htb lets a class send its assured rate without
    asking its parent, so the shares must not add up to more than the port)."""
    ns = node.netns
    run(["tc", "-n", ns, "qdisc", "add", "dev", DEV, "root", "handle", "1:", "htb",
         "default", _DEFAULT_CLASS])
    parent, share = "1:", None
    if node.port_rate_mbit is not None:
        parent, share = f"1:{_PORT_CLASS}", node.port_rate_mbit / (len(node.peers) + 1)
        _class(ns, _PORT_CLASS, node.port_rate_mbit, None)
    _class(ns, _DEFAULT_CLASS, _capped(node.default_rate_mbit, node),
           node.default_latency_ms * dilation if netem else None,
           parent=parent, assured_mbit=share)
    _class(ns, _CUT_CLASS, node.default_rate_mbit, None)
    run(["tc", "-n", ns, "qdisc", "add", "dev", DEV, "parent", f"1:{_CUT_CLASS}", "pfifo",
         "limit", "0"])
    for j, peer in enumerate(node.peers):
        minor = f"{16 + j:x}"
        _class(ns, minor, _capped(peer.rate_mbit, node),
               peer.latency_ms * dilation if netem else None, parent=parent,
               assured_mbit=share)
        run(["tc", "-n", ns, "filter", "add", "dev", DEV, "parent", "1:", "protocol", "ip",
             "pref", str(_CLASS_PREF), "u32", "match", "ip", "dst", f"{peer.address}/32",
             "flowid", f"1:{minor}"])


def _capped(mbit: float, node: NodePlan) -> float:
    return mbit if node.port_rate_mbit is None else min(mbit, node.port_rate_mbit)


def shape_port_ingress(bridge_netns: str, node: NodePlan) -> None:
    """What the switch delivers to the node, at most its port's rate: the bridge side of
    its veth (``node.port``) sends through one htb class at that rate. Nothing without a
    port rate."""
    if node.port_rate_mbit is None:
        return
    run(["tc", "-n", bridge_netns, "qdisc", "add", "dev", node.port, "root", "handle", "1:",
         "htb", "default", _PORT_CLASS])
    _class(bridge_netns, _PORT_CLASS, node.port_rate_mbit, None, dev=node.port)


def drop(node: NodePlan, peer_address: str, on: bool) -> None:
    """Drop (``on``) or stop dropping everything ``node`` sends to ``peer_address``: a
    filter in front of the classifiers sends it to the cut class (this works where the
    kernel has no tc actions)."""
    j = [p.address for p in node.peers].index(peer_address)
    base = ["tc", "-n", node.netns, "filter"]
    where = ["dev", DEV, "parent", "1:", "protocol", "ip", "pref", str(1 + j)]
    if on:
        run([*base, "replace", *where, "u32", "match", "ip", "dst", f"{peer_address}/32",
             "flowid", f"1:{_CUT_CLASS}"])
    else:
        run([*base, "del", *where], check=False)


def set_port(bridge_netns: str, port: str, up: bool) -> None:
    """Bring a node's bridge port up or down (down: the device is cut from everyone)."""
    run(["ip", "-n", bridge_netns, "link", "set", port, "up" if up else "down"])


def netem_available(netns: str) -> bool:
    """Whether this kernel has netem (tried on the namespace's loopback, then removed)."""
    done = subprocess.run(["tc", "-n", netns, "qdisc", "add", "dev", "lo", "root", "netem",
                           "delay", "1ms"], capture_output=True, check=False)
    if done.returncode == 0:
        run(["tc", "-n", netns, "qdisc", "del", "dev", "lo", "root"], check=False)
    return done.returncode == 0
