"""Fault injection, for real, on a live cluster: kill an actor, stall a device, cut a link
(actor level, through the health monitor), and kill, freeze or cut off a whole device
(node level, through the kernel, where the cluster is a testbed)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Protocol

import ray

from edgewise.errors import EdgewiseError
from edgewise.runtime.monitor import MONITOR_NAME
from edgewise.runtime.ray_cluster import NAMESPACE
from edgewise.runtime.vessel import VESSEL_PREFIX
from edgewise.runtime.vessel_pool import hosted_members, vessel_of

__all__ = ["ARMED_POLL_S", "FaultInjector", "InjectedFault", "KillMidEpoch", "NodeFaults",
           "progress_poll_s"]


class NodeFaults(Protocol):
    """Faults of whole devices, done by whoever controls the devices' machines (a
    testbed controls namespaces and cgroups; see ``edgewise.testbed.control``)."""

    def kill_device(self, device: str) -> int:
        """Kill every process of ``device``; how many there were."""

    def freeze_device(self, device: str, frozen: bool) -> None:
        """Stop (or resume) every process of ``device``."""

    def cut_link(self, a: str, b: str | None, cut: bool) -> None:
        """Cut (or heal) the link between ``a`` and ``b``; ``b`` None: all of ``a``'s."""


@dataclass(frozen=True, slots=True)
class InjectedFault:
    """What was injected, where, and when (``time.time()``)."""

    kind: str
    target: str
    at: float
    seconds: float = 0.0


def _link_name(a: str, b: str | None) -> str:
    return f"{a}<->{b}" if b is not None else f"{a}<->*"


class FaultInjector:
    """Injects faults into the edgewise actors of the Ray cluster this process is connected
    to. Kills are real (``ray.kill``: the process dies); stalls and cuts are announced by the
    health monitor in its heartbeat replies, and the members on that device obey them.

    With ``nodes`` it also injects node-level faults: a whole device killed, frozen or cut
    off by the kernel, which nothing in the cluster announces. A stall or cut given
    ``seconds`` ends on a timer thread of this process: keep it running that long, or call
    :meth:`clear`.
    """

    def __init__(self, nodes: NodeFaults | None = None) -> None:
        if nodes is None and not ray.is_initialized():
            raise EdgewiseError("not connected to a Ray cluster (see edgewise cluster up)")
        self.nodes = nodes
        self.injected: list[InjectedFault] = []
        self._timers: list[threading.Timer] = []
        self._undo: dict[str, Any] = {}  # target -> how to end a node-level fault

    def _monitor(self) -> Any:
        try:
            return ray.get_actor(MONITOR_NAME, namespace=NAMESPACE)
        except ValueError:
            raise EdgewiseError("no edgewise health monitor is running on this cluster") from None

    @staticmethod
    def actors(prefix: str = "") -> list[str]:
        """Names of the live edgewise actors (e.g. prefix ``worker-``): the named actors and
        the members hosted in live vessels (``runtime.vessel``), not the vessels."""
        named = {a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
                 if a["namespace"] == NAMESPACE}
        hosted = {m for m, v in hosted_members(prefix).items() if v in named}
        own = {n for n in named if n.startswith(prefix) and not n.startswith(VESSEL_PREFIX)}
        return sorted(own | hosted)

    def kill(self, name: str) -> InjectedFault:
        """Kill the named actor's process, as a crash would: an actor that Ray restarts on
        failure (the data store) is restarted, the others stay dead. A member hosted in a
        vessel is killed with its vessel's process (which hosts that member alone)."""
        try:
            handle = ray.get_actor(vessel_of(name) or name, namespace=NAMESPACE)
        except ValueError:
            live = ", ".join(self.actors())
            raise EdgewiseError(f"no actor named {name!r}; live: {live}") from None
        ray.kill(handle, no_restart=False)
        return self._record("kill", name)

    def kill_worker(self, device: str) -> InjectedFault:
        """Kill the (newest) worker actor running on ``device``."""
        found = [n for n in self.actors("worker-") if n.endswith(f"-{device}")]
        if not found:
            raise EdgewiseError(f"no worker is running on device {device!r}")
        return self.kill(found[-1])

    def stall(self, device: str, seconds: float) -> InjectedFault:
        """Freeze every member on ``device`` for ``seconds``: no work, no heartbeats."""
        ray.get(self._monitor().stall.remote(device, seconds))
        return self._record("stall", device, seconds)

    def cut(self, a: str, b: str, seconds: float) -> InjectedFault:
        """Cut the emulated link between devices ``a`` and ``b`` for ``seconds``."""
        ray.get(self._monitor().cut.remote(a, b, seconds))
        return self._record("cut", f"{a}<->{b}", seconds)

    def _node_faults(self) -> NodeFaults:
        if self.nodes is None:
            raise EdgewiseError("node-level faults need a cluster whose machines edgewise "
                                "controls: a testbed (edgewise testbed up)")
        return self.nodes

    def kill_device(self, device: str) -> InjectedFault:
        """Kill every process of ``device`` (its Ray node and all it runs); it stays dead
        until restarted (``edgewise testbed restart-node``)."""
        count = self._node_faults().kill_device(device)
        return self._record("kill-device", f"{device} ({count} processes)")

    def stall_device(self, device: str, seconds: float | None = None) -> InjectedFault:
        """Freeze every process of ``device`` (the cgroup freezer), for ``seconds`` or until
        :meth:`resume_device` or :meth:`clear`."""
        nodes = self._node_faults()
        nodes.freeze_device(device, True)
        self._undo[f"stall:{device}"] = lambda: nodes.freeze_device(device, False)
        self._later(seconds, f"stall:{device}")
        return self._record("stall-device", device, seconds or 0.0)

    def resume_device(self, device: str) -> None:
        self._undo.pop(f"stall:{device}", None)
        self._node_faults().freeze_device(device, False)

    def cut_link(self, a: str, b: str | None = None,
                 seconds: float | None = None) -> InjectedFault:
        """Cut the link between ``a`` and ``b`` in the kernel (``b`` None: every link of
        ``a``), for ``seconds`` or until :meth:`heal_link` or :meth:`clear`."""
        nodes = self._node_faults()
        nodes.cut_link(a, b, True)
        self._undo[f"cut:{_link_name(a, b)}"] = lambda: nodes.cut_link(a, b, False)
        self._later(seconds, f"cut:{_link_name(a, b)}")
        return self._record("cut-link", _link_name(a, b), seconds or 0.0)

    def heal_link(self, a: str, b: str | None = None) -> None:
        self._undo.pop(f"cut:{_link_name(a, b)}", None)
        self._node_faults().cut_link(a, b, False)

    def _later(self, seconds: float | None, key: str) -> None:
        if seconds is None:
            return
        timer = threading.Timer(seconds, self._end, args=(key,))
        timer.daemon = True
        timer.start()
        self._timers.append(timer)

    def _end(self, key: str) -> None:
        undo = self._undo.pop(key, None)
        if undo is not None:
            undo()

    def clear(self) -> None:
        """End every stall and cut now (actor- and node-level)."""
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()
        for key in list(self._undo):
            self._end(key)
        if not ray.is_initialized():
            return
        try:
            monitor = self._monitor()
        except EdgewiseError:
            if self.nodes is None:
                raise
            return  # a testbed without a health monitor: nothing announced to clear
        ray.get(monitor.clear_faults.remote())

    def _record(self, kind: str, target: str, seconds: float = 0.0) -> InjectedFault:
        fault = InjectedFault(kind, target, time.time(), seconds)
        self.injected.append(fault)
        return fault


