"""Stress points and a stress-ng stressor (Deep-Edge §IV-B1): CPU, memory and disk-I/O load."""

from __future__ import annotations

import itertools
import math
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass

import psutil

from edgewise.errors import EdgewiseError
from edgewise.perf.limits import cgroup_device

__all__ = ["StressPoint", "Stressor", "default_memory_levels_mb", "stress_grid",
           "stress_ng_path"]


@dataclass(frozen=True, slots=True)
class StressPoint:
    """One stress point: CPU load on every core (%), memory held (MB), disk-I/O workers."""

    cpu_percent: int = 0
    memory_mb: int = 0
    io_workers: int = 0

    @property
    def key(self) -> str:
        return f"cpu={self.cpu_percent}/mem={self.memory_mb}/io={self.io_workers}"

    @property
    def idle(self) -> bool:
        return not (self.cpu_percent or self.memory_mb or self.io_workers)


def stress_grid(cpu_percents: Iterable[int] = (0, 30, 60, 90),
                memory_mb: Iterable[int] | None = None,
                io_workers: Iterable[int] = (0,)) -> list[StressPoint]:
    """Every combination of the levels, CPU varying slowest (the profile's stress points).
    ``memory_mb`` defaults to :func:`default_memory_levels_mb`."""
    mem = default_memory_levels_mb() if memory_mb is None else tuple(memory_mb)
    return [StressPoint(c, m, i) for c, m, i in itertools.product(cpu_percents, mem, io_workers)]


def default_memory_levels_mb(fractions: Iterable[float] = (0.0, 0.1, 0.25),
                             cap_mb: int = 4096) -> tuple[int, ...]:
    """Memory levels as fractions of the memory available now, capped and rounded to 64 MB
    (so that the grid fits a 4 GB Jetson Nano as well as a workstation)."""
    available = psutil.virtual_memory().available / 2**20
    device = cgroup_device()
    if device is not None:
        limit = min(device.memory_limit_bytes, psutil.virtual_memory().total)
        available = min(available, (limit - device.memory_used_bytes()) / 2**20)
    return tuple(int(min(f * available, cap_mb)) // 64 * 64 for f in fractions)


def stress_ng_path() -> str:
    """The stress-ng executable, or an EdgewiseError saying how to install it."""
    path = shutil.which("stress-ng")
    if path is None:
        raise EdgewiseError("stress-ng is not installed; install it with "
                            "'sudo apt-get install stress-ng'")
    return path


class Stressor:
    """stress-ng with ``cpu_percent`` load on ``cpu_workers`` workers (default: every core;
    in a cgroup with a CPU quota of ``q`` cores, ``ceil(q)`` workers loading the quota to
    ``cpu_percent``, since the quota is the device's CPU),
    ``memory_mb`` allocated once and held (``--vm-hang 0``: memory pressure without CPU load)
    and ``io_workers`` disk writers (``--hdd``, 64 MB each, in the temp dir). It runs in its own
    process group, is always bounded by ``timeout_s`` and is stopped by :meth:`stop` or on
    leaving the ``with`` block. An all-zero stressor starts nothing.
    """

    def __init__(self, cpu_percent: int = 0, memory_mb: int = 0, io_workers: int = 0,
                 cpu_workers: int | None = None, timeout_s: float = 600.0) -> None:
        if not 0 <= cpu_percent <= 100:
            raise EdgewiseError(f"cpu_percent must be in 0..100, got {cpu_percent}")
        if memory_mb < 0 or io_workers < 0 or timeout_s <= 0:
            raise EdgewiseError("memory_mb and io_workers must be >= 0, timeout_s > 0")
        self.point = StressPoint(cpu_percent, memory_mb, io_workers)
        self.cpu_workers, self.cpu_load = cpu_workers or os.cpu_count() or 1, cpu_percent
        device = cgroup_device() if cpu_workers is None else None
        if device is not None and cpu_percent:
            self.cpu_workers = max(1, math.ceil(device.quota_cores - 1e-6))
            share = cpu_percent * device.quota_cores / self.cpu_workers
            self.cpu_load = max(1, min(100, round(share)))
        self.timeout_s = timeout_s
        self.proc: subprocess.Popen[bytes] | None = None

    @classmethod
    def at(cls, point: StressPoint, timeout_s: float = 600.0) -> Stressor:
        return cls(point.cpu_percent, point.memory_mb, point.io_workers, timeout_s=timeout_s)

    def command(self) -> list[str]:
        """The stress-ng command line."""
        p = self.point
        cmd = [stress_ng_path(), "--timeout", f"{max(1, round(self.timeout_s))}s", "--quiet",
               "--temp-path", tempfile.gettempdir()]
        if p.cpu_percent:
            cmd += ["--cpu", str(self.cpu_workers), "--cpu-load", str(self.cpu_load)]
        if p.memory_mb:
            cmd += ["--vm", "1", "--vm-bytes", f"{p.memory_mb}M", "--vm-hang", "0"]
        if p.io_workers:
            cmd += ["--hdd", str(p.io_workers), "--hdd-bytes", "64M"]
        return cmd

    def start(self) -> Stressor:
        """Start stress-ng; raises if it exits at once (bad option, no memory)."""
        if self.point.idle or self.proc is not None:
            return self
        self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     start_new_session=True)
        time.sleep(0.1)
        if self.proc.poll() is not None:
            message = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
            self.proc = None
            raise EdgewiseError(f"stress-ng failed to start: {message.strip() or 'no output'}")
        return self

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, grace_s: float = 5.0) -> None:
        """SIGTERM the stressor's process group, SIGKILL it after ``grace_s``, reap it."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 2.0)):
            try:
                os.killpg(proc.pid, sig)  # the group led by our own child: its pid
            except ProcessLookupError:
                break
            try:
                proc.wait(wait_s)
                break
            except subprocess.TimeoutExpired:
                continue
        if proc.stderr:
            proc.stderr.close()

    def __enter__(self) -> Stressor:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
