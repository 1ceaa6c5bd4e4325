"""Progress of a benchmark: one callback type, a step counter and sub-ranges of a bar."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["Progress", "Ticker", "silent", "within"]

Progress = Callable[[str, float], None]
"""``progress(message, fraction)``: fraction in [0, 1] of the work the receiver was given."""


def silent(message: str, fraction: float) -> None:
    """A progress callback that shows nothing."""


def within(progress: Progress, start: float, end: float) -> Progress:
    """A callback for a part of the work that maps its [0, 1] onto [start, end]."""

    def scaled(message: str, fraction: float) -> None:
        progress(message, start + (end - start) * min(1.0, max(0.0, fraction)))

    return scaled


class Ticker:
    """Counts steps of known number: each :meth:`tick` reports the fraction done so far."""

    def __init__(self, progress: Progress, total: int) -> None:
        self.progress, self.total, self.done = progress, max(1, total), 0

    def tick(self, message: str) -> None:
        """Report ``message`` at the fraction of steps done, then count one more step."""
        self.progress(message, min(1.0, self.done / self.total))
        self.done += 1

    __call__ = tick