ARMED_POLL_S = 0.02
"""The progress reading's period while a mid-epoch kill is armed: a Ray call to the server
each, 50 a second for that epoch only."""


def progress_poll_s(*events: Any) -> float | None:
    """The shortest progress period the events callbacks ask for (each one's
    ``progress_poll_s``), if any asks: a callback that chains hooks answers for them by
    calling this on them (``cli.progress.TrainingProgress``)."""
    asked = [getattr(e, "progress_poll_s", None) for e in events]
    return min((float(a) for a in asked if isinstance(a, int | float)), default=None)


class KillMidEpoch:
    """A training events hook that kills the worker on ``device`` once ``fraction`` of
    epoch ``epoch``'s samples were applied: a crash in the middle of an epoch. With
    ``nodes`` it kills the whole device instead (every process of its node).

    The engine reads the server's progress every quarter heartbeat (0.25 s by default); the
    digits CNN's epochs on the emulated three-nanos are short enough (two epochs and the
    job's start in 4.5-5.0 s) that no reading fell between the fraction and the epoch's end
    and the kill never came (2026-12-04: ``train --kill-worker`` reported 0 interruptions).
    While the kill is armed the hook asks for a reading every :data:`ARMED_POLL_S`
    (:attr:`progress_poll_s`, read by ``launch.await_all``)."""

    def __init__(self, device: str, epoch: int, n_samples: int, fraction: float = 1 / 3,
                 nodes: NodeFaults | None = None) -> None:
        self.device, self.epoch = device, epoch
        self.threshold = int(n_samples * fraction)
        self.nodes = nodes
        self.current = -1
        self.fault: InjectedFault | None = None

    @property
    def progress_poll_s(self) -> float | None:
        """How often the engine should read the progress: often while the kill is armed."""
        return ARMED_POLL_S if self.fault is None and self.current == self.epoch else None

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "epoch_start":
            self.current = data["epoch"]
        elif (kind == "progress" and self.fault is None and self.current == self.epoch
              and data["samples"] > self.threshold):
            injector = FaultInjector(self.nodes)
            self.fault = (injector.kill_device(self.device) if self.nodes is not None
                          else injector.kill_worker(self.device))
