"""One Throttle: stretch a step of compute to a multiple of the CPU time it used.

A step that used ``c`` seconds of this thread's CPU time is made to last ``c × factor``
seconds of wall time by sleeping the rest: ``factor`` is a device's stretch (host speed ÷
device speed) for emulated compute, or stretch ÷ share when a job may use only a share of a
device (time-slicing, Ekya §5). CPU time, not wall time, is measured so that contention
between emulated devices on a small host does not leak into the emulated timing. The clocks
and the sleep are injectable, so the arithmetic is tested without a real host's noise.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from edgewise.errors import ConfigError

__all__ = ["Throttle"]

Clock = Callable[[], float]


class Throttle:
    """Paces steps of compute by ``factor`` (>= 0; 1 adds no sleep beyond the wall time the
    CPU time already took). :meth:`step` wraps one step; :meth:`pace` ends the step that
    began at the last :meth:`mark` (or pace) and starts the next, for loops that cannot be
    wrapped."""

    def __init__(self, factor: float = 1.0, *, cpu: Clock = time.thread_time,
                 wall: Clock = time.perf_counter,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.factor = _checked(factor)
        self._cpu, self._wall, self._sleep = cpu, wall, sleep
        self._cpu0, self._wall0 = cpu(), wall()

    def mark(self) -> None:
        """Start a step now (work done since the last mark is not paced)."""
        self._cpu0, self._wall0 = self._cpu(), self._wall()

    def pace(self, factor: float | None = None) -> float:
        """Sleep so the step since the last mark lasts ``factor`` (default: this throttle's)
        times its CPU time; return the step's wall seconds, the sleep included."""
        used = self._cpu() - self._cpu0
        remaining = used * _checked(self.factor if factor is None else factor) - (
            self._wall() - self._wall0)
        if remaining > 0:
            self._sleep(remaining)
        now = self._wall()
        seconds = now - self._wall0
        self._cpu0, self._wall0 = self._cpu(), now
        return seconds

    @contextmanager
    def step(self) -> Iterator[None]:
        """Run the body as one paced step."""
        self.mark()
        yield
        self.pace()


def _checked(factor: float) -> float:
    if not factor >= 0:
        raise ConfigError(f"a throttle factor must be >= 0, got {factor}", field="factor")
    return factor
