"""Members in pooled processes (``runtime.vessel``): a run's member reuses the process a
finished member left, built anew (on an emulating instance any device's, any cluster's; on a
testbed its own device's); a crash kills that member alone and its process is never handed
out again; a busy process is not reused; a member's reservation is Ray's while it lives and
free once it ends; other actors on the device find an idle vessel's reservation free."""

from __future__ import annotations

import gc
import threading
import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
import ray
from ray.exceptions import RayActorError, RayTaskError

from edgewise.cluster.model import Cluster
from edgewise.cluster.schema import cluster_from_dict
from edgewise.errors import EdgewiseError
from edgewise.runtime import vessel as vessels
from edgewise.runtime import vessel_pool
from edgewise.runtime.faults import FaultInjector
from edgewise.runtime.probe import ProbeActor
from edgewise.runtime.ray_cluster import RayRuntime, memory_resource, start_local
from edgewise.runtime.vessel import HostedMember, Vessel
from edgewise.runtime.vessel_pool import (
    pool_size,
    release_members,
    reservations,
    spawn_member,
)


class Sleeper:
    """A member whose calls take as long as asked (for the busy-vessel case)."""

    def __init__(self, label: str) -> None:
        self.label = label

    def nap(self, seconds: float) -> str:
        time.sleep(seconds)
        return self.label


def _plain_vessel() -> object:
    return Vessel.__ray_actor_class__()


def test_a_call_waits_for_its_member_and_a_failed_constructor_is_raised_by_every_call() -> None:
    v = _plain_vessel()
    done: list[str] = []
    t = threading.Thread(target=lambda: done.append(v.call("t1", "nap", 0.0)))  # type: ignore[attr-defined]
    t.start()
    time.sleep(0.1)
    assert done == []  # no member for t1 yet: the call waits, as an actor's first call would
    v.become("t1", (__name__, "Sleeper"), ("a",), {})  # type: ignore[attr-defined]
    t.join(5)
    assert done == ["a"]
    assert v.release("t1") is True  # type: ignore[attr-defined]

    with pytest.raises(TypeError):
        v.become("t2", (__name__, "Sleeper"), (), {})  # type: ignore[attr-defined]
    for _ in range(2):
        with pytest.raises(TypeError):
            v.call("t2", "nap", 0.0)  # type: ignore[attr-defined]


class Stoppable(Sleeper):
    stopped: ClassVar[list[str]] = []

    def stop(self) -> None:
        Stoppable.stopped.append(self.label)


def test_a_member_released_before_its_build_ran_is_never_installed() -> None:
    """A threaded actor may run a run's ``release`` before its ``become`` (its run failed at
    once): the late build is stopped and dropped, and its calls fail."""
    v = _plain_vessel()
    Stoppable.stopped.clear()
    assert v.release("t1") is True  # type: ignore[attr-defined]
    v.become("t1", (__name__, "Stoppable"), ("late",), {})  # type: ignore[attr-defined]
    assert Stoppable.stopped == ["late"]
    with pytest.raises(RuntimeError, match="has ended"):
        v.call("t1", "nap", 0.0)  # type: ignore[attr-defined]
    v.become("t2", (__name__, "Stoppable"), ("next",), {})  # type: ignore[attr-defined]
    assert v.call("t2", "nap", 0.0) == "next"  # type: ignore[attr-defined]


class _Cyclic:
    """A member's argument in a reference cycle, as a graph module and its graph are."""

    def __init__(self) -> None:
        self.me = self


