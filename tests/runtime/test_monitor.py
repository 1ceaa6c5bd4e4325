"""The health monitor's long poll, on the shared Ray instance: a run's driver learns of its
dead members as soon as they are dead, and of nobody else's."""

from __future__ import annotations

import time

import pytest
import ray

from edgewise.runtime.monitor import HealthMonitor

pytestmark = pytest.mark.ray


def test_the_long_poll_returns_a_silent_member_of_the_run_and_no_other() -> None:
    monitor = HealthMonitor.remote(0.2)  # type: ignore[attr-defined]
    try:
        ray.get(monitor.register.remote("other-run-worker", "worker", "nano-9"))
        ray.get(monitor.register.remote("agent-nano-0", "agent", "nano-0", 60.0))
        ray.get(monitor.beat.remote("agent-nano-0", "nano-0"))
        # silent past 0.3 s already, but not this run's: the poll waits out its time
        assert ray.get(monitor.wait_dead.remote(["run-worker"], ["nano-0"], 0.5),
                       timeout=60) == []
        ray.get(monitor.register.remote("run-worker", "worker", "nano-0"))
        started = time.monotonic()
        dead = ray.get(monitor.wait_dead.remote(["run-worker"], ["nano-0"], 30.0),
                       timeout=60)
        assert [(name, device) for name, _, device, _ in dead] == [("run-worker", "nano-0")]
        assert dead[0][3] > 0.3  # silent for more than 1.5 periods when it was returned
        assert time.monotonic() - started < 25.0  # answered at the death, not the timeout
    finally:
        ray.kill(monitor)


def test_the_long_poll_reports_a_silent_agent_of_the_runs_devices() -> None:
    monitor = HealthMonitor.remote(0.2)  # type: ignore[attr-defined]
    try:
        ray.get(monitor.register.remote("agent-nano-1", "agent", "nano-1"))
        dead = ray.get(monitor.wait_dead.remote([], ["nano-1"], 30.0), timeout=60)
        assert [(name, kind) for name, kind, _, _ in dead] == [("agent-nano-1", "agent")]
    finally:
        ray.kill(monitor)
