"""The driver's side of :mod:`edgewise.runtime.vessel`: this process's pool of idle vessels,
starting a member in one (:func:`spawn_member`), ending members (:func:`release_members`),
ending idle vessels when another actor needs their device's memory (:func:`evict_device`),
and the members' names beside their vessels' in Ray's key-value store, for faults
(:func:`hosted_members`, :func:`vessel_of`).

Where a vessel runs depends on the instance. On a testbed or a real cluster each device is
a node of its own, so a vessel is an actor on its member's device, holding the member's
reservation (the device's slot and memory) as long as it lives: the next member on that
device, with that reservation, can reuse it. On an emulating instance every device is this
host: the member's reservation is then a placement group of its own, made when the member
starts and removed when it ends (:data:`~edgewise.runtime.vessel.RESERVE_APART`), and
the vessel is a process of the host that holds no device: any member of any cluster, on
any device, can reuse it. Ray still refuses to reserve more of a device than it has."""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayError, RayTaskError
from ray.experimental import internal_kv
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from edgewise.errors import EdgewiseError
from edgewise.runtime.reservation import clear_reservations, reservations, unreserve
from edgewise.runtime.reservation import reserve as reserve_apart
from edgewise.runtime.vessel import (
    RESERVE_APART,
    VESSEL_CONCURRENCY,
    VESSEL_PREFIX,
    HostedMember,
    vessel_class,
    vessels_enabled,
)

__all__ = ["IDLE_S", "MAX_IDLE", "RESERVE_WAIT_S", "clear_pool", "clear_reservations",
           "evict_device", "hosted_members", "idle_vessel_names", "pool_size",
           "release_members", "reservations", "spawn_member", "vessel_of"]

MAX_IDLE = 8
"""Idle vessels one process keeps at most (each a Python process with PyTorch loaded,
about 300 MB of the host's memory)."""

IDLE_S = 30.0
"""An idle vessel older than this is ended. The pool pays off between runs that follow each
other (a restarted attempt, the next job, the next test); an idle Ray actor process still
costs about 1 % of a core (its core worker's threads), measured on the 2-core host."""

_REAP_EVERY_S = 5.0

RELEASE_TIMEOUT_S = 10.0
"""How long a run's end waits for its vessels to drop their members."""

RESERVE_WAIT_S = 120.0
"""How long a member held apart from its vessel waits for its device's reservation (the
memory other members of the device still hold: a replaced member's predecessor being
removed, another job on the same devices) before its start fails, naming the device."""

_KV_PREFIX = b"ew-member:"
_KV_NAMESPACE = "edgewise"


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


def _shared(concurrency: int) -> bool:
    """Whether a member of this concurrency runs in a vessel of :data:`VESSEL_CONCURRENCY`
    threads (which keeps the member's limit), else in one of its own size."""
    return concurrency < VESSEL_CONCURRENCY


def _key(options: dict[str, Any], concurrency: int,
         groups: dict[str, int]) -> tuple[Any, ...]:
    """What a vessel must match to host a member: the same reservations, namespace, concurrency
    groups and environment (an MPS share's variables); concurrency only past :func:`_shared`."""
    return (tuple(sorted(options.get("resources", {}).items())), options.get("namespace"),
            None if _shared(concurrency) else concurrency, tuple(sorted(groups.items())),
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


def _here() -> NodeAffinitySchedulingStrategy:
    """This driver's node (an emulating instance's head): where vessels that hold no device
    run, so that no node an instance adds and later ends takes them with it."""
    return NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(),
                                          soft=True)


def _take_idle(key: tuple[Any, ...]) -> _Idle | None:
    """An idle vessel of ``key``, taken out of the pool (the latest to go idle), if any."""
    with _POOL.lock:
        idle = _checked_idle()
        found = next((i for i in reversed(idle) if i.key == key), None)
        if found is not None:
            idle.remove(found)
    return found


