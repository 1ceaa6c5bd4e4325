"""Where the Ray that edgewise starts listens: the listening sockets, on addresses that are
not loopback, of every process of a run's tree (the driver, Ray's GCS, raylet, dashboard,
agents and workers), sampled while the run goes on (psutil)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from edgewise.cluster.examples import example_path
from edgewise.errors import RuntimeFault
from edgewise.service.loadbench.served import non_loopback_listeners, stop_tree

__all__ = ["COMMANDS", "run_listeners"]

COMMANDS: dict[str, tuple[str, ...]] = {
    "train": ("train", str(example_path("three-nanos.yaml")), "--epochs", "3"),
    "bench workloads": ("bench", "workloads", "--quick", "--json"),
}
"""The runs outside ``serve`` whose Ray is checked (``serve``'s is checked on the bench's
own manager)."""


def _ray_started(procs: dict[int, psutil.Process]) -> bool:
    names = []
    for proc in procs.values():
        try:
            names.append(proc.name())
        except psutil.Error:
            continue
    return any("raylet" in n for n in names) and any(n.startswith("ray::") for n in names)


def run_listeners(name: str, args: tuple[str, ...], state_dir: Path,
                  after_ray_s: float = 15.0, limit_s: float = 300.0) -> dict[str, Any]:
    """Run ``edgewise ARGS`` and sample its tree's listening sockets every half second
    until ``after_ray_s`` after Ray's raylet and a worker appeared (or it ends, or
    ``limit_s``); then stop it (SIGINT: Ray shuts down) and what is left of its tree."""
    env = {**os.environ, "EDGEWISE_STATE_DIR": str(state_dir), "PYTHONUNBUFFERED": "1"}
    log = open(state_dir / f"{name.replace(' ', '-')}.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen([sys.executable, "-c", "from edgewise.cli import main; main()",
                             *args], env=env, stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)
    found: set[str] = set()
    seen: dict[int, psutil.Process] = {}
    ray_at: float | None = None
    started = time.monotonic()
    try:
        while proc.poll() is None and time.monotonic() - started < limit_s:
            listeners, procs = non_loopback_listeners(proc.pid)
            found |= set(listeners)
            seen.update(procs)
            if ray_at is None and _ray_started(procs):
                ray_at = time.monotonic()
            if ray_at is not None and time.monotonic() - ray_at >= after_ray_s:
                break
            time.sleep(0.5)
    finally:
        stop_tree(proc, seen, grace_s=60.0, sig=signal.SIGINT)
        log.close()
    if ray_at is None:
        raise RuntimeFault(f"`edgewise {' '.join(args)}` ended (exit {proc.returncode}) "
                           f"before its Ray started; its log: {log.name}")
    return {"listeners": sorted(found), "processes": len(seen)}
