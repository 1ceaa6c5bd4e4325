"""Probes run inside a testbed device (standard library only, so they start fast):
a TCP sender and receiver to measure goodput, and a CPU-bound kernel.

``python -m edgewise.testbed.probes recv ADDRESS`` prints ``{"port": P}``, accepts one
connection and, at its end, prints ``{"bytes": B, "seconds": S}``: the bytes received
after a warm-up and the time they took. ``send ADDRESS PORT SECONDS`` sends zeros for
SECONDS. ``cpu SECONDS`` spins until it used SECONDS of CPU and prints
``{"cpu_seconds": C, "wall_seconds": W}``. Nothing but JSON numbers crosses a pipe.
"""

from __future__ import annotations

import json
import socket
import sys
import time

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


def cpu_kernel(cpu_seconds: float) -> dict[str, float]:
    """Spin until this thread used ``cpu_seconds`` of CPU; the wall time it took."""
    cpu0, wall0 = time.thread_time(), time.perf_counter()
    x = 0
    while time.thread_time() - cpu0 < cpu_seconds:
        for i in range(2000):
            x += i * i
    return {"cpu_seconds": time.thread_time() - cpu0, "wall_seconds": time.perf_counter() - wall0}


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