def _make_room(resources: dict[str, float]) -> None:
    """End the idle vessels on the device of ``resources`` that hold memory it needs."""
    slot = next((r for r in resources if r.startswith("device:")), "")
    memory = next((r for r in resources if r.startswith("device-mem:")), "")
    if slot:
        evict_device(slot, memory, float(resources.get(memory, 0.0)))


def _become(found: _Idle, build: tuple[Any, ...]) -> bool:
    """Build a member in a reused vessel (``build``: ``become``'s arguments); False where the
    vessel is gone (killed meanwhile). A failed constructor is the member's calls' to say."""
    try:
        ray.get(found.vessel.become.remote(*build), timeout=120)
    except RayTaskError:  # the member's constructor failed: its calls say why
        return True
    except (RayError, GetTimeoutError):
        _kill(found.vessel)
        return False
    return True


def spawn_member(actor_class: Any, options: dict[str, Any], *args: Any,
                 **kwargs: Any) -> Any:
    """Start a member of ``actor_class`` (a ``@ray.remote`` class) with ``options`` (from
    ``RayRuntime.actor_options``, naming the member): in a pooled vessel, reusing an idle one
    of the same device, reservation and concurrency groups when there is one, or as an actor of its
    own when the pool is off. With :data:`~edgewise.runtime.vessel.RESERVE_APART` in
    ``options`` (``RayRuntime.member_options`` on an emulating instance) the member's device
    resources are reserved apart, and any idle vessel of this host can host it."""
    options = dict(options)
    apart = bool(options.pop(RESERVE_APART, False))
    if not vessels_enabled():
        return actor_class.options(**options).remote(*args, **kwargs)
    reserve: dict[str, float] = {}
    if apart:
        reserve = dict(options.pop("resources", {}))
        options["scheduling_strategy"] = _here()
    concurrency = int(options.pop("max_concurrency", None)
                      or actor_class._default_options.get("max_concurrency", 1))
    name = str(options.get("name") or actor_class.__ray_actor_class__.__name__)
    meta = actor_class.__ray_metadata__
    groups = dict(meta.concurrency_groups or {})
    methods = tuple(sorted(meta.method_meta.concurrency_group_for_methods.items()))
    grouped = tuple(m for m, _ in methods)
    key = _key(options, concurrency, groups)
    token = f"{name}#{uuid.uuid4().hex[:8]}"
    cls = (actor_class.__module__, actor_class.__ray_actor_class__.__qualname__)
    build = (token, cls, args, kwargs, concurrency, grouped)  # a vessel's ``become``
    found = _take_idle(key)
    if found is None or reserve:  # idle vessels on the device may hold the memory it needs
        _make_room(reserve or options.get("resources", {}))
    try:
        reservation = reserve_apart(token, reserve, RESERVE_WAIT_S) if reserve else None
    except EdgewiseError:
        if found is not None:
            with _POOL.lock:
                _POOL.idle.append(_Idle(found.vessel, found.vessel_name, found.key,
                                        time.monotonic()))
        raise
    if found is not None and _become(found, build):
        _register(name, found.vessel_name)
        return HostedMember(found.vessel, found.vessel_name, token, name, key, methods,
                            reservation)
    vessel_name = f"{VESSEL_PREFIX}{uuid.uuid4().hex[:12]}"
    threads = VESSEL_CONCURRENCY if _shared(concurrency) else concurrency + 1
    vessel_options = {**options, "name": vessel_name, "max_concurrency": threads}
    vessel = vessel_class(groups).options(**vessel_options).remote()
    vessel.become.remote(*build)  # failures surface on the member's calls
    _register(name, vessel_name)
    return HostedMember(vessel, vessel_name, token, name, key, methods, reservation)


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
            unreserve(h.token, h.reservation)
        return
    refs = [h.vessel.release.remote(h.token) for h in hosted]
    for h, ref in zip(hosted, refs, strict=True):
        _unregister(h.name)
        try:
            clean = bool(ray.get(ref, timeout=RELEASE_TIMEOUT_S))
        except (RayError, GetTimeoutError):
            clean = False
        unreserve(h.token, h.reservation)
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
