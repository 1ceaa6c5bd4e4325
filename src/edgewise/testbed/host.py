"""This host as a testbed: what it is missing, its cores, memory and measured speed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from edgewise.cluster.catalog import speed_from_gflops
from edgewise.errors import EdgewiseError
from edgewise.testbed.plan import HostFacts

__all__ = ["DRIVER_RESERVE_CORES", "TestbedError", "TestbedUnavailable", "host_facts",
           "matmul_gflops", "missing", "ray_binary", "require"]

DRIVER_RESERVE_CORES = 0.5  # left to the driver, the kernel and the shapers


class TestbedError(EdgewiseError):
    """A testbed operation failed (a command of ip, tc or ray, or a cgroup write)."""


class TestbedUnavailable(TestbedError):
    """This host cannot run a testbed: no root, or no ip, tc, netns or cgroups."""


def ray_binary() -> str | None:
    """The ``ray`` command of this Python environment (else the one on PATH)."""
    beside = Path(sys.executable).parent / "ray"
    return str(beside) if beside.exists() else shutil.which("ray")


def _tc_has_htb() -> bool:
    """Whether ``tc`` knows the htb qdisc (asked of tc itself; nothing is made)."""
    try:
        done = subprocess.run(["tc", "qdisc", "add", "htb", "help"], capture_output=True,
                              text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "Usage" in done.stdout + done.stderr


def missing() -> list[str]:
    """What this host lacks for a testbed, in words (empty: nothing)."""
    from edgewise.testbed.cgroups import detect

    lacks: list[str] = []
    if os.geteuid() != 0:
        lacks.append("root (run as root: namespaces, cgroups and tc need it)")
    for tool, package in (("ip", "iproute2"), ("tc", "iproute2"), ("nsenter", "util-linux")):
        if shutil.which(tool) is None:
            lacks.append(f"the `{tool}` command ({package})")
    if shutil.which("tc") is not None and not _tc_has_htb():
        lacks.append("the tc htb qdisc")
    if not Path("/proc/self/ns/net").exists():
        lacks.append("network namespaces (kernel without CONFIG_NET_NS)")
    if detect() is None:
        lacks.append("cgroups with cpu and memory controllers (v1 cpu+memory+freezer, "
                     "or v2 cpu+memory)")
    if ray_binary() is None:
        lacks.append("the `ray` command")
    return lacks


def require() -> None:
    """Raise TestbedUnavailable naming everything this host lacks for a testbed."""
    lacks = missing()
    if lacks:
        raise TestbedUnavailable("this host cannot run a testbed: it lacks " + "; ".join(lacks))


def matmul_gflops(size: int = 384, cpu_seconds: float = 0.3, repeats: int = 3) -> float:
    """Best-of-``repeats`` FP32 matrix-multiply GFLOPS of ONE host core, per second of
    this thread's CPU time (so that other load on the host does not lower it)."""
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    best = 0.0
    with threadpool_limits(1):
        for _ in range(repeats):
            count, t0 = 0, time.thread_time()
            while time.thread_time() - t0 < cpu_seconds:
                a @ a
                count += 1
            best = max(best, 2 * size**3 * count / (time.thread_time() - t0) / 1e9)
    return best


def _memory_mb() -> int:
    """The host's memory, or less when this process's memory cgroup is limited."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        parts = line.split(":", 2)
        for base in (f"/sys/fs/cgroup/memory{parts[2]}/memory.limit_in_bytes",
                     f"/sys/fs/cgroup{parts[2]}/memory.max"):
            try:
                text = Path(base).read_text().strip()
            except OSError:
                continue
            if text.isdigit():
                total = min(total, int(text) // 2**20)
    return int(total)


def host_facts(speed: float | None = None, cpu_budget_cores: float | None = None) -> HostFacts:
    """This host: cores, memory, one core's speed on the catalog's scale (measured by
    :func:`matmul_gflops` and the catalog's GFLOPS power law unless given) and the CPU
    budget of the devices (all cores but :data:`DRIVER_RESERVE_CORES` unless given)."""
    cores = len(os.sched_getaffinity(0))
    budget = cpu_budget_cores if cpu_budget_cores is not None else max(
        DRIVER_RESERVE_CORES, cores - DRIVER_RESERVE_CORES)
    measured = speed if speed is not None else speed_from_gflops(matmul_gflops())
    return HostFacts(cores, _memory_mb(), round(measured, 4), budget)
