"""Progress that survives a log. On a terminal, a long step shows a spinner with its
elapsed time; when stderr is not a terminal (output redirected to a file, CI), each step
prints one plain line when it starts and one with its elapsed seconds when it ends, and a
progress bar's updates become plain lines, one every ``PLAIN_PERIOD_S`` seconds at most."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from edgewise.cli.common import err

__all__ = ["PLAIN_PERIOD_S", "plain_progress", "stage"]

PLAIN_PERIOD_S = 15.0


@contextmanager
def stage(label: str, console: Console = err) -> Iterator[None]:
    """Show that ``label`` is under way: a spinner with elapsed time on a terminal, else a
    plain line at its start and one with its elapsed seconds at its end."""
    start = time.monotonic()
    if console.is_terminal:
        with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                      console=console, transient=True) as spinner:
            spinner.add_task(label, total=None)
            yield
        return
    console.print(f"{label} …", highlight=False, soft_wrap=True)
    yield
    console.print(f"{label}: done in {time.monotonic() - start:.0f} s", highlight=False,
                  soft_wrap=True)


def plain_progress(label: str, console: Console = err,
                   period_s: float = PLAIN_PERIOD_S) -> Callable[[str, float], None]:
    """A ``progress(message, fraction)`` callback that prints ``label: message, N % (T s)``
    at its first call and then at most once every ``period_s`` seconds."""
    start = time.monotonic()
    last = [-period_s]

    def progress(message: str, fraction: float) -> None:
        now = time.monotonic() - start
        if now - last[0] < period_s:
            return
        last[0] = now
        console.print(f"{label}: {message}, {100 * fraction:.0f} % ({now:.0f} s)",
                      highlight=False, soft_wrap=True)

    return progress
