"""Planning work under limits: each request's planning runs in a child process (forked
from a forkserver that preloaded the problems' modules) with a wall-clock deadline and an
address-space cap, at a lower CPU priority, at most a few at once with a short queue
before them (429 beyond it), so that no request can exhaust the host or hold the API's
threads."""

from __future__ import annotations

import math
import multiprocessing
import multiprocessing.connection
import os
import resource
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any, ParamSpec, TypeVar

import psutil

from edgewise.errors import ConfigError, EdgewiseError, InfeasibleError, RuntimeFault
from edgewise.jobs import PlanningBusyError, PlanningLimitError

__all__ = ["ProcessLimiter"]

P = ParamSpec("P")
T = TypeVar("T")
_USER_ERRORS: dict[str, type[EdgewiseError]] = {
    cls.__name__: cls for cls in (ConfigError, InfeasibleError, RuntimeFault, PlanningLimitError)}


def _child(conn: multiprocessing.connection.Connection, memory_bytes: int, nice: int,
           fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Run ``fn`` under an address-space cap, ``nice`` levels below the manager; send
    ("ok", value) or ("error", ...)."""
    if nice > 0:
        os.nice(nice)
    used = psutil.Process().memory_info().vms
    resource.setrlimit(resource.RLIMIT_AS, (used + memory_bytes, used + memory_bytes))
    try:
        conn.send(("ok", fn(*args, **kwargs), None))
    except Exception as exc:  # out of memory, a user's error, or a bug (to the parent)
        if _out_of_memory(exc):  # a library may word the cap's refusal as a user error
            conn.send(("memory", "", None))
        elif isinstance(exc, EdgewiseError):
            conn.send(("user", type(exc).__name__, (str(exc), getattr(exc, "field", None))))
        else:
            conn.send(("bug", type(exc).__name__, "".join(traceback.format_exception(exc))))
    finally:
        conn.close()


def _out_of_memory(exc: BaseException) -> bool:
    """A MemoryError, or a library's own words for one (torch's allocator raises a
    RuntimeError when the address-space cap refuses it memory)."""
    text = str(exc).lower()
    return isinstance(exc, MemoryError) or "allocate memory" in text or "out of memory" in text


class ProcessLimiter:
    """A ``Limiter`` (``edgewise.jobs``): ``limiter(fn, *args)`` runs ``fn`` in a
    child process and returns its result, or raises PlanningLimitError (413) naming the
    limit that ``fn`` hit: ``seconds`` of wall time or ``memory_mb`` of memory beyond what
    the child starts with. At most ``parallel`` children run at once and ``queue``
    requests wait for them (each request ahead holds its slot for at most ``seconds``, so
    a waiting one runs within ``seconds * queue / parallel``: it never gets a late 429); a
    request that finds both full gets PlanningBusyError (429) at once, with a retry delay:
    the mean recent planning time.
    Errors a user caused (EdgewiseError) pass through. Children run ``nice`` levels below
    the manager, so that its HTTP server answers cheap reads while they plan.

    ``preload``: modules the forkserver imports once, so that children start warm.
    """

    def __init__(self, *, seconds: float = 20.0, memory_mb: int = 2048, parallel: int = 2,
                 queue: int = 4, nice: int = 10, preload: Sequence[str] = ()) -> None:
        if seconds <= 0 or memory_mb <= 0 or parallel < 1 or queue < 0 or nice < 0:
            raise ConfigError("seconds and memory_mb must be > 0, parallel >= 1, queue and "
                              "nice >= 0", field="planning_limits")
        self.seconds, self.memory_mb, self.nice = seconds, memory_mb, nice
        self.parallel, self.queue = parallel, queue
        self._slots = threading.BoundedSemaphore(parallel)
        self._admitted = threading.BoundedSemaphore(parallel + queue)
        self._lock = threading.Lock()
        self._mean_s = 1.0  # a moving mean of planning times, for Retry-After
        self.admitted = 0  # requests running or waiting now
        self._ctx = multiprocessing.get_context("forkserver")
        self._ctx.set_forkserver_preload(["edgewise.service.limits", *preload])

    def warm(self) -> None:
        """Start the forkserver now (in the background), not at the first request."""
        from multiprocessing import forkserver

        threading.Thread(target=forkserver.ensure_running, daemon=True,
                         name="edgewise-forkserver").start()

    def retry_after_s(self) -> int:
        """Whole seconds after which a place is likely free: the mean recent planning time
        (at least 1 s, at most the time limit)."""
        with self._lock:
            mean = self._mean_s
        return max(1, min(math.ceil(self.seconds), math.ceil(mean)))

    def _busy(self) -> PlanningBusyError:
        wait = self.retry_after_s()
        return PlanningBusyError(
            f"{self.parallel} planning requests are running and {self.queue} waiting (the "
            f"limit); try again in {wait} s", retry_after_s=wait)

    def __call__(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        if not self._admitted.acquire(blocking=False):
            raise self._busy()
        self._count(+1)
        try:
            # bounded: each request ahead holds a slot for at most the time limit
            if not self._slots.acquire(timeout=self.seconds * (2 + self.queue / self.parallel)):
                raise self._busy()
            started = time.monotonic()
            try:
                return self._run(fn, args, kwargs)
            finally:
                self._slots.release()
                self._observe(time.monotonic() - started)
        finally:
            self._count(-1)
            self._admitted.release()

    def _count(self, change: int) -> None:
        with self._lock:
            self.admitted += change

    def _observe(self, seconds: float) -> None:
        with self._lock:
            self._mean_s = 0.8 * self._mean_s + 0.2 * seconds

    def _run(self, fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]) -> T:
        receiver, sender = self._ctx.Pipe(duplex=False)
        child = self._ctx.Process(
            target=_child, daemon=True, name="edgewise-planning",
            args=(sender, self.memory_mb * 2**20, self.nice, fn, args, kwargs))
        child.start()
        sender.close()
        try:
            if not receiver.poll(self.seconds):
                raise PlanningLimitError(f"planning took longer than {self.seconds:g} s "
                                         "(the limit); ask for a smaller problem")
            try:
                outcome = receiver.recv()
            except EOFError:  # the child died without a word: out of memory
                outcome = ("memory", "", None)
        finally:
            receiver.close()
            if child.is_alive():
                child.kill()
            child.join()
        result: T = self._result(outcome)
        return result

    def _result(self, outcome: tuple[str, Any, Any]) -> Any:
        status, name, value = outcome
        if status == "ok":
            return name
        if status == "memory":
            raise PlanningLimitError(f"planning needed more than {self.memory_mb} MB (the "
                                     "limit); ask for a smaller problem")
        if status == "user":
            message, field = value
            exc = _USER_ERRORS.get(name, EdgewiseError)(message)
            exc.field = field  # type: ignore[attr-defined]
            raise exc
        raise RuntimeError(f"planning failed with {name}:\n{value}")
