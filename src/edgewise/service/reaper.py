"""A watchdog that outlives the manager by a moment: when the manager's process ends, even
by ``kill -9``, it ends every process the manager had started (Ray's head, workers and
agents, planning children), so that none of them lingers."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time

import psutil

__all__ = ["reap_after", "start_reaper"]


def reap_after(parent_pid: int, period_s: float = 0.5, grace_s: float = 3.0) -> list[int]:
    """Watch ``parent_pid`` and remember its descendants; once it is gone, terminate those
    still running (then kill them after ``grace_s``). Returns the pids it ended."""
    me = os.getpid()
    known: dict[int, psutil.Process] = {}
    try:
        parent = psutil.Process(parent_pid)
        while parent.is_running() and parent.status() != psutil.STATUS_ZOMBIE:
            for child in parent.children(recursive=True):
                if child.pid != me:
                    known.setdefault(child.pid, child)
            time.sleep(period_s)
    except psutil.NoSuchProcess:
        pass
    victims = [p for p in known.values() if p.is_running()]  # create time checked: no reuse
    for proc in victims:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.terminate()
    _, alive = psutil.wait_procs(victims, timeout=grace_s)
    for proc in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    return [p.pid for p in victims]


def start_reaper() -> subprocess.Popen[bytes]:
    """Start the watchdog for this process (in its own session, so that a signal to the
    manager's process group reaches it only through the manager's end)."""
    return subprocess.Popen([sys.executable, "-m", "edgewise.service.reaper", str(os.getpid())],
                            start_new_session=True, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


if __name__ == "__main__":
    reap_after(int(sys.argv[1]))
