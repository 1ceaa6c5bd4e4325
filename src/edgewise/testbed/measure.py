"""What the kernel did on a testbed, measured: TCP goodput of every shaped link against its
configured rate, the slow-down of a CPU-bound kernel in every device's cgroup against its
quota, and what is left after ``down``. :func:`testbed_figures` gathers them for a bench."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgewise.testbed.cgroups import Cgroups
from edgewise.testbed.host import TestbedError
from edgewise.testbed.nodes import node_env, spawn_in
from edgewise.testbed.plan import DEFAULT_SUBNET, HostFacts, NodePlan
from edgewise.testbed.record import Record

if TYPE_CHECKING:
    from edgewise.testbed.session import Testbed

__all__ = ["CpuMeasure", "LinkMeasure", "cpu_quota_ratios", "kernel_figures",
           "link_rate_ratios", "measure_links", "testbed_figures"]

_PROBES = [sys.executable, "-m", "edgewise.testbed.probes"]


@dataclass(frozen=True, slots=True)
class LinkMeasure:
    """One direction of one link: configured (dilated) rate and measured TCP goodput."""

    src: str
    dst: str
    rate_mbit: float
    goodput_mbit: float

    @property
    def ratio(self) -> float:
        return self.goodput_mbit / self.rate_mbit


@dataclass(frozen=True, slots=True)
class CpuMeasure:
    """A single-threaded CPU-bound kernel in one device's cgroup: its slow-down (wall time
    over its CPU time) against the slow-down the quota configures for it,
    ``1 / min(quota - background, 1)``, where the background is what the rest of the
    cgroup (the node's Ray daemons, sharing the device's quota as on a real device) used
    in the same time. The ratio is 1 exactly when the cgroup got its quota."""

    device: str
    quota_cores: float
    cpu_seconds: float
    wall_seconds: float
    cgroup_cpu_seconds: float | None  # None: the host accounts no CPU per cgroup

    @property
    def slowdown(self) -> float:
        return self.wall_seconds / self.cpu_seconds

    @property
    def background_cores(self) -> float:
        if self.cgroup_cpu_seconds is None:
            return 0.0
        return max(0.0, self.cgroup_cpu_seconds - self.cpu_seconds) / self.wall_seconds

    @property
    def configured(self) -> float:
        return 1.0 / min(self.quota_cores - self.background_cores, 1.0)

    @property
    def ratio(self) -> float:
        return self.slowdown / self.configured

    @property
    def gross_ratio(self) -> float:
        """The slow-down over ``1 / min(quota, 1)``: the daemons' share not set apart."""
        return self.slowdown * min(self.quota_cores, 1.0)


