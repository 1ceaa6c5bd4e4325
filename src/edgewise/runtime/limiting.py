"""How heavy work (planning, a workload's dry run) is run with limits: the Limiter seam.
The manager gives a limiter that runs the work in a capped child process
(``edgewise.service.limits.ProcessLimiter``); elsewhere it runs inline."""

from __future__ import annotations

from collections.abc import Callable
from typing import ParamSpec, Protocol, TypeVar

__all__ = ["Limiter", "run_inline"]

P = ParamSpec("P")
T = TypeVar("T")


class Limiter(Protocol):
    """Runs planning work with the manager's time and memory limits, off the event loop;
    raises ``PlanningLimitError`` (``edgewise.jobs``) when a limit is hit. ``fn``
    and its arguments must be picklable (a module-level function): the manager may run it
    in a child process."""

    def __call__(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T: ...


def run_inline(fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """A :class:`Limiter` without limits (the CLI, tests, routers built outside the
    manager)."""
    return fn(*args, **kwargs)
