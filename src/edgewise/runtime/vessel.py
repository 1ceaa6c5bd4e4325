"""Members of a run in processes that outlive it: one Ray actor process (a vessel) hosts one
member at a time and, once the run is over, the next run's member on the same device.

Every member of a training run (a worker, its parameter server) used to be a Ray actor of
its own, so every run started a Python process per member. One that imports PyTorch spends
about 2 CPU-seconds on its imports before it does anything (on a Raspberry Pi 4, several
seconds of wall time): on a 2-core host most of a short run's CPU, and on a board the wait
before a job or a restarted attempt trains at all. A vessel is a Ray actor that builds a
member inside itself (``become``), forwards its method calls (``call``) and, when the run
ends, drops it (``release``) and goes back to this process's pool, from which the next
member on the same device, reservation and concurrency groups is built without a new
process (whatever its own concurrency: :data:`VESSEL_CONCURRENCY`).

What does not change: one member per process at a time, so a crash (``FaultInjector.kill``
kills the vessel's process) takes exactly that member down, as before; a member's calls run
with the concurrency its own ``@ray.remote`` declares (Ray's concurrency groups, and the
vessel's semaphore for the rest); the device's slot and memory
reservation are Ray's as before. What the pool adds: on a testbed or a real cluster an idle
vessel keeps its device's reservation, so creating any other actor on that device
(``RayRuntime.actor_options``) first ends that device's idle vessels; on an emulating
instance the reservation is a placement group of the member's own and the vessel holds
none, so any idle vessel of the host serves the next member (``runtime.vessel_pool``). At
most :data:`MAX_IDLE` idle vessels live, each for at most :data:`IDLE_S`. A vessel whose
member still has calls running when its run ends (a worker stuck on a lost server) is
killed, not reused. ``EDGEWISE_VESSELS=0`` turns
the pool off: every member is then an actor of its own, as before.

The member's name (``worker-JOB-ATTEMPT-DEVICE``) is kept in Ray's key-value store beside the
vessel's own actor name, so that faults can find a member by its name
(``runtime.vessel_pool``: :func:`hosted_members`, :func:`vessel_of`); the pool itself is there too.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib
import os
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

import ray

__all__ = ["BECOME_WAIT_S", "RESERVE_APART", "VESSEL_CONCURRENCY", "VESSEL_PREFIX",
           "HostedMember", "Vessel", "vessel_class", "vessels_enabled"]

VESSEL_CONCURRENCY = 33
"""Threads of a vessel's default concurrency group: the most any member of ours declares (the
parameter server's 32) and one for ``become`` and ``release``. A member's own concurrency is
kept by the vessel (a semaphore around its calls), so that one vessel can host, one after
another, members that declare different concurrencies: a worker, then a parameter server."""

BECOME_WAIT_S = 120.0
"""How long a member's call waits for its ``become`` (issued first, but a threaded actor may
start it second; a constructor on a loaded host takes seconds)."""

VESSEL_PREFIX = "vessel-"
"""The start of every vessel's actor name."""

RESERVE_APART = "edgewise_reserve_apart"
"""The key ``RayRuntime.member_options`` sets on an emulating instance, which
``vessel_pool.spawn_member`` takes out: reserve the member's device resources in a
placement group of their own, and host it in any of the host's idle vessels."""

def vessels_enabled() -> bool:
    """Whether members are hosted in pooled vessels (``EDGEWISE_VESSELS``, default on)."""
    return os.environ.get("EDGEWISE_VESSELS", "1").strip().lower() not in ("0", "false", "no")


def _trim_heap() -> None:
    """Give freed heap back to the system, so a reused vessel's RSS (which workers check
    against their device's memory) is not its predecessors'."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def _stop(member: Any) -> None:
    """Stop a member's threads (its ``stop()``, if it has one)."""
    stop = getattr(member, "stop", None)
    if callable(stop):
        with contextlib.suppress(Exception):
            stop()


_FREEZE_DUE = threading.Event()
"""Set when a member's import loaded modules this process did not hold yet; the next
``release`` freezes what is alive once its member is collected (:func:`_freeze_modules`)."""


def _imported(module: str) -> Any:
    """``module``, imported; where that loaded modules this process did not hold yet
    (PyTorch, a member's own), they are frozen out of the cyclic garbage collector at the
    next release (:func:`_freeze_modules`)."""
    before = len(sys.modules)
    found = importlib.import_module(module)
    if len(sys.modules) > before:
        _FREEZE_DUE.set()
    return found


def _freeze_modules() -> None:
    """After a member is dropped and collected, freeze what is alive (``gc.freeze``):
    modules live as long as the process, and every later collection (``release``'s, the
    interpreter's own) skips their objects. With PyTorch loaded a full collection walks
    ~200,000 objects, 0.1 CPU-seconds each time. Not at the import itself: Ray has already
    built the member's arguments then, and a frozen argument in a reference cycle is never
    collected. A pipeline stage's model is its argument, built in place (a graph module
    and its graph refer to each other), so the first stage a vessel hosted stayed in its
    memory for good: 0.6 GB of ViT-Huge on a 2 GB board (2026-12-05)."""
    if _FREEZE_DUE.is_set():
        _FREEZE_DUE.clear()
        gc.freeze()