def _in_netns(node: NodePlan, args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(["ip", "netns", "exec", node.netns, *_PROBES, *args],
                            stdout=subprocess.PIPE, text=True)


def measure_links(record: Record, pairs: list[tuple[str, str]],
                  seconds: float = 1.5) -> list[LinkMeasure]:
    """One TCP flow per (sender, receiver) device pair, all at once."""
    plan = record.plan
    return _flows([(plan.node(a), plan.node(b)) for a, b in pairs], seconds)


def _flows(pairs: list[tuple[NodePlan, NodePlan]], seconds: float) -> list[LinkMeasure]:
    """Run one TCP flow per pair at once (senders and receivers outside the devices'
    cgroups: this measures the links, not the devices' CPU)."""
    receivers = [_in_netns(dst, ["recv", dst.address]) for _, dst in pairs]
    try:
        ports = [json.loads(r.stdout.readline())["port"] for r in receivers]  # type: ignore[union-attr]
        senders = [_in_netns(src, ["send", dst.address, str(port), str(seconds)])
                   for (src, dst), port in zip(pairs, ports, strict=True)]
        for s in senders:
            s.wait(timeout=seconds + 60)
        results = [json.loads(r.communicate(timeout=60)[0].splitlines()[-1]) for r in receivers]
    finally:
        for r in receivers:
            r.kill()
    out = []
    for (src, dst), res in zip(pairs, results, strict=True):
        rate = next(p.rate_mbit for p in src.peers if p.address == dst.address)
        out.append(LinkMeasure(src.device, dst.device, rate,
                               res["bytes"] * 8 / res["seconds"] / 1e6))
    return out


def link_rate_ratios(record: Record, seconds: float = 1.5,
                     parallel: int = 2) -> list[LinkMeasure]:
    """Every directed link of the testbed measured, ``parallel`` flows at a time (each from
    a different sender to a different receiver)."""
    nodes = record.plan.nodes
    pairs = [(nodes[i], nodes[(i + k) % len(nodes)])
             for k in range(1, len(nodes)) for i in range(len(nodes))]
    measured: list[LinkMeasure] = []
    while pairs:
        batch: list[tuple[NodePlan, NodePlan]] = []
        for pair in list(pairs):
            busy = {n.device for p in batch for n in p}
            if len(batch) < parallel and not busy & {pair[0].device, pair[1].device}:
                batch.append(pair)
                pairs.remove(pair)
        measured += _flows(batch, seconds)
    return measured


def cpu_quota_ratios(record: Record, cgroups: Cgroups, wall_s: float = 2.0) -> list[CpuMeasure]:
    """The CPU kernel in every device's cgroup (all devices at once: the quotas must hold
    together), each running about ``wall_s`` seconds."""
    env = node_env(record.token_path)
    procs = []
    for node in record.plan.nodes:
        cpu_s = min(node.quota_cores, 1.0) * wall_s
        procs.append(spawn_in(cgroups, node, [*_PROBES, "cpu", f"{cpu_s:.4f}"], env,
                              subprocess.PIPE, netns=False, text=True))
    out = []
    for node, proc in zip(record.plan.nodes, procs, strict=True):
        stdout, _ = proc.communicate(timeout=wall_s * 20 + 60)
        if proc.returncode != 0:
            raise TestbedError(f"the CPU probe on {node.device} failed ({proc.returncode})")
        res = json.loads(stdout.splitlines()[-1])
        out.append(CpuMeasure(node.device, node.quota_cores, res["cpu_seconds"],
                              res["wall_seconds"], res["cgroup_cpu_seconds"]))
    return out


def kernel_figures(tb: Testbed, link_seconds: float = 1.5,
                   cpu_seconds: float = 4.0) -> dict[str, Any]:
    """What the kernel does on the live testbed ``tb``: ``nodes`` alive, every directed
    link's TCP goodput over its configured rate (``link_rate_ratio_min``/``_max``), and
    per device a CPU-bound kernel's slow-down against its quota
    (``cpu_quota_ratio_error_max``: max over devices of |slow-down / configured - 1|, see
    :class:`CpuMeasure`; ``_gross`` without setting the Ray daemons' share apart)."""
    record = tb.record
    nodes = tb.alive_nodes()
    links = link_rate_ratios(record, link_seconds)
    cpus = cpu_quota_ratios(record, tb.nodes.cgroups, cpu_seconds)
    return {
        "nodes": nodes, "devices": len(record.plan.nodes), "up_seconds": record.up_seconds,
        "time_dilation": round(record.plan.time_dilation, 4),
        "host_speed": record.plan.host.speed, "latency_in": record.latency_in,
        "link_rate_ratio_min": round(min(m.ratio for m in links), 4),
        "link_rate_ratio_max": round(max(m.ratio for m in links), 4),
        "links_measured": len(links),
        "cpu_quota_ratio_error_max": round(max(abs(m.ratio - 1) for m in cpus), 4),
        "cpu_quota_ratios": {m.device: round(m.ratio, 4) for m in cpus},
        "cpu_quota_ratio_error_max_gross": round(max(abs(m.gross_ratio - 1) for m in cpus), 4),
        "cpu_background_share_max": round(max(m.background_cores / m.quota_cores
                                              for m in cpus), 4),
    }


def testbed_figures(cluster_file: Path | str, name: str = "bench", *,
                    subnet: str = DEFAULT_SUBNET, state: Path | None = None,
                    host: HostFacts | None = None, link_seconds: float = 1.5,
                    cpu_seconds: float = 4.0) -> dict[str, Any]:
    """Bring a testbed up, measure it (:func:`kernel_figures`), take it down:
    ``down_leftovers`` (namespaces + veths + cgroups + processes after down) and
    ``down_leftovers_by_kind`` too."""
    from edgewise.testbed.lifecycle import require_cgroups
    from edgewise.testbed.session import testbed
    from edgewise.testbed.teardown import leftovers

    started = time.perf_counter()
    with testbed(cluster_file, name, subnet=subnet, state=state, host=host) as tb:
        figures = kernel_figures(tb, link_seconds, cpu_seconds)
    left = leftovers(name, require_cgroups())
    return {**figures, "down_leftovers": sum(left.values()), "down_leftovers_by_kind": left,
            "seconds": round(time.perf_counter() - started, 1)}
