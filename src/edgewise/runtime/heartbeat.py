"""The heartbeat client every long-lived actor runs: beats to the monitor, obeys directives."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import ray

from edgewise.runtime.health import Directive

__all__ = ["Heartbeat"]

class Heartbeat:
    """Sends ``monitor.beat`` every ``period_s`` from a daemon thread.

    While the monitor says this device is stalled, the member stops beating and
    :meth:`obey` blocks the caller: the device is frozen, as a hung board would be.
    """

    def __init__(
        self,
        monitor: Any,
        name: str,
        kind: str,
        device: str,
        period_s: float,
        metrics: Callable[[], dict[str, float]] | None = None,
    ) -> None:
        self.monitor, self.name, self.device, self.period_s = monitor, name, device, period_s
        self.metrics = metrics
        self.directive = Directive()
        self._stop = threading.Event()
        ray.get(monitor.register.remote(name, kind, device))
        self._thread = threading.Thread(target=self._loop, name=f"heartbeat-{name}", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            payload = self.metrics() if self.metrics is not None else None
            try:
                reply = ray.get(self.monitor.beat.remote(self.name, self.device, payload))
                self.directive = Directive.from_json(reply)
            except Exception:  # the monitor is gone: nothing to report to
                return
            stalled_s = self.directive.stall_until - time.time()
            self._stop.wait(stalled_s if stalled_s > 0 else self.period_s)

    def obey(self) -> tuple[tuple[str, str], ...]:
        """Block while the device is stalled; return the links cut now."""
        while (wait := self.directive.stall_until - time.time()) > 0:
            time.sleep(min(wait, self.period_s))
        return self.directive.cut_links

    def stop(self) -> None:
        self._stop.set()
