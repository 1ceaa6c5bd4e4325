"""What this process's machine is: the host, or the device a cgroup holds it to (a container's
or a testbed node's CPU quota and memory limit), as container-aware tools see it.

A process in a cgroup with a CPU quota runs on a device of ``quota`` cores: its CPU use is
measured against the quota, its memory against the cgroup's limit, and a stressor loads the
quota rather than the host's cores. Anywhere else (no quota) the host is the machine.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CgroupDevice", "CpuMeter", "MemoryKills", "MemoryPeak", "cgroup_device",
           "memory_kills", "memory_peak", "process_peak_bytes", "reset_memory_peaks",
           "usable_cores"]

_UNLIMITED_BYTES = 2**60


@dataclass(frozen=True, slots=True)
class CgroupDevice:
    """The cgroup that holds this process to a device: its CPU quota (cores), its memory
    limit (bytes) and where to read what it uses."""

    quota_cores: float
    memory_limit_bytes: int
    cpu_usage_file: Path  # cpuacct.usage (ns) or cpu.stat (usage_usec)
    memory_usage_file: Path  # memory.usage_in_bytes or memory.current
    memory_stat_file: Path  # memory.stat (inactive file pages are reclaimable)

    def cpu_seconds(self) -> float:
        """CPU time every process of the cgroup used so far."""
        text = self.cpu_usage_file.read_text()
        if self.cpu_usage_file.name == "cpu.stat":
            usec = next(ln.split()[1] for ln in text.splitlines() if ln.startswith("usage_usec"))
            return int(usec) / 1e6
        return int(text) / 1e9

    def memory_used_bytes(self) -> int:
        """Memory the cgroup uses, less inactive file pages (as ``docker stats`` counts)."""
        used = int(self.memory_usage_file.read_text())
        inactive = 0
        for line in self.memory_stat_file.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key in ("total_inactive_file", "inactive_file"):
                inactive = int(value)
                break
        return max(0, used - inactive)


def _mounts() -> dict[str, Path]:
    """Mount point per v1 controller, and ``"unified"`` for a cgroup2 mount."""
    points: dict[str, Path] = {}
    for line in Path("/proc/self/mounts").read_text().splitlines():
        parts = line.split()
        if len(parts) < 4:
            continue
        if parts[2] == "cgroup2":
            points.setdefault("unified", Path(parts[1]))
        elif parts[2] == "cgroup":
            for option in parts[3].split(","):
                points.setdefault(option, Path(parts[1]))
    return points


def _own_paths() -> dict[str, str]:
    """This process's cgroup path per v1 controller, and ``"unified"`` for v2."""
    paths: dict[str, str] = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else ["unified"]:
            paths[controller] = path
    return paths


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _here(mounts: dict[str, Path], own: dict[str, str], controller: str) -> Path:
    """This process's cgroup directory under ``controller``'s mount (``unified``: v2)."""
    return mounts[controller] / own[controller].lstrip("/")


def _v1(mounts: dict[str, Path], own: dict[str, str]) -> CgroupDevice | None:
    if not {"cpu", "memory"} <= set(own) or not {"cpu", "memory"} <= set(mounts):
        return None
    cpu = _here(mounts, own, "cpu")
    quota, period = _read(cpu / "cpu.cfs_quota_us"), _read(cpu / "cpu.cfs_period_us")
    if quota is None or period is None or int(quota) <= 0:
        return None
    acct = mounts.get("cpuacct", mounts["cpu"]) / own.get("cpuacct", own["cpu"]).lstrip("/")
    memory = _here(mounts, own, "memory")
    limit = int(_read(memory / "memory.limit_in_bytes") or _UNLIMITED_BYTES)
    return CgroupDevice(int(quota) / int(period), limit, acct / "cpuacct.usage",
                        memory / "memory.usage_in_bytes", memory / "memory.stat")


def _v2(mounts: dict[str, Path], own: dict[str, str]) -> CgroupDevice | None:
    if "unified" not in own or "unified" not in mounts:
        return None
    here = _here(mounts, own, "unified")
    quota, _, period = (_read(here / "cpu.max") or "max").partition(" ")
    if quota == "max":
        return None
    limit = _read(here / "memory.max") or "max"
    return CgroupDevice(int(quota) / int(period or 100_000),
                        _UNLIMITED_BYTES if limit == "max" else int(limit),
                        here / "cpu.stat", here / "memory.current", here / "memory.stat")


def cgroup_device() -> CgroupDevice | None:
    """The cgroup that holds this process to a CPU quota, or None (the host is the
    machine). Read afresh each call: a process may be moved between cgroups."""
    try:
        mounts, own = _mounts(), _own_paths()
        return _v1(mounts, own) or _v2(mounts, own)
    except (OSError, ValueError, StopIteration):
        return None


class CpuMeter:
    """CPU utilisation (%) of the device since the previous call, like
    ``psutil.cpu_percent(interval=None)`` but of a cgroup against its quota."""

    def __init__(self, device: CgroupDevice) -> None:
        self.device = device
        self._lock = threading.Lock()
        self._last = (time.monotonic(), device.cpu_seconds())

    def percent(self) -> float:
        with self._lock:
            now, used = time.monotonic(), self.device.cpu_seconds()
            (then, before), self._last = self._last, (now, used)
        if now <= then:
            return 0.0
        return min(100.0, 100.0 * (used - before) / ((now - then) * self.device.quota_cores))


