"""Probes run inside a testbed device (standard library only, so they start fast):
a TCP sender and receiver to measure goodput, and a CPU-bound kernel.

``python -m edgewise.testbed.probes recv ADDRESS`` prints ``{"port": P}``, accepts one
connection and, at its end, prints ``{"bytes": B, "seconds": S}``: the bytes received
after a warm-up and the time they took. ``send ADDRESS PORT SECONDS`` sends zeros for
SECONDS. ``cpu SECONDS`` spins until it used SECONDS of CPU and prints
``{"cpu_seconds": C, "wall_seconds": W, "cgroup_cpu_seconds": G}``, G being what its whole
cgroup used meanwhile (null where it cannot tell). Nothing but JSON numbers crosses a pipe.
"""

from __future__ import annotations

import json
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["cpu_kernel", "receive", "send"]

WARMUP_S = 0.3  # TCP slow start and the bucket's initial burst are not the link's rate
_CHUNK = 256 * 1024


def receive(address: str) -> dict[str, float]:
    """Accept one connection on ``address`` and measure its goodput after the warm-up."""
    with socket.create_server((address, 0)) as server:
        print(json.dumps({"port": server.getsockname()[1]}), flush=True)
        conn, _ = server.accept()
        with conn:
            buffer = bytearray(_CHUNK)
            first = counted = 0.0
            start = last = 0.0
            while True:
                n = conn.recv_into(buffer)
                now = time.perf_counter()
                if n == 0:
                    break
                if not first:
                    first = now
                elif now - first >= WARMUP_S:
                    if not start:
                        start = now
                    else:
                        counted += n
                    last = now
    return {"bytes": counted, "seconds": max(last - start, 1e-9)}


def send(address: str, port: int, seconds: float) -> None:
    """Send zeros to ``address:port`` for ``seconds``."""
    payload = bytes(_CHUNK)
    with socket.create_connection((address, port), timeout=30) as conn:
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            conn.sendall(payload)


def _mount(kind: str, controller: str | None) -> str | None:
    with open("/proc/self/mounts") as mounts:
        for line in mounts:
            parts = line.split()
            if parts[2] == kind and (controller is None or controller in parts[3].split(",")):
                return parts[1]
    return None


def cgroup_cpu_reader() -> Callable[[], float] | None:
    """A reader of the CPU seconds this process's cgroup used (v1 cpuacct or v2)."""
    with open("/proc/self/cgroup") as own:
        lines = [line.rstrip("\n").split(":", 2) for line in own]
    for _, controllers, path in lines:
        root = _mount("cgroup", "cpuacct") if "cpuacct" in controllers.split(",") else None
        if root is not None:
            usage = Path(f"{root}{path}/cpuacct.usage")
            return lambda: int(usage.read_text()) / 1e9
    for hid, _, path in lines:
        root = _mount("cgroup2", None) if hid == "0" else None
        stat = Path(f"{root}{path}/cpu.stat")
        if root is not None and stat.exists():
            return lambda: int(stat.read_text().split("usage_usec")[1].split()[0]) / 1e6
    return None


def cpu_kernel(cpu_seconds: float) -> dict[str, float | None]:
    """Spin until this thread used ``cpu_seconds`` of CPU; the wall time it took and what
    its cgroup used in that time."""
    reader = cgroup_cpu_reader()
    group0 = reader() if reader else 0.0
    cpu0, wall0 = time.thread_time(), time.perf_counter()
    x = 0
    while time.thread_time() - cpu0 < cpu_seconds:
        for i in range(2000):
            x += i * i
    wall, cpu = time.perf_counter() - wall0, time.thread_time() - cpu0
    return {"cpu_seconds": cpu, "wall_seconds": wall,
            "cgroup_cpu_seconds": reader() - group0 if reader else None}


def main(argv: list[str]) -> int:
    if argv[:1] == ["recv"] and len(argv) == 2:
        print(json.dumps(receive(argv[1])), flush=True)
    elif argv[:1] == ["send"] and len(argv) == 4:
        send(argv[1], int(argv[2]), float(argv[3]))
    elif argv[:1] == ["cpu"] and len(argv) == 2:
        print(json.dumps(cpu_kernel(float(argv[1]))), flush=True)
    else:
        print("usage: probes recv ADDRESS | send ADDRESS PORT SECONDS | cpu SECONDS",
              file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
