"""Node-level faults on a testbed, through the kernel: a device's cgroup killed or frozen,
its links cut by tc or its bridge port (the :class:`~edgewise.runtime.faults.NodeFaults`
that :class:`~edgewise.runtime.faults.FaultInjector` uses)."""

from __future__ import annotations

from edgewise.testbed import net
from edgewise.testbed.cgroups import Cgroups
from edgewise.testbed.record import Record

__all__ = ["TestbedNodes"]


class TestbedNodes:
    """The devices of one testbed, under the kernel's control."""

    def __init__(self, record: Record, cgroups: Cgroups) -> None:
        self.record, self.cgroups = record, cgroups

    def kill_device(self, device: str) -> int:
        """SIGKILL every process in the device's cgroup (its raylet, workers, agents)."""
        return self.cgroups.kill(self.record.plan.node(device).cgroup)

    def freeze_device(self, device: str, frozen: bool) -> None:
        self.cgroups.freeze(self.record.plan.node(device).cgroup, frozen)

    def cut_link(self, a: str, b: str | None, cut: bool) -> None:
        """``b`` None: the device's bridge port goes down (every link of ``a``); else both
        ends drop what they send to the other."""
        plan = self.record.plan
        node_a = plan.node(a)
        if b is None:
            net.set_port(plan.bridge_netns, node_a.port, up=not cut)
            return
        node_b = plan.node(b)
        net.drop(node_a, node_b.address, cut)
        net.drop(node_b, node_a.address, cut)
