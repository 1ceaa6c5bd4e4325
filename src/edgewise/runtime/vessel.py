"""Members of a run in processes that outlive it: one Ray actor process (a vessel) hosts one
member at a time and, once the run is over, the next run's member on the same device.

Every member of a training run (a worker, its parameter server) used to be a Ray actor of
its own, so every run started a Python process per member. One that imports PyTorch spends
about 2 CPU-seconds on its imports before it does anything (on a Raspberry Pi 4, several
seconds of wall time): on a 2-core host most of a short run's CPU, and on a board the wait
before a job or a restarted attempt trains at all. A vessel is a Ray actor that builds a
member inside itself (``become``), forwards its method calls (``call``) and, when the run
ends, drops it (``release``) and goes back to this process's pool, from which the next
member on the same device, reservation and concurrency is built without a new process.

What does not change: one member per process at a time, so a crash (``FaultInjector.kill``
kills the vessel's process) takes exactly that member down, as before; a member's calls run
with the concurrency its own ``@ray.remote`` declares; the device's slot and memory
reservation are Ray's as before. What the pool adds: an idle vessel keeps its device's
reservation, so creating any other actor on that device (``RayRuntime.actor_options``)
first ends that device's idle vessels, and at most :data:`MAX_IDLE` idle vessels live, each
for at most :data:`IDLE_S`. A vessel whose member still has calls running when its run
ends (a worker stuck on a lost server) is killed, not reused. ``EDGEWISE_VESSELS=0`` turns
the pool off: every member is then an actor of its own, as before.

The member's name (``worker-JOB-ATTEMPT-DEVICE``) is kept in Ray's key-value store beside the
vessel's own actor name, so that faults can find a member by its name
(:func:`hosted_members`, :func:`vessel_of`).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib
import json
import os
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayError, RayTaskError
from ray.experimental import internal_kv

__all__ = ["IDLE_S", "MAX_IDLE", "VESSEL_PREFIX", "HostedMember", "Vessel", "clear_pool",
           "evict_device", "hosted_members", "idle_vessel_names", "pool_size", "release_members",
           "spawn_member", "vessel_of", "vessels_enabled"]

MAX_IDLE = 8
"""Idle vessels one process keeps at most (each a Python process with PyTorch loaded,
about 300 MB of the host's memory)."""

IDLE_S = 30.0
"""An idle vessel older than this is ended. The pool pays off between runs that follow each
other (a restarted attempt, the next job, the next test); an idle Ray actor process still
costs about 1 % of a core (its core worker's threads), measured on the 2-core host."""

_REAP_EVERY_S = 5.0

BECOME_WAIT_S = 120.0
"""How long a member's call waits for its ``become`` (issued first, but a threaded actor may
start it second; a constructor on a loaded host takes seconds)."""

RELEASE_TIMEOUT_S = 10.0
"""How long a run's end waits for its vessels to drop their members."""

VESSEL_PREFIX = "vessel-"
"""The start of every vessel's actor name."""

_KV_PREFIX = b"ew-member:"
_KV_NAMESPACE = "edgewise"


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

    def become(self, token: str, cls: tuple[str, str], args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> int:
        """Build the member for ``token``: the class ``cls`` (module, name; an actor class
        stands for the class it wraps) called with ``args`` and ``kwargs``; returns the
        process id. A constructor's exception is raised here and by every call for this
        token, as an actor's own would be."""
        member, failure = None, None
        try:
            found = getattr(importlib.import_module(cls[0]), cls[1])
            member = getattr(found, "__ray_actor_class__", found)(*args, **kwargs)
        except BaseException as exc:  # re-raised to every caller, as a failed actor would
            failure = exc
        with self._lock:
            released = token in self._ended  # its run ended before this build did
            if not released:
                self._token, self._member, self._failure = token, member, failure
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
            self._calls += 1
        try:
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
        _trim_heap()
        return clean


Vessel = ray.remote(num_cpus=0)(_VesselCore)
"""The vessel as a Ray actor class (members without concurrency groups)."""

_GROUPED: dict[tuple[tuple[str, int], ...], Any] = {}


def _vessel_class(groups: dict[str, int]) -> Any:
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

    def __getattr__(self, method: str) -> _Method:
        if method.startswith("__"):
            raise AttributeError(method)
        group = next((g for m, g in self.groups if m == method), None)
        return _Method(self.vessel, self.token, method, group)

    def __reduce__(self) -> tuple[Any, ...]:  # slots and __getattr__: spell pickling out
        return (HostedMember, (self.vessel, self.vessel_name, self.token, self.name, self.key,
                               self.groups))


@dataclass
class _Idle:
    vessel: Any
    vessel_name: str
    key: tuple[Any, ...]
    since: float


@dataclass
class _Pool:
    lock: threading.Lock = field(default_factory=threading.Lock)
    idle: list[_Idle] = field(default_factory=list)
    session: str = ""
    reaper: threading.Thread | None = None


_POOL = _Pool()


def _session() -> str:
    return str(ray.get_runtime_context().gcs_address)


def _checked_idle() -> list[_Idle]:
    """The pool's idle vessels, after dropping those of another Ray instance (gone with it)
    and ending those idle too long (call with the pool's lock held)."""
    session = _session()
    if _POOL.session != session:
        _POOL.idle, _POOL.session = [], session
    now = time.monotonic()
    for stale in [i for i in _POOL.idle if now - i.since > IDLE_S]:
        _POOL.idle.remove(stale)
        _kill(stale.vessel)
    return _POOL.idle


def _reap() -> None:
    """End idle vessels as they pass :data:`IDLE_S`, until none is left (a daemon thread,
    started by the first vessel to go idle)."""
    while True:
        time.sleep(_REAP_EVERY_S)
        with _POOL.lock:
            if not ray.is_initialized():
                _POOL.idle = []
            else:
                _checked_idle()
            if not _POOL.idle:
                _POOL.reaper = None
                return


def _kill(vessel: Any) -> None:
    with contextlib.suppress(Exception):
        ray.kill(vessel, no_restart=True)


def _key(options: dict[str, Any], concurrency: int,
         groups: dict[str, int]) -> tuple[Any, ...]:
    """What a vessel must match to host a member: the same reservations, namespace,
    concurrency (and concurrency groups) and environment (e.g. an MPS share's variables)."""
    return (tuple(sorted(options.get("resources", {}).items())), options.get("namespace"),
            concurrency, tuple(sorted(groups.items())),
            json.dumps(options.get("runtime_env"), sort_keys=True, default=str))


def _device_of(key: tuple[Any, ...]) -> frozenset[str]:
    return frozenset(name for name, _ in key[0])


def evict_device(resource: str, memory: str = "", memory_mb: float = 0.0) -> int:
    """End the idle vessels that hold ``resource`` (a device's slot) when an actor about to
    be placed there needs ``memory_mb`` of the device's ``memory`` resource and Ray has less
    free (all of them without ``memory``); how many were ended."""
    if not ray.is_initialized():
        return 0
    with _POOL.lock:
        idle = _checked_idle()
        there = [i for i in idle if resource in _device_of(i.key)]
    if not there:
        return 0
    if memory and ray.available_resources().get(memory, 0.0) >= memory_mb:  # type: ignore[no-untyped-call]
        return 0
    with _POOL.lock:
        ended = [i for i in there if i in _POOL.idle]
        for i in ended:
            _POOL.idle.remove(i)
    for i in ended:
        _kill(i.vessel)
    return len(ended)


def clear_pool(wait_s: float = 0.0) -> None:
    """End every idle vessel of this process; with ``wait_s``, wait (that long at most) until
    their processes are gone, memory freed (``ray.kill`` itself returns at once)."""
    with _POOL.lock:
        idle, _POOL.idle = _POOL.idle, []
    if not ray.is_initialized():
        return
    for i in idle:
        _kill(i.vessel)
    deadline = time.monotonic() + wait_s
    for i in idle:
        while time.monotonic() < deadline:
            try:
                ray.get(i.vessel.pid.remote(), timeout=max(deadline - time.monotonic(), 0.1))
            except (RayError, GetTimeoutError):
                break
            time.sleep(0.1)


def idle_vessel_names() -> frozenset[str]:
    """The actor names of this process's idle vessels (no leftovers of a run: kept)."""
    with _POOL.lock:
        return frozenset(i.vessel_name for i in _POOL.idle)


def pool_size() -> int:
    """Idle vessels in this process's pool."""
    with _POOL.lock:
        return len(_POOL.idle)


def _register(name: str, vessel_name: str) -> None:
    internal_kv._internal_kv_put(_KV_PREFIX + name.encode(), vessel_name.encode(),
                                 overwrite=True, namespace=_KV_NAMESPACE)


def _unregister(name: str) -> None:
    with contextlib.suppress(Exception):
        internal_kv._internal_kv_del(_KV_PREFIX + name.encode(), namespace=_KV_NAMESPACE)


def spawn_member(actor_class: Any, options: dict[str, Any], *args: Any,
                 **kwargs: Any) -> Any:
    """Start a member of ``actor_class`` (a ``@ray.remote`` class) with ``options`` (from
    ``RayRuntime.actor_options``, naming the member): in a pooled vessel, reusing an idle one
    of the same device, reservation and concurrency when there is one, or as an actor of its
    own when the pool is off."""
    if not vessels_enabled():
        return actor_class.options(**options).remote(*args, **kwargs)
    options = dict(options)
    concurrency = int(options.pop("max_concurrency", None)
                      or actor_class._default_options.get("max_concurrency", 1))
    name = str(options.get("name") or actor_class.__ray_actor_class__.__name__)
    meta = actor_class.__ray_metadata__
    groups = dict(meta.concurrency_groups or {})
    methods = tuple(sorted(meta.method_meta.concurrency_group_for_methods.items()))
    key = _key(options, concurrency, groups)
    token = f"{name}#{uuid.uuid4().hex[:8]}"
    cls = (actor_class.__module__, actor_class.__ray_actor_class__.__qualname__)
    with _POOL.lock:
        idle = _checked_idle()
        found = next((i for i in reversed(idle) if i.key == key), None)
        if found is not None:
            idle.remove(found)
    if found is None:  # idle vessels of other kinds may hold the memory this one needs
        resources = options.get("resources", {})
        slot = next((r for r in resources if r.startswith("device:")), "")
        memory = next((r for r in resources if r.startswith("device-mem:")), "")
        if slot:
            evict_device(slot, memory, float(resources.get(memory, 0.0)))
    if found is not None:
        member: HostedMember | None = HostedMember(found.vessel, found.vessel_name, token,
                                                   name, key, methods)
        try:  # a reused vessel is checked before it is handed out: it may have been killed
            ray.get(found.vessel.become.remote(token, cls, args, kwargs), timeout=120)
        except RayTaskError:  # the member's constructor failed: its calls say why
            pass
        except (RayError, GetTimeoutError):
            _kill(found.vessel)
            member = None
        if member is not None:
            _register(name, found.vessel_name)
            return member
    vessel_name = f"{VESSEL_PREFIX}{uuid.uuid4().hex[:12]}"
    vessel_options = {**options, "name": vessel_name, "max_concurrency": concurrency + 1}
    vessel = _vessel_class(groups).options(**vessel_options).remote()
    vessel.become.remote(token, cls, args, kwargs)  # failures surface on the member's calls
    _register(name, vessel_name)
    return HostedMember(vessel, vessel_name, token, name, key, methods)


def release_members(handles: list[Any], *, kill: bool = False) -> None:
    """End the members ``handles`` (hosted ones or actors of their own): a hosted member's
    vessel goes back to the pool if it dropped the member cleanly, else it is killed, and so
    is every vessel with ``kill`` (a member replaced because it failed)."""
    hosted = [h for h in handles if isinstance(h, HostedMember)]
    for h in handles:
        if not isinstance(h, HostedMember):
            _kill(h)
    if kill:
        for h in hosted:
            _unregister(h.name)
            _kill(h.vessel)
        return
    refs = [h.vessel.release.remote(h.token) for h in hosted]
    for h, ref in zip(hosted, refs, strict=True):
        _unregister(h.name)
        try:
            clean = bool(ray.get(ref, timeout=RELEASE_TIMEOUT_S))
        except (RayError, GetTimeoutError):
            clean = False
        if not clean:
            _kill(h.vessel)
            continue
        with _POOL.lock:
            idle = _checked_idle()
            idle.append(_Idle(h.vessel, h.vessel_name, h.key, time.monotonic()))
            extra = idle[:-MAX_IDLE] if len(idle) > MAX_IDLE else []
            del idle[: len(extra)]
            if _POOL.reaper is None:
                _POOL.reaper = threading.Thread(target=_reap, name="edgewise-vessel-reaper",
                                                daemon=True)
                _POOL.reaper.start()
        for i in extra:
            _kill(i.vessel)


def hosted_members(prefix: str = "") -> dict[str, str]:
    """Members hosted in live vessels on the connected instance (any process's), by name:
    the vessel's actor name."""
    keys = internal_kv._internal_kv_list(_KV_PREFIX + prefix.encode(), namespace=_KV_NAMESPACE)
    found: dict[str, str] = {}
    for key in keys:
        value = internal_kv._internal_kv_get(key, namespace=_KV_NAMESPACE)
        if value is not None:
            found[key[len(_KV_PREFIX):].decode()] = value.decode()
    return found


def vessel_of(name: str) -> str | None:
    """The actor name of the vessel hosting member ``name``, if one does."""
    value = internal_kv._internal_kv_get(_KV_PREFIX + name.encode(), namespace=_KV_NAMESPACE)
    return value.decode() if value is not None else None
