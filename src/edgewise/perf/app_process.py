"""Co-located background apps in their own process, streaming per-period records back."""

from __future__ import annotations

import json
import multiprocessing as mp
import struct
import threading
from dataclasses import asdict
from multiprocessing.connection import Connection
from typing import Any, Final

import cv2

from edgewise.errors import EdgewiseError
from edgewise.perf.sift import AppStats, ReceiverStats, SiftApp, StitchReceiver, summarise

__all__ = ["BackgroundApp", "start_background_app"]

_RECORD: Final = struct.Struct("<dd?")  # release (time.monotonic s), exec ms, deadline met


class BackgroundApp:
    """Handle of a co-located app running in its own (spawned) process with its receiver;
    streams ``(release, exec_ms, met)`` records back through a pipe as they happen."""

    def __init__(self, kind: str, params: dict[str, float], duration_s: float) -> None:
        ctx = mp.get_context("spawn")
        self.kind = kind
        self._conn, child = ctx.Pipe(duplex=False)
        self._stop = ctx.Event()
        self.process = ctx.Process(target=_app_main, args=(child, params, duration_s,
                                                           self._stop), daemon=True)
        self.records: list[tuple[float, float, bool]] = []
        self.receiver: ReceiverStats | None = None
        self._final: AppStats | None = None
        self._ready, self._done = threading.Event(), threading.Event()
        self._recorded = threading.Condition()
        self._started = False
        self.process.start()
        child.close()
        threading.Thread(target=self._drain, name=f"{kind}-records", daemon=True).start()
        if not self._ready.wait(60.0) or not self._started:
            self.stop()
            raise EdgewiseError(f"the {kind} app did not start (exit code "
                                f"{self.process.exitcode})")

    def _drain(self) -> None:
        try:
            while True:
                data = self._conn.recv_bytes()
                self._started = True
                if data[:1] == b"R":
                    release, exec_ms, met = _RECORD.unpack(data[1:])
                    with self._recorded:
                        self.records.append((release, exec_ms, bool(met)))
                        self._recorded.notify_all()
                elif data[:1] == b"S":
                    final = json.loads(data[1:])
                    self._final = AppStats(**final["app"])
                    self.receiver = ReceiverStats(**final["receiver"])
                self._ready.set()
        except (EOFError, OSError):
            pass
        finally:
            self._ready.set()
            self._done.set()

    def wait_for_periods(self, n: int, timeout_s: float) -> bool:
        """Block until ``n`` periods have been recorded (True) or ``timeout_s`` passed."""
        with self._recorded:
            return self._recorded.wait_for(lambda: len(self.records) >= n, timeout_s)

    def exec_ms_between(self, t0: float, t1: float) -> list[float]:
        """Execution times (ms) of the periods released in [t0, t1] (``time.monotonic``)."""
        return [e for r, e, _ in list(self.records) if t0 <= r <= t1]

    def stop(self, timeout_s: float = 10.0) -> AppStats:
        """Stop the app and its receiver; the app's statistics over its whole run."""
        self._stop.set()
        self._done.wait(timeout_s)
        self.process.join(timeout_s)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(2.0)
        if self._final is None:
            execs = [e for _, e, _ in self.records]
            return summarise(execs, len(execs), sum(not m for _, _, m in self.records))
        return self._final

    def __enter__(self) -> BackgroundApp:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _app_main(conn: Connection, params: dict[str, float], duration_s: float,
              stop: Any) -> None:
    """The app's process: a receiver thread, then the periodic loop until ``stop``."""
    cv2.setNumThreads(1)
    receiver = StitchReceiver().start()
    app = SiftApp(float(params["period_ms"]), params.get("deadline_ms"), receiver.port,
                  int(params["seed"]))
    conn.send_bytes(b"K")
    stats = app.run(duration_s, stop, lambda r, e, m: conn.send_bytes(
        b"R" + _RECORD.pack(r, e, m)))
    # every processed period sent one frame: wait for them rather than for a quiet socket
    final = {"app": asdict(stats), "receiver": asdict(receiver.stop(stats.processed))}
    conn.send_bytes(b"S" + json.dumps(final).encode())
    conn.close()


def start_background_app(kind: str = "sift", period_ms: float = 200.0,
                         deadline_ms: float | None = None, seed: int = 0,
                         max_duration_s: float = 3600.0) -> BackgroundApp:
    """Start a co-located latency-critical app in its own process (bounded by
    ``max_duration_s``); returns once it runs. Only ``"sift"`` exists."""
    if kind != "sift":
        raise EdgewiseError(f"unknown background app {kind!r}; known: sift")
    params: dict[str, float] = {"period_ms": period_ms, "seed": seed}
    if deadline_ms is not None:
        params["deadline_ms"] = deadline_ms
    return BackgroundApp(kind, params, max_duration_s)
