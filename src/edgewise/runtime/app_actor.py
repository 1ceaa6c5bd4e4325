"""Latency-critical background apps as actors pinned to (emulated) devices."""

from __future__ import annotations

import threading
from typing import Any

import ray

from edgewise.perf.sift import SiftApp, StitchReceiver

__all__ = ["BackgroundAppActor"]


@ray.remote(max_concurrency=2)  # type: ignore[call-overload]
class BackgroundAppActor:
    """Runs SIFT on a 640×320 frame every period, sending the features to a stitching
    receiver over UDP (Deep-Edge §V-A), until stopped; reports execution times and misses.
    On an emulated cluster it runs for real on the host, next to the device's training."""

    def __init__(self, name: str, kind: str, period_ms: float, deadline_ms: float,
                 seed: int = 0) -> None:
        if kind != "sift":
            raise ValueError(f"unknown background app kind {kind!r} (known: sift)")
        self.name = name
        self.receiver = StitchReceiver()
        self.receiver.start()
        self.app = SiftApp(period_ms, deadline_ms, port=self.receiver.port, seed=seed)
        self.flag = threading.Event()
        self.result: dict[str, Any] = {}
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        stats = self.app.run(24 * 3600.0, stop=self.flag)
        self.result = {"app": self.name, "periods": stats.periods, "misses": stats.misses,
                       "miss_rate": stats.miss_rate, "exec_ms_p50": stats.exec_ms_p50,
                       "exec_ms_p95": stats.exec_ms_p95, "exec_ms_max": stats.exec_ms_max}

    def stop(self) -> dict[str, Any]:
        """Stop the app and its receiver; its statistics."""
        self.flag.set()
        self.thread.join(timeout=10)
        received = self.receiver.stop()
        return {**self.result, "frames_received": received.frames_complete}
