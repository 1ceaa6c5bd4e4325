"""Stress points and the stress-ng stressor: it really loads the CPU and really stops."""

from __future__ import annotations

import os
import time

import psutil
import pytest
from tests.needs import require_tool

from edgewise.errors import EdgewiseError
from edgewise.perf import stress
from edgewise.perf.stress import Stressor, StressPoint, default_memory_levels_mb, stress_grid


@pytest.fixture
def _stress_ng() -> None:
    require_tool("stress-ng", "make system-deps, or apt-get install stress-ng")


needs_stress_ng = pytest.mark.usefixtures("_stress_ng")


def test_grid_is_the_product_with_cpu_varying_slowest() -> None:
    grid = stress_grid((0, 50), (0, 256, 512), (0, 1))
    assert len(grid) == 12 and len(set(grid)) == 12
    assert grid[0] == StressPoint(0, 0, 0) and grid[1] == StressPoint(0, 0, 1)
    assert grid[-1] == StressPoint(50, 512, 1)
    assert grid[0].idle and not grid[-1].idle
    assert grid[-1].key == "cpu=50/mem=512/io=1"


def test_default_memory_levels_are_bounded_multiples_of_64() -> None:
    levels = default_memory_levels_mb()
    assert levels[0] == 0 and all(m % 64 == 0 and m <= 4096 for m in levels)
    assert list(levels) == sorted(levels)


def test_missing_stress_ng_is_a_clear_user_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stress.shutil, "which", lambda name: None)
    with pytest.raises(EdgewiseError, match="sudo apt-get install stress-ng"):
        Stressor(cpu_percent=50).start()
    Stressor().start().stop()  # an all-zero stressor needs no stress-ng


@pytest.mark.parametrize("kwargs", [{"cpu_percent": 101}, {"memory_mb": -1},
                                    {"io_workers": -2}, {"timeout_s": 0}])
def test_invalid_stress_is_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(EdgewiseError):
        Stressor(**kwargs)  # type: ignore[arg-type]


@needs_stress_ng
def test_command_line_is_bounded_and_complete() -> None:
    cmd = Stressor(cpu_percent=40, memory_mb=128, io_workers=1, cpu_workers=2,
                   timeout_s=30).command()
    line = " ".join(cmd)
    assert "--timeout 30s" in line and "--cpu 2 --cpu-load 40" in line
    assert "--vm 1 --vm-bytes 128M --vm-hang 0" in line and "--hdd 1" in line


def _tree_cpu_s(pid: int) -> float:
    """CPU seconds used so far by the children of ``pid`` (stress-ng's workers)."""
    total = 0.0
    for child in psutil.Process(pid).children(recursive=True):
        try:
            times = child.cpu_times()
            total += times.user + times.system
        except psutil.NoSuchProcess:
            pass
    return total


@needs_stress_ng
def test_stressor_loads_the_cpu_and_stops_cleanly() -> None:
    # the machine may be busy with other work: measure the stressor's own CPU use
    with Stressor(cpu_percent=100, cpu_workers=2, timeout_s=120) as stressor:
        assert stressor.running and stressor.proc is not None
        pgid = stressor.proc.pid
        deadline = time.monotonic() + 60  # its two workers forked (a loaded host is slower)
        while len(psutil.Process(pgid).children(recursive=True)) < 2:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        used = _tree_cpu_s(pgid)
        psutil.cpu_percent(interval=None)
        time.sleep(0.7)
        system = psutil.cpu_percent(interval=None)
        # The workers burn CPU (a stressor that does not run burns none). Their share of a
        # loaded host is no bound: in 0.7 s they used two cores idle, but 0.04 to 0.19 of a
        # core on 2 cores at load average 13 to 16. So wait for 0.2 CPU-seconds: 0.1 s
        # idle, at most 5.4 s at those loads; 60 s is over 5x that.
        deadline = time.monotonic() + 60
        while _tree_cpu_s(pgid) - used < 0.2:
            assert time.monotonic() < deadline, "the stressor's workers burn no CPU"
            time.sleep(0.05)
    assert system > 40.0, system  # psutil sees the load (more of it on a loaded host)
    assert not stressor.running
    # nothing of its process group is left (generous: a loaded host is slower to end them)
    deadline = time.monotonic() + 60
    while True:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            break
        assert time.monotonic() < deadline, "the stressor's process group outlived its stop"
        time.sleep(0.05)
