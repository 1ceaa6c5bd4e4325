"""The heartbeat client every long-lived actor runs: beats to the monitor, obeys directives."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import ray

from edgewise.runtime.health import Directive

__all__ = ["Heartbeat", "next_beat"]


def next_beat(now: float, due: float, period_s: float,
              stalled_s: float = 0.0) -> tuple[float, float]:
    """(seconds to wait, when the beat after it is due) for a beat sent at ``due``.

    Beats keep a fixed cadence, one per period from the first, so that the reply's round
    trip (the monitor's queue, a loaded host) does not lengthen the interval the monitor
    sees: a member is dead after 1.5 silent periods, and waiting a whole period after each
    reply left only half a period for the round trip. A beat that is late is sent at once
    and the cadence restarts from it (no burst to catch up); a stalled device waits out its
    stall, then beats."""
    if stalled_s > 0:
        return stalled_s, now + stalled_s
    due = max(due + period_s, now)
    return due - now, due


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
        ray.get(monitor.register.remote(name, kind, device, period_s))
        self._thread = threading.Thread(target=self._loop, name=f"heartbeat-{name}", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        due = time.monotonic()
        while not self._stop.is_set():
            payload = self.metrics() if self.metrics is not None else None
            try:
                reply = ray.get(self.monitor.beat.remote(self.name, self.device, payload))
                self.directive = Directive.from_json(reply)
            except Exception:  # the monitor is gone: nothing to report to
                return
            wait_s, due = next_beat(time.monotonic(), due, self.period_s,
                                    self.directive.stall_until - time.time())
            self._stop.wait(wait_s)

    def obey(self) -> tuple[tuple[str, str], ...]:
        """Block while the device is stalled; return the links cut now."""
        while (wait := self.directive.stall_until - time.time()) > 0:
            time.sleep(min(wait, self.period_s))
        return self.directive.cut_links

    def stop(self) -> None:
        self._stop.set()
