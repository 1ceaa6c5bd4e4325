"""The one Throttle: its arithmetic on an injected clock, and one real CPU-bound step."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from edgewise.errors import ConfigError
from edgewise.runtime.emulation import emulated_compute
from edgewise.runtime.throttle import Throttle


class FakeHost:
    """A thread-CPU clock and a wall clock that move only when the test says so; ``sleep``
    advances the wall clock and records the request."""

    def __init__(self) -> None:
        self.cpu_s, self.wall_s, self.slept = 0.0, 100.0, []

    def cpu(self) -> float:
        return self.cpu_s

    def wall(self) -> float:
        return self.wall_s

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.wall_s += seconds

    def compute(self, cpu_s: float, wall_s: float) -> None:
        self.cpu_s += cpu_s
        self.wall_s += wall_s

    def throttle(self, factor: float) -> Throttle:
        return Throttle(factor, cpu=self.cpu, wall=self.wall, sleep=self.sleep)


@given(factor=st.floats(1.0, 50.0), cpu_s=st.floats(0.001, 5.0), overlap=st.floats(1.0, 3.0))
def test_a_step_lasts_factor_times_its_cpu_time(factor: float, cpu_s: float,
                                                overlap: float) -> None:
    host = FakeHost()
    throttle = host.throttle(factor)

    with throttle.step():
        host.compute(cpu_s, wall_s=min(cpu_s * overlap, cpu_s * factor))

    assert host.wall_s - 100.0 == pytest.approx(cpu_s * factor)


def test_a_step_already_slower_than_its_target_sleeps_not_at_all() -> None:
    host = FakeHost()  # a loaded host: 0.1 s of CPU took 1 s of wall time

    with host.throttle(3.0).step():
        host.compute(0.1, wall_s=1.0)

    assert host.slept == []


def test_factor_one_adds_no_sleep_to_a_cpu_bound_step() -> None:
    host = FakeHost()

    with host.throttle(1.0).step():
        host.compute(0.5, wall_s=0.5)

    assert host.slept == []


def test_waiting_uses_no_cpu_and_is_not_stretched() -> None:
    host = FakeHost()

    with host.throttle(10.0).step():
        host.compute(0.0, wall_s=0.03)

    assert host.slept == []


def test_pace_takes_a_factor_per_step_and_returns_each_step_s_wall_time() -> None:
    host = FakeHost()
    throttle = host.throttle(2.0)

    host.compute(0.1, 0.1)
    first = throttle.pace()  # 0.2 s at factor 2
    host.compute(0.1, 0.1)
    second = throttle.pace(4.0)  # the share halved: 0.4 s

    assert (first, second) == pytest.approx((0.2, 0.4))


def test_mark_leaves_earlier_work_unpaced() -> None:
    host = FakeHost()
    throttle = host.throttle(5.0)

    host.compute(1.0, 1.0)  # host work (copying weights out), not the device's compute
    throttle.mark()
    host.compute(0.1, 0.1)

    assert throttle.pace() == pytest.approx(0.5)


@pytest.mark.parametrize("factor", [-1.0, float("nan")])
def test_a_negative_or_nan_factor_is_refused(factor: float) -> None:
    with pytest.raises(ConfigError) as info:
        Throttle(factor)

    assert info.value.field == "factor"


def _busy(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_real_cpu_bound_step_is_stretched_at_least_to_its_target() -> None:
    # On a loaded host a step may last longer than its target (nothing to sleep), never
    # shorter: the lower bound is what the emulation promises.
    cpu0, wall0 = time.thread_time(), time.perf_counter()

    with emulated_compute(3.0):
        _busy(0.02)

    cpu = time.thread_time() - cpu0
    assert time.perf_counter() - wall0 >= 3.0 * cpu * 0.95


@pytest.mark.parametrize("share", [1.0, 0.5, 0.25])
def test_a_share_costs_the_same_device_seconds_in_more_wall_time(share: float) -> None:
    """How a co-located retraining counts its cost (runtime/colocated.py: each step's wall
    seconds at stretch ÷ share, times the share): a quarter of the device takes four times
    the wall time for the same device-seconds, so profiled costs do not depend on the share
    they were measured at (Ekya §4.3)."""
    host = FakeHost()
    throttle = host.throttle(1.0)
    stretch = 3.0
    device_s = wall_s = 0.0
    for _ in range(5):
        host.compute(0.02, 0.02)
        step = throttle.pace(stretch / share)
        wall_s += step
        device_s += step * share
    assert device_s == pytest.approx(5 * 0.02 * stretch)
    assert wall_s == pytest.approx(5 * 0.02 * stretch / share)


@pytest.mark.parametrize("stretch", [1.0, 0.5])
def test_a_stretch_of_one_or_less_runs_the_body_unpaced(stretch: float,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """It could never sleep (CPU time never exceeds wall time), so it reads no clock: the
    testbed's members run at stretch 1 and the server wraps every push's step in it."""
    from edgewise.runtime import emulation

    def no_throttle(*args: object, **kwargs: object) -> None:
        raise AssertionError("a stretch of at most 1 made a Throttle")

    monkeypatch.setattr(emulation, "Throttle", no_throttle)
    ran = []
    with emulated_compute(stretch):
        ran.append(True)
    assert ran == [True]
    with pytest.raises(AssertionError, match="made a Throttle"), emulated_compute(1.5):
        pass