def usable_cores() -> float:
    """The cores this process may use: its cgroup's quota, else the host's cores."""
    device = cgroup_device()
    return device.quota_cores if device is not None else float(os.cpu_count() or 1)


@dataclass(frozen=True, slots=True)
class MemoryKills:
    """How many processes the kernel's OOM killer has ended in this process's memory cgroup
    (at the cgroup's limit, since the cgroup was made), and that limit (None: none below
    the host's memory)."""

    kills: int
    limit_mb: float | None


def oom_kill_count(text: str) -> int | None:
    """The ``oom_kill`` count of a v1 ``memory.oom_control`` or a v2 ``memory.events``
    file (None where the kernel does not count: older than 4.13)."""
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill":
            return int(value)
    return None


@dataclass(frozen=True, slots=True)
class _MemoryDir:
    """This process's memory cgroup directory, v1 (``memory`` controller) or v2."""

    here: Path
    v1: bool

    def file(self, v1_name: str, v2_name: str) -> Path:
        return self.here / (v1_name if self.v1 else v2_name)

    def limit_bytes(self) -> int | None:
        """The cgroup's memory limit, or None where it has none below the host's memory."""
        limit = _read(self.file("memory.limit_in_bytes", "memory.max")) or "max"
        return None if limit == "max" or int(limit) >= _UNLIMITED_BYTES else int(limit)


def _memory_dir() -> _MemoryDir | None:
    mounts, own = _mounts(), _own_paths()
    for controller in ("memory", "unified"):
        if controller in own and controller in mounts:
            return _MemoryDir(_here(mounts, own, controller), controller == "memory")
    return None


def memory_kills() -> MemoryKills | None:
    """The OOM kills of this process's memory cgroup and its limit, or None where they
    cannot be read (no memory controller, or a kernel that does not count). A process
    that runs on a device's node reads the device's (a testbed node's cgroup)."""
    try:
        found = _memory_dir()
        text = _read(found.file("memory.oom_control", "memory.events")) if found else None
        kills = oom_kill_count(text) if text is not None else None
        limit = found.limit_bytes() if found is not None else None
    except (OSError, ValueError):
        return None
    if kills is None:  # no memory controller, or a kernel that does not count
        return None
    return MemoryKills(kills, limit / 2**20 if limit is not None else None)


@dataclass(frozen=True, slots=True)
class MemoryPeak:
    """The high-water mark of this process's memory cgroup (every process in it: on a
    testbed node, the node's Ray processes too; page cache included, as the kernel charges
    it), the cgroup's limit, and how often its usage met that limit (v1 ``memory.failcnt``,
    v2 ``memory.events``' ``max``: the kernel then reclaimed, or the OOM killer ran)."""

    peak_bytes: int
    limit_bytes: int
    limit_hits: int


def _limit_hits(found: _MemoryDir) -> int:
    if found.v1:
        return int(_read(found.here / "memory.failcnt") or 0)
    events = _read(found.here / "memory.events") or ""
    return next((int(v) for k, _, v in (ln.partition(" ") for ln in events.splitlines())
                 if k == "max"), 0)


def memory_peak(found: _MemoryDir | None = None) -> MemoryPeak | None:
    """This process's memory cgroup's peak, limit and limit hits, or None where it has no
    limit below the host's memory or no peak to read (cgroup v2 before Linux 5.19)."""
    try:
        found = found or _memory_dir()
        if found is None:
            return None
        peak = _read(found.file("memory.max_usage_in_bytes", "memory.peak"))
        limit = found.limit_bytes()
        if peak is None or limit is None:
            return None
        return MemoryPeak(int(peak), limit, _limit_hits(found))
    except (OSError, ValueError):
        return None


def process_peak_bytes() -> int:
    """This process's peak resident memory since it started or since
    :func:`reset_memory_peaks` (``VmHWM``). ``getrusage``'s ``ru_maxrss`` is not reset: a
    process that hosts one member after another (a vessel) would report its earlier
    members' peaks."""
    for line in (_read(Path("/proc/self/status")) or "").splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024  # kB
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def reset_memory_peaks() -> bool:
    """Start this process's peak resident memory afresh (``/proc/self/clear_refs``) and its
    memory cgroup's peak and limit hits (v1: ``memory.max_usage_in_bytes`` and
    ``memory.failcnt`` written 0; needs write access to the
    cgroup, which a testbed node's processes have), only where that cgroup has a memory
    limit: a host's own cgroups are left alone. True when the cgroup's was reset: only
    then is :func:`memory_peak` this process's to report (a cgroup v2 peak is reset only
    for the file handle that wrote it, Linux 6.12+)."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")
    try:
        found = _memory_dir()
        if found is None or not found.v1 or memory_peak(found) is None:
            return False
        (found.here / "memory.max_usage_in_bytes").write_text("0")
        (found.here / "memory.failcnt").write_text("0")
    except (OSError, ValueError):
        return False
    return True
