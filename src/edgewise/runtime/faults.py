"""Fault injection: kill an actor, stall a device, cut a link — for real, on a live cluster."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import ray

from edgewise.errors import EdgewiseError
from edgewise.runtime.monitor import MONITOR_NAME
from edgewise.runtime.ray_cluster import NAMESPACE

__all__ = ["FaultInjector", "InjectedFault", "KillMidEpoch"]


@dataclass(frozen=True, slots=True)
class InjectedFault:
    """What was injected, where, and when (``time.time()``)."""

    kind: str
    target: str
    at: float
    seconds: float = 0.0


class FaultInjector:
    """Injects faults into the edgewise actors of the Ray cluster this process is connected
    to. Kills are real (``ray.kill``: the process dies); stalls and cuts are announced by the
    health monitor in its heartbeat replies, and the members on that device obey them."""

    def __init__(self) -> None:
        if not ray.is_initialized():
            raise EdgewiseError("not connected to a Ray cluster (see edgewise cluster up)")
        self.injected: list[InjectedFault] = []

    def _monitor(self) -> Any:
        try:
            return ray.get_actor(MONITOR_NAME, namespace=NAMESPACE)
        except ValueError:
            raise EdgewiseError("no edgewise health monitor is running on this cluster") from None

    @staticmethod
    def actors(prefix: str = "") -> list[str]:
        """Names of the live edgewise actors (e.g. prefix ``worker-``)."""
        named = ray.util.list_named_actors(all_namespaces=True)
        return sorted(a["name"] for a in named
                      if a["namespace"] == NAMESPACE and a["name"].startswith(prefix))

    def kill(self, name: str) -> InjectedFault:
        """Kill the named actor's process (no restart)."""
        try:
            handle = ray.get_actor(name, namespace=NAMESPACE)
        except ValueError:
            live = ", ".join(self.actors())
            raise EdgewiseError(f"no actor named {name!r}; live: {live}") from None
        ray.kill(handle, no_restart=True)
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

    def clear(self) -> None:
        """End every stall and cut now."""
        ray.get(self._monitor().clear_faults.remote())

    def _record(self, kind: str, target: str, seconds: float = 0.0) -> InjectedFault:
        fault = InjectedFault(kind, target, time.time(), seconds)
        self.injected.append(fault)
        return fault


class KillMidEpoch:
    """A training events hook that kills the worker on ``device`` once ``fraction`` of
    epoch ``epoch``'s samples were applied: a crash in the middle of an epoch."""

    def __init__(self, device: str, epoch: int, n_samples: int, fraction: float = 1 / 3) -> None:
        self.device, self.epoch = device, epoch
        self.threshold = int(n_samples * fraction)
        self.current = -1
        self.fault: InjectedFault | None = None

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "epoch_start":
            self.current = data["epoch"]
        elif (kind == "progress" and self.fault is None and self.current == self.epoch
              and data["samples"] > self.threshold):
            self.fault = FaultInjector().kill_worker(self.device)