def test_a_released_members_arguments_are_collected_even_when_its_import_was_new(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A member whose class's module the vessel had not imported yet: its arguments,
    alive while it is built, must not be frozen out of the garbage collector with the
    modules (the first pipeline stage a vessel hosted kept its model for good)."""
    (tmp_path / "ew_fresh_member.py").write_text(
        "class Holder:\n    def __init__(self, model):\n        self.model = model\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    v = _plain_vessel()
    model = _Cyclic()
    alive = weakref.ref(model)
    try:
        v.become("t1", ("ew_fresh_member", "Holder"), (model,), {})  # type: ignore[attr-defined]
        del model
        assert v.release("t1") is True  # type: ignore[attr-defined]
        assert alive() is None
        assert gc.get_freeze_count() > 0  # the modules were frozen at the release
    finally:
        gc.unfreeze()


def test_a_vessel_with_a_call_still_running_is_not_clean() -> None:
    v = _plain_vessel()
    v.become("t1", (__name__, "Sleeper"), ("a",), {})  # type: ignore[attr-defined]
    t = threading.Thread(target=v.call, args=("t1", "nap", 1.0))  # type: ignore[attr-defined]
    t.start()
    time.sleep(0.1)
    assert v.release("t1", grace_s=0.1) is False  # type: ignore[attr-defined]
    t.join(5)
    v.become("t2", (__name__, "Sleeper"), ("b",), {})  # type: ignore[attr-defined]
    assert v.release("t2", grace_s=0.1) is True  # type: ignore[attr-defined]


class Overlap:
    """A member that records how many of its calls ran at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.running = 0
        self.most = 0

    def nap(self, seconds: float) -> int:
        with self._lock:
            self.running += 1
            self.most = max(self.most, self.running)
        time.sleep(seconds)
        with self._lock:
            self.running -= 1
        return self.most


def _most_at_once(v: Any, token: str, calls: int) -> int:
    threads = [threading.Thread(target=v.call, args=(token, "nap", 0.3)) for _ in range(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    return int(v.call(token, "nap", 0.0))


@pytest.mark.parametrize(("concurrency", "grouped", "most"), [
    (1, (), 1),  # a member declared with one thread runs one call at a time
    (2, (), 2),
    (1, ("nap",), 3),  # a method of a concurrency group: Ray limits it, the vessel does not
    (None, (), 3),
])
def test_a_vessel_keeps_its_members_own_concurrency(
        concurrency: int | None, grouped: tuple[str, ...], most: int) -> None:
    """A vessel has threads enough for any member (``VESSEL_CONCURRENCY``); the member's own
    limit is kept around its calls, so members of different concurrency share vessels."""
    v = _plain_vessel()
    v.become("t1", (__name__, "Overlap"), (), {}, concurrency, grouped)  # type: ignore[attr-defined]
    assert _most_at_once(v, "t1", 3) == most


@pytest.fixture(scope="module")
def runtime(small_cluster: Cluster) -> Iterator[RayRuntime]:
    rt = start_local(small_cluster)
    yield rt
    rt.shutdown()


def _pid(member: HostedMember) -> int:
    return int(ray.get(member.vessel.pid.remote()))


def _spawn(runtime: RayRuntime, device: str, name: str, label: str = "", *,
           bound: bool = False, memory_mb: int = 64,
           concurrency: int | None = None) -> HostedMember:
    """A probe member on ``device``: held apart from its vessel, as a run's member is on an
    emulating instance, or (``bound``) in a vessel that holds the device's reservation
    itself, as on a testbed, where each device is a node of its own."""
    options = (runtime.actor_options(device, memory_mb, name) if bound
               else runtime.member_options(device, memory_mb, name))
    if concurrency is not None:
        options = {**options, "max_concurrency": concurrency}
    member = spawn_member(ProbeActor, options, label or device)
    assert isinstance(member, HostedMember)
    return member


def _free_mb(runtime: RayRuntime, device: str) -> float:
    return float(ray.available_resources().get(  # type: ignore[no-untyped-call]
        memory_resource(device, runtime.tag_of(device)), 0.0))


def _settles(read: Any, expected: float, within_s: float = 30.0) -> bool:
    """Whether ``read()`` comes to ``expected`` within ``within_s`` (Ray's view of free
    resources follows a placement group's removal a moment later)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if read() == expected:
            return True
        time.sleep(0.1)
    return read() == expected


def _steady(read: Any, within_s: float = 30.0) -> float:
    """``read()`` once two reads a second apart agree (at most ``within_s``): a member that
    an earlier test released frees its reservation a moment later, and a figure read before
    that is no baseline (a fresh clone's run of 2026-12-06 never came back to one)."""
    deadline, last = time.monotonic() + within_s, read()
    while time.monotonic() < deadline:
        time.sleep(1.0)
        now = read()
        if now == last:
            return float(now)
        last = now
    return float(last)


def _dies(member: Any, within_s: float = 60.0) -> bool:
    """Whether the member's process dies within ``within_s``: a hosted member's vessel, else
    the actor itself. ``ray.kill`` is asynchronous: a call sent just after it may still be
    answered, by a released member's vessel with "has ended" (a suite run's flake, 2026-12-01),
    so calls are retried until one fails as a dead actor's."""
    process = member.vessel.pid if isinstance(member, HostedMember) else member.ready
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            ray.get(process.remote(), timeout=within_s)
        except RayActorError:
            return True
        time.sleep(0.2)
    return False


@pytest.mark.ray
def test_on_a_testbed_the_next_member_on_a_device_reuses_its_process(runtime: RayRuntime) -> None:
    first = _spawn(runtime, "nano-0", "probe-a-nano-0", "first", bound=True)
    assert ray.get(first.ready.remote()) == "first"
    pid = _pid(first)
    release_members([first])
    assert pool_size() >= 1

    second = _spawn(runtime, "nano-0", "probe-b-nano-0", "second", bound=True)
    assert _pid(second) == pid  # the same process, with a member built anew
    assert ray.get(second.ready.remote()) == "second"
    with pytest.raises(RayTaskError):  # the first member's handle reaches nothing any more
        ray.get(first.ready.remote(), timeout=60)
    other = _spawn(runtime, "nano-1", "probe-c-nano-1", bound=True)  # another device's node
    assert _pid(other) != pid
    release_members([second, other])


@pytest.mark.ray
def test_emulated_members_of_any_device_and_cluster_reuse_an_idle_process(
        runtime: RayRuntime) -> None:
    first = _spawn(runtime, "nano-0", "probe-f-nano-0", "first")
    pid = _pid(first)
    release_members([first])

    second = _spawn(runtime, "nano-1", "probe-g-nano-1", "second")  # another device
    assert _pid(second) == pid
    assert ray.get(second.ready.remote()) == "second"
    release_members([second])
    other = start_local(cluster_from_dict({"name": "test-vessel-other", "devices": [
        {"name": "orin", "type": "jetson-orin-nano"}]}, source="test"))
    try:
        third = _spawn(other, "orin", "probe-h-orin", "third")  # another cluster
        assert _pid(third) == pid
        assert ray.get(third.ready.remote()) == "third"
        release_members([third])
    finally:
        other.shutdown()


@pytest.mark.ray
def test_members_of_different_concurrency_reuse_one_process(runtime: RayRuntime) -> None:
    """A member declared with two threads, then one with 32 (a worker, then a parameter
    server): the second reuses the first's process (the vessel keeps each one's limit, as
    the test above shows)."""
    whole = {d: _free_mb(runtime, d) for d in ("nano-0", "nano-1")}
    first = _spawn(runtime, "nano-0", "probe-m-nano-0", "two", concurrency=2)
    assert ray.get(first.ready.remote(), timeout=60) == "two"
    pid = _pid(first)
    release_members([first])
    second = _spawn(runtime, "nano-1", "probe-n-nano-1", "many", concurrency=32)
    assert _pid(second) == pid
    assert ray.get(second.ready.remote(), timeout=60) == "many"
    release_members([second])
    assert all(_settles(lambda d=d: _free_mb(runtime, d), mb) for d, mb in whole.items())


@pytest.mark.ray
def test_a_members_reservation_is_rays_while_it_lives_and_free_once_it_ends(
        runtime: RayRuntime) -> None:
    whole = _steady(lambda: _free_mb(runtime, "nano-0"))
    live = _spawn(runtime, "nano-0", "probe-i-nano-0", memory_mb=1024)
    assert ray.get(live.ready.remote()) == "nano-0"
    assert _free_mb(runtime, "nano-0") == whole - 1024
    assert reservations() >= 1
    release_members([live])
    assert _settles(lambda: _free_mb(runtime, "nano-0") >= whole, True)

    victim = _spawn(runtime, "nano-0", "worker-vessel-9-nano-0", memory_mb=1024)
    FaultInjector().kill(victim.name)
    assert _dies(victim)
    assert _free_mb(runtime, "nano-0") == whole - 1024  # a dead member's until its run ends it
    release_members([victim])
    assert _settles(lambda: _free_mb(runtime, "nano-0") >= whole, True)


@pytest.mark.ray
def test_a_member_that_does_not_fit_its_device_fails_naming_it(
        runtime: RayRuntime, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vessel_pool, "RESERVE_WAIT_S", 2.0)
    before, idle = reservations(), pool_size()
    too_much = runtime.cluster.device("nano-2").memory_mb + 1
    with pytest.raises(EdgewiseError, match=rf"probe-j-nano-2: no room on nano-2 after 2 s "
                                            rf"for {too_much} MB of its memory"):
        _spawn(runtime, "nano-2", "probe-j-nano-2", memory_mb=too_much)
    assert reservations() == before  # nothing held for it
    assert pool_size() >= idle  # nor an idle process lost


@pytest.mark.ray
def test_a_killed_member_dies_alone_and_its_process_is_not_reused(runtime: RayRuntime) -> None:
    victim = _spawn(runtime, "nano-2", "worker-vessel-0-nano-2")
    bystander = _spawn(runtime, "nano-2", "worker-vessel-1-nano-2")
    assert ray.get([victim.ready.remote(), bystander.ready.remote()]) == ["nano-2"] * 2
    injector = FaultInjector()
    assert {victim.name, bystander.name} <= set(injector.actors("worker-vessel-"))
    assert not [n for n in injector.actors() if n.startswith(vessels.VESSEL_PREFIX)]

    injector.kill(victim.name)
    assert _dies(victim)
    assert ray.get(bystander.ready.remote()) == "nano-2"
    release_members([victim])  # the dead process does not go back to the pool
    assert victim.name not in injector.actors("worker-vessel-")
    fresh = _spawn(runtime, "nano-2", "worker-vessel-2-nano-2")
    assert ray.get(fresh.ready.remote()) == "nano-2"
    assert _pid(fresh) != _pid(bystander)
    release_members([bystander, fresh])


@pytest.mark.ray
def test_another_actor_on_the_device_ends_its_idle_processes(runtime: RayRuntime) -> None:
    member = _spawn(runtime, "pi5", "probe-d-pi5", bound=True)
    release_members([member])
    before = pool_size()
    assert before >= 1
    runtime.actor_options("pi5", 64)  # what any other actor's start on pi5 asks first:
    assert pool_size() == before  # the memory it asks for is free beside the idle vessel
    whole = runtime.cluster.device("pi5").memory_mb
    runtime.actor_options("pi5", whole)  # all of the device's memory: the idle vessel goes
    assert pool_size() < before
    assert _dies(member)  # its process is gone, and with it the reservation it held


@pytest.mark.ray
def test_with_the_pool_off_a_member_is_an_actor_of_its_own(
        runtime: RayRuntime, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDGEWISE_VESSELS", "0")
    handle = spawn_member(ProbeActor, runtime.member_options("nano-1", 64, "probe-e-nano-1"),
                          "nano-1")
    assert not isinstance(handle, HostedMember)
    assert ray.get(handle.ready.remote()) == "nano-1"
    release_members([handle])
    assert _dies(handle)


@pytest.mark.ray
def test_an_interruption_names_every_member_whose_process_died(runtime: RayRuntime) -> None:
    """An attempt stops at its first sign of a loss, which on a loaded host may be another
    member's silence before a killed member's: every member whose process is gone is named
    (and so struck), the living are not (a served manager's fault test struck another
    device than the one whose worker it killed, 2026-12-01)."""
    from types import SimpleNamespace

    from edgewise.runtime.launch import with_the_dead

    killed = _spawn(runtime, "nano-1", "worker-dead-0-nano-1")
    living = _spawn(runtime, "nano-2", "worker-dead-0-nano-2")
    ps = _spawn(runtime, "pi5", "ps-dead-0")
    assert ray.get([killed.ready.remote(), living.ready.remote(), ps.ready.remote()])
    FaultInjector().kill(killed.name)
    assert _dies(killed)
    run = SimpleNamespace(
        workers={"nano-1": killed, "nano-2": living}, ps=ps, ps_name=ps.name,
        servers=[("pi5", ps.name, ps)],
        names={"nano-1": killed.name, "nano-2": living.name},
        plan=SimpleNamespace(ps_device="pi5"),
        lost_reason=lambda device, otherwise, timeout_s=0.0: otherwise)
    first = [("nano-2", living.name, "no heartbeat for 0.8 s")]  # silent, not dead

    lost = with_the_dead(run, first)  # type: ignore[arg-type]

    assert lost == [*first, ("nano-1", killed.name, "its process died")]
    release_members([killed, living, ps])