class _VesselCore:
    """A process that hosts one member at a time: ``become`` builds it, ``call`` runs one of
    its methods (waiting for the ``become`` with the same token, since a threaded actor's
    calls may start out of order), ``release`` drops it."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._token = ""
        self._member: Any = None
        self._failure: BaseException | None = None
        self._calls = 0
        self._ended: set[str] = set()  # tokens released here: their calls fail at once
        self._gate: threading.Semaphore | None = None
        self._grouped: frozenset[str] = frozenset()

    def become(self, token: str, cls: tuple[str, str], args: tuple[Any, ...],
               kwargs: dict[str, Any], concurrency: int | None = None,
               grouped: tuple[str, ...] = ()) -> int:
        """Build the member for ``token``: the class ``cls`` (module, name; an actor class
        stands for the class it wraps) called with ``args`` and ``kwargs``; returns the
        process id. A constructor's exception is raised here and by every call for this
        token, as an actor's own would be. ``concurrency``: how many of the member's calls
        outside its concurrency groups (the methods ``grouped``, which Ray limits) run at
        once here (None: as many as the vessel's threads)."""
        gate = threading.BoundedSemaphore(concurrency) if concurrency else None
        member, failure = None, None
        try:
            found = getattr(_imported(cls[0]), cls[1])
            member = getattr(found, "__ray_actor_class__", found)(*args, **kwargs)
        except BaseException as exc:  # re-raised to every caller, as a failed actor would
            failure = exc
        with self._lock:
            released = token in self._ended  # its run ended before this build did
            if not released:
                self._token, self._member, self._failure = token, member, failure
                self._gate, self._grouped = gate, frozenset(grouped)
            self._lock.notify_all()
        if released:
            _stop(member)
            return os.getpid()
        if failure is not None:
            raise failure
        return os.getpid()

    def call(self, token: str, method: str, *args: Any, **kwargs: Any) -> Any:
        """``method`` of the member built for ``token``."""
        with self._lock:
            if not self._lock.wait_for(lambda: self._token == token or token in self._ended,
                                       timeout=BECOME_WAIT_S) or token in self._ended:
                raise RuntimeError(f"member {token!r} has ended")
            if self._failure is not None:
                raise self._failure
            member = self._member
            gate = None if method in self._grouped else self._gate
            self._calls += 1
        try:
            if gate is None:
                return getattr(member, method)(*args, **kwargs)
            with gate:
                return getattr(member, method)(*args, **kwargs)
        finally:
            with self._lock:
                self._calls -= 1
                self._lock.notify_all()

    def pid(self) -> int:
        """This vessel's process id."""
        return os.getpid()

    def release(self, token: str, grace_s: float = 2.0) -> bool:
        """Drop the member of ``token`` (stopping its threads); whether the vessel is clean
        to host another: no call of the member still running after ``grace_s``."""
        with self._lock:
            if self._token != token:  # not built yet (a threaded actor's order): never build it
                self._ended.add(token)
                self._lock.notify_all()
                return self._calls == 0
            member, self._member, self._failure, self._token = self._member, None, None, ""
            self._ended.add(token)
            self._lock.notify_all()
            clean = self._lock.wait_for(lambda: self._calls == 0, timeout=grace_s)
        _stop(member)
        del member
        gc.collect()
        _freeze_modules()
        _trim_heap()
        return clean


Vessel = ray.remote(num_cpus=0)(_VesselCore)
"""The vessel as a Ray actor class (members without concurrency groups)."""

_GROUPED: dict[tuple[tuple[str, int], ...], Any] = {}


def vessel_class(groups: dict[str, int]) -> Any:
    """The vessel's actor class with the member's concurrency groups (Ray takes them at the
    class's declaration only, not in ``.options``)."""
    if not groups:
        return Vessel
    key = tuple(sorted(groups.items()))
    if key not in _GROUPED:
        _GROUPED[key] = ray.remote(num_cpus=0, concurrency_groups=dict(key))(_VesselCore)  # type: ignore[call-overload]
    return _GROUPED[key]


@dataclass(frozen=True, slots=True)
class _Method:
    vessel: Any
    token: str
    name: str
    group: str | None = None  # the member's concurrency group for this method

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        call = self.vessel.call
        if self.group is not None:
            call = call.options(concurrency_group=self.group)
        return call.remote(self.token, self.name, *args, **kwargs)


@dataclass(frozen=True, slots=True)
class HostedMember:
    """A member's handle: ``handle.method.remote(...)`` as for an actor of its own."""

    vessel: Any
    vessel_name: str
    token: str
    name: str
    key: tuple[Any, ...] = field(compare=False)
    groups: tuple[tuple[str, str], ...] = ()  # (method, concurrency group) of the member
    reservation: Any = field(default=None, compare=False)
    """The placement group holding the member's device resources where they are held apart
    from its vessel (an emulating instance: ``runtime.vessel_pool``), else None."""

    def __getattr__(self, method: str) -> _Method:
        if method.startswith("__"):
            raise AttributeError(method)
        group = next((g for m, g in self.groups if m == method), None)
        return _Method(self.vessel, self.token, method, group)

    def __reduce__(self) -> tuple[Any, ...]:  # slots and __getattr__: spell pickling out
        return (HostedMember, (self.vessel, self.vessel_name, self.token, self.name, self.key,
                               self.groups, self.reservation))
