"""Hostile crowds against a served manager, all on 127.0.0.1 and all bounded in time:
half-open connections without a token while a client with the token asks on fresh
connections; a flood of exact solves while cheap reads are timed; a too-big workload."""

from __future__ import annotations

import concurrent.futures
import resource
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from edgewise.service.loadbench.served import TOKEN, ServedManager

__all__ = ["BIG_WORKLOAD", "EXACT_SOLVE", "big_workload", "half_open", "planning_flood"]

PARTIAL_HEAD = b"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n"
"""What each half-open connection sends: a request head that never ends, and no token."""
EXACT_SOLVE = {
    "policy": "exact", "n_samples": 1_000_000, "b_max": 4096, "b_min": 1,
    "workers": [{"device": f"nano-{i}", "device_type": "jetson-nano",
                 "apps": [{"name": f"sift-{i}", "kind": "sift", "deadline_ms": 200}]}
                for i in range(6)]}
"""The exact oracle on 6 workers (the schema's limit) with the widest batch range: about
30 s of planning, so each one runs into the 20 s limit."""
BIG_WORKLOAD = {"model": "hf:ViTConfig", "model_args": {
    "hidden_size": 1024, "num_hidden_layers": 18, "num_attention_heads": 16,
    "intermediate_size": 4096, "image_size": 8, "patch_size": 4, "num_channels": 1}}
"""A ViT of about 227 M parameters (the issue's: 908 MB of weights, as much again for
their gradients) on the digits."""


def _raise_fd_limit(needed: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, needed), hard))


def _ask(port: int, path: str, within_s: float) -> bool:
    """One GET with the token on a fresh connection: a 200 within ``within_s``."""
    request = (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n"
               "Connection: close\r\n\r\n").encode()
    deadline = time.monotonic() + within_s
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=within_s) as sock:
            sock.sendall(request)
            head = b""
            while b"\r\n" not in head:
                sock.settimeout(max(0.001, deadline - time.monotonic()))
                chunk = sock.recv(4096)
                if not chunk:
                    return False
                head += chunk
        return head.startswith(b"HTTP/1.1 200") and time.monotonic() <= deadline
    except OSError:
        return False


@dataclass
class _Crowd:
    """``size`` half-open connections, opened in a thread, held until :meth:`close`."""

    port: int
    size: int

    def __post_init__(self) -> None:
        self.socks: list[socket.socket] = []
        self.failed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._open, daemon=True)
        self._thread.start()

    def _open(self) -> None:
        for _ in range(self.size):
            if self._stop.is_set():
                return
            try:
                sock = socket.create_connection(("127.0.0.1", self.port), timeout=1.0)
                sock.sendall(PARTIAL_HEAD)
                self.socks.append(sock)
            except OSError:
                self.failed += 1

    def closed_by_server(self) -> int:
        """How many of the held connections the server has closed."""
        closed = 0
        for sock in self.socks:
            sock.setblocking(False)
            try:
                closed += sock.recv(1) == b""
            except BlockingIOError:
                pass
            except OSError:
                closed += 1
        return closed

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)
        for sock in self.socks:
            sock.close()


def half_open(manager: ServedManager, size: int, hold_s: float, path: str,
              every_s: float = 0.25, within_s: float = 1.0) -> dict[str, Any]:
    """Open ``size`` half-open connections without a token and hold them ``hold_s``; from
    the first one on, every ``every_s``, a client with the token GETs ``path`` on a fresh
    connection. The fraction answered 200 within ``within_s``."""
    _raise_fd_limit(size + 256)
    crowd = _Crowd(manager.port, size)
    answers: list[bool] = []
    started = time.monotonic()
    try:
        while time.monotonic() - started < hold_s:
            tick = time.monotonic()
            answers.append(_ask(manager.port, path, within_s))
            time.sleep(max(0.0, every_s - (time.monotonic() - tick)))
        closed = crowd.closed_by_server()
    finally:
        crowd.close()
    return {"ok_fraction": round(sum(answers) / max(1, len(answers)), 4),
            "asked": len(answers), "opened": len(crowd.socks), "refused": crowd.failed,
            "closed_by_server": closed}


def planning_flood(manager: ServedManager, solves: int = 45,
                   every_s: float = 0.05) -> dict[str, Any]:
    """``solves`` exact solves sent at once; meanwhile ``/api/v1/devices/metrics`` is read
    every ``every_s`` on a kept connection, until every solve is answered."""
    def solve() -> tuple[int, float, str]:
        with manager.client(timeout=120) as client:
            started = time.monotonic()
            answer = client.post("/api/v1/update/solve", json=EXACT_SOLVE)
            return answer.status_code, time.monotonic() - started, \
                answer.headers.get("retry-after", "")

    latencies: list[float] = []
    read_statuses: dict[str, int] = {}
    with concurrent.futures.ThreadPoolExecutor(solves) as pool, \
            manager.client(timeout=30) as reader:
        reader.get("/api/v1/devices/metrics")  # the connection, before the flood
        futures = [pool.submit(solve) for _ in range(solves)]
        deadline = time.monotonic() + 600
        while not all(f.done() for f in futures) and time.monotonic() < deadline:
            tick = time.monotonic()
            read = str(reader.get("/api/v1/devices/metrics").status_code)
            latencies.append(time.monotonic() - tick)
            read_statuses[read] = read_statuses.get(read, 0) + 1
            time.sleep(max(0.0, every_s - (time.monotonic() - tick)))
        results = [f.result(timeout=300) for f in futures]
    busy = [seconds for code, seconds, _ in results if code == 429]
    statuses: dict[str, int] = {}
    for code, _, _ in results:
        statuses[str(code)] = statuses.get(str(code), 0) + 1
    return {"cheap_read_p99_ms": round(1e3 * float(np.percentile(latencies, 99)), 1),
            "cheap_read_p50_ms": round(1e3 * float(np.percentile(latencies, 50)), 1),
            "cheap_reads": len(latencies), "cheap_read_statuses": read_statuses,
            "statuses": statuses,
            "retry_after_given": all(r for s, _, r in results if s == 429),
            "busy_seconds_max": round(max(busy), 3) if busy else None}


def big_workload(manager: ServedManager, settle_s: float = 3.0) -> dict[str, Any]:
    """The manager's RSS before and ``settle_s`` after it answers the submission of
    :data:`BIG_WORKLOAD` (a 413 when its dry run hits a planning limit; a job, stopped
    at once, when it does not)."""
    with manager.client(timeout=300) as client:
        before = manager.rss_mb()
        started = time.monotonic()
        answer = client.post("/api/v1/jobs", json={"kind": "update",
                                                   "spec": {"workload": BIG_WORKLOAD}})
        seconds = time.monotonic() - started
        time.sleep(settle_s)
        after = manager.rss_mb()
        if answer.status_code == 201:  # within the limits: a job; not left to run
            client.post(f"/api/v1/jobs/{answer.json()['id']}/stop")
    detail = answer.json().get("detail") if answer.status_code != 201 else None
    return {"status": answer.status_code, "detail": detail, "seconds": round(seconds, 2),
            "rss_before_mb": round(before, 1), "rss_after_mb": round(after, 1),
            "rss_growth_mb": round(after - before, 1)}
