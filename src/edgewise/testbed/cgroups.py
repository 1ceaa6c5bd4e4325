"""Cgroups for testbed nodes, v1 (cpu, memory, freezer, cpuacct) or v2 (cpu, memory):
create with a CPU quota and a memory limit, freeze, kill everything inside, remove."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Cgroups", "detect"]

_MOUNTS = Path("/proc/self/mounts")


def _mounts(mounts: Path) -> list[tuple[str, str, set[str]]]:
    """(mount point, fs type, options) of every cgroup mount."""
    found = []
    for line in mounts.read_text().splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[2] in ("cgroup", "cgroup2"):
            found.append((parts[1], parts[2], set(parts[3].split(","))))
    return found


@dataclass(frozen=True, slots=True)
class Cgroups:
    """One node's cgroup is the same relative path under every root in ``roots``:
    ``version`` 1 has a root per controller (``cpu``, ``memory``, ``freezer``, optionally
    ``cpuacct``), version 2 one root for all (key ``unified``)."""

    version: int
    roots: dict[str, Path]

    def paths(self, rel: str) -> list[Path]:
        """The node's directory in every hierarchy (a shared mount counted once)."""
        seen: list[Path] = []
        for root in self.roots.values():
            if root / rel not in seen:
                seen.append(root / rel)
        return seen

    def create(self, rel: str, memory_mb: int, quota_cores: float | None, period_us: int) -> None:
        """Make the node's cgroup with its memory limit and CPU quota (None: unlimited).

        The top directory (``edgewise``) gets the largest CPU weight, so that the quotas
        hold while the rest of the host is busy (the testbed claims its CPU budget), and
        each node a weight in proportion to its quota, so that a host too busy even for
        that slows every device alike.
        """
        if self.version == 2:
            self._enable_v2_controllers(rel)
        for path in self.paths(rel):
            path.mkdir(parents=True, exist_ok=True)
        self._weight(Path(rel).parts[0], 1.0)
        if quota_cores is not None:
            self._weight(rel, quota_cores / 256)
        limit = str(memory_mb * 2**20)
        if self.version == 1:
            _write(self.roots["memory"] / rel / "memory.limit_in_bytes", limit)
        else:
            _write(self.roots["unified"] / rel / "memory.max", limit)
            _write(self.roots["unified"] / rel / "memory.swap.max", "0", optional=True)
        self.set_quota(rel, quota_cores, period_us)

    def _enable_v2_controllers(self, rel: str) -> None:
        """cgroup v2 hands a controller down only where each parent enables it."""
        parent = self.roots["unified"]
        for part in Path(rel).parts[:-1]:
            _write(parent / "cgroup.subtree_control", "+cpu +memory")
            parent = parent / part
            parent.mkdir(exist_ok=True)
        _write(parent / "cgroup.subtree_control", "+cpu +memory")

    def set_quota(self, rel: str, cores: float | None, period_us: int) -> None:
        """Hold the node to ``cores`` host cores (None: lift the limit)."""
        quota = -1 if cores is None else max(1000, round(cores * period_us))
        if self.version == 1:
            cpu = self.roots["cpu"] / rel
            _write(cpu / "cpu.cfs_period_us", str(period_us))
            _write(cpu / "cpu.cfs_quota_us", str(quota))
        else:
            value = "max" if quota < 0 else str(quota)
            _write(self.roots["unified"] / rel / "cpu.max", f"{value} {period_us}")
        if cores is not None:
            self._weight(rel, cores / 256)

    def _weight(self, rel: str, share: float) -> None:
        """CPU weight as a share of the largest one (v1 shares 2..262144, v2 1..10000)."""
        if self.version == 1:
            value = max(2, min(262144, round(share * 262144)))
            _write(self.roots["cpu"] / rel / "cpu.shares", str(value))
        else:
            value = max(1, min(10000, round(share * 10000)))
            _write(self.roots["unified"] / rel / "cpu.weight", str(value))

    def procs_files(self, rel: str) -> list[Path]:
        """The files a process writes its pid into to join the node's cgroup."""
        return [p / "cgroup.procs" for p in self.paths(rel)]

    def pids(self, rel: str) -> set[int]:
        """Every process in the node's cgroup (any hierarchy)."""
        found: set[int] = set()
        for path in self.procs_files(rel):
            try:
                found |= {int(x) for x in path.read_text().split()}
            except OSError:
                continue
        return found

    def freeze(self, rel: str, frozen: bool) -> None:
        """Stop (or resume) every process of the node: the freezer, not signals."""
        if self.version == 1:
            _write(self.roots["freezer"] / rel / "freezer.state", "FROZEN" if frozen else "THAWED")
        else:
            _write(self.roots["unified"] / rel / "cgroup.freeze", "1" if frozen else "0")

    def frozen(self, rel: str) -> bool:
        if self.version == 1:
            state = (self.roots["freezer"] / rel / "freezer.state").read_text().strip()
            return state != "THAWED"
        events = (self.roots["unified"] / rel / "cgroup.events").read_text()
        return "frozen 1" in events

    def kill(self, rel: str, timeout_s: float = 10.0) -> int:
        """SIGKILL every process of the node (frozen first, so none can fork meanwhile);
        returns how many there were."""
        pids = self.pids(rel)
        if not pids:
            return 0
        with contextlib.suppress(OSError):
            self.freeze(rel, True)
        for pid in self.pids(rel):
            _kill(pid)
        with contextlib.suppress(OSError):
            self.freeze(rel, False)  # SIGKILL is delivered once the group thaws
        deadline = time.monotonic() + timeout_s
        while self.pids(rel) and time.monotonic() < deadline:
            time.sleep(0.05)
        return len(pids)

    def remove(self, rel: str) -> None:
        """Remove the node's (empty) cgroup in every hierarchy."""
        for path in self.paths(rel):
            _rmdir(path)

    def remove_tree(self, rel: str) -> None:
        """Remove ``rel`` and every cgroup below it, leaves first (all must be empty)."""
        for path in self.paths(rel):
            if path.is_dir():
                for sub in sorted((p for p in path.rglob("*") if p.is_dir()),
                                  key=lambda p: len(p.parts), reverse=True):
                    _rmdir(sub)
                _rmdir(path)

    def existing(self, rel: str) -> list[Path]:
        """The node's or testbed's directories that still exist."""
        return [p for p in self.paths(rel) if p.is_dir()]

    def cpu_seconds(self, rel: str) -> float | None:
        """CPU time the node used so far (None where no accounting is mounted)."""
        if self.version == 2:
            for line in (self.roots["unified"] / rel / "cpu.stat").read_text().splitlines():
                if line.startswith("usage_usec"):
                    return int(line.split()[1]) / 1e6
            return None
        acct = self.roots.get("cpuacct")
        return int((acct / rel / "cpuacct.usage").read_text()) / 1e9 if acct else None

    def memory_used_mb(self, rel: str) -> float:
        name = "memory.usage_in_bytes" if self.version == 1 else "memory.current"
        root = self.roots["memory" if self.version == 1 else "unified"]
        return int((root / rel / name).read_text()) / 2**20


def _write(path: Path, value: str, optional: bool = False) -> None:
    try:
        path.write_text(value)
    except OSError:
        if not optional:
            raise


def _rmdir(path: Path) -> None:
    for _ in range(50):  # a just-killed process may linger a moment as a zombie
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.05)
    path.rmdir()


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def detect(mounts: Path = _MOUNTS) -> Cgroups | None:
    """The cgroups this host offers: v1 when its cpu, memory and freezer controllers are
    mounted, else v2 when its root offers cpu and memory; None when neither."""
    found = _mounts(mounts)
    v1: dict[str, Path] = {}
    for point, kind, options in found:
        if kind == "cgroup":
            for controller in ("cpu", "memory", "freezer", "cpuacct"):
                if controller in options and controller not in v1:
                    v1[controller] = Path(point)
    if {"cpu", "memory", "freezer"} <= set(v1):
        return Cgroups(1, v1)
    for point, kind, _ in found:
        controllers = Path(point) / "cgroup.controllers"
        if kind == "cgroup2" and controllers.exists():
            offered = set(controllers.read_text().split())
            if {"cpu", "memory"} <= offered:
                return Cgroups(2, {"unified": Path(point)})
    return None
