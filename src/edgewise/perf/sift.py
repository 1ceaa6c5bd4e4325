"""The latency-critical background app of Deep-Edge §V-A: SIFT on a frame every 200 ms, sent
with its JPEG over UDP to a stitching receiver; per-period execution times and misses."""

from __future__ import annotations

import contextlib
import math
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Protocol

import cv2
import numpy as np
from numpy.typing import NDArray

from edgewise.errors import EdgewiseError
from edgewise.perf.sift_wire import (
    Reassembler,
    WireError,
    decode_message,
    encode_features,
    encode_message,
    split_message,
)

__all__ = ["AppStats", "ReceiverStats", "SiftApp", "StitchReceiver", "summarise", "synth_frame"]

FRAME_H, FRAME_W = 320, 640
JPEG_QUALITY: Final = 80  # about 56 KB for a synthetic 640x320 frame, like the paper's


class StopFlag(Protocol):
    """A threading or multiprocessing Event."""

    def is_set(self) -> bool: ...

    def wait(self, timeout: float | None = None) -> bool: ...


@dataclass(frozen=True, slots=True)
class AppStats:
    """Per-period execution of a periodic app: ``periods`` released, ``processed`` run (the
    rest were skipped because an overrun swallowed their whole period), deadline ``misses``
    (late or skipped) and execution-time percentiles in ms (NaN when nothing ran)."""

    periods: int
    processed: int
    exec_ms_p50: float
    exec_ms_p95: float
    exec_ms_max: float
    misses: int
    miss_rate: float


@dataclass(frozen=True, slots=True)
class ReceiverStats:
    """What the stitching receiver saw: datagrams, frames reassembled and decoded, malformed
    datagrams or messages dropped, incomplete messages evicted from its bounded buffer."""

    datagrams: int
    frames_complete: int
    malformed: int
    incomplete_dropped: int


def summarise(exec_ms: list[float], periods: int, misses: int) -> AppStats:
    """AppStats from the execution times of the periods that ran."""
    p50, p95, top = (float(np.percentile(exec_ms, q)) if exec_ms else math.nan
                     for q in (50, 95, 100))
    return AppStats(periods, len(exec_ms), p50, p95, top, misses,
                    misses / periods if periods else 0.0)


def synth_frame(seed: int, index: int = 0) -> NDArray[np.uint8]:
    """A deterministic 640x320 BGR frame: smooth textured noise, grain and random shapes."""
    rng = np.random.default_rng([seed, index])
    base = rng.normal(128, 40, (FRAME_H // 8, FRAME_W // 8, 3)).astype(np.float32)
    img = np.asarray(cv2.resize(base, (FRAME_W, FRAME_H), interpolation=cv2.INTER_CUBIC))
    img += rng.normal(0, 12, img.shape).astype(np.float32)
    frame = np.clip(img, 0, 255).astype(np.uint8)
    for _ in range(25):
        colour = tuple(int(v) for v in rng.integers(0, 256, 3))
        x, y, a, b = (int(v) for v in rng.integers(0, (FRAME_W, FRAME_H, 80, 80), 4))
        kind = int(rng.integers(3))
        if kind == 0:
            cv2.circle(frame, (x, y), 5 + a // 2, colour, -1)
        elif kind == 1:
            cv2.rectangle(frame, (x, y), (x + 10 + a, y + 10 + b), colour, -1)
        else:
            cv2.line(frame, (x, y), (x + 8 * a - 320, y + 4 * b - 160), colour, 3)
    return frame


class StitchReceiver:
    """The stitching server: a thread receiving datagrams on ``127.0.0.1:port`` (0 picks a
    free port), reassembling and decoding every frame's message.

    A datagram sent on loopback reaches the socket asynchronously (the kernel's softirq may
    run later on a loaded host), so "the sender has returned" does not mean "the receiver
    has it": a caller that knows how many frames were sent waits for them
    (:meth:`wait_for_frames`, or ``stop(expect_frames=n)``) instead of sleeping."""

    def __init__(self, port: int = 0, host: str = "127.0.0.1") -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self.sock.bind((host, port))
        self.sock.settimeout(0.05)
        self.port: int = self.sock.getsockname()[1]
        self.reassembler = Reassembler()
        self.datagrams = self.frames_complete = self.bad_messages = 0
        self._arrived = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="stitch-receiver", daemon=True)

    def start(self) -> StitchReceiver:
        self._thread.start()
        return self

    def _loop(self) -> None:
        while True:
            try:
                datagram = self.sock.recv(65536)
            except TimeoutError:  # the socket stayed empty 50 ms: drained
                if self._stop.is_set():
                    return
                continue
            self.datagrams += 1
            message = self.reassembler.feed(datagram)
            if message is None:
                continue
            try:
                decode_message(message)
            except WireError:
                self.bad_messages += 1
                continue
            with self._arrived:
                self.frames_complete += 1
                self._arrived.notify_all()

    def wait_for_frames(self, frames: int, timeout_s: float) -> bool:
        """Block until ``frames`` frames have been reassembled (True), or ``timeout_s``
        passed (False: some were lost or are still in flight)."""
        with self._arrived:
            return self._arrived.wait_for(lambda: self.frames_complete >= frames, timeout_s)

    def stop(self, expect_frames: int | None = None, timeout_s: float = 10.0) -> ReceiverStats:
        """Stop the receiver: first wait (up to ``timeout_s``) for ``expect_frames`` frames
        when the caller knows how many it sent, then let the thread drain the socket and
        end, then close the socket; the counts."""
        if expect_frames is not None:
            self.wait_for_frames(expect_frames, timeout_s)
        self._stop.set()
        self._thread.join(timeout_s)  # ends after the first 50 ms without a datagram
        if self._thread.is_alive():
            raise EdgewiseError(f"the stitching receiver did not stop within {timeout_s} s")
        self.sock.close()
        return self.stats()

    def stats(self) -> ReceiverStats:
        return ReceiverStats(self.datagrams, self.frames_complete,
                             self.reassembler.malformed + self.bad_messages,
                             self.reassembler.incomplete_dropped)


class SiftApp:
    """SIFT on a 640x320 frame every ``period_ms``, its features and JPEG sent over UDP to
    ``127.0.0.1:port``. A period misses when its response time (finish − release) exceeds
    ``deadline_ms`` (default: the period). Frames are synthesised from ``seed`` (a pool of
    ``n_frames`` cycled, standing in for a camera). OpenCV runs single-threaded. ``clock``
    and ``sleep`` (seconds) are the time source, injectable for tests without a stop flag."""

    def __init__(self, period_ms: float = 200.0, deadline_ms: float | None = None,
                 port: int = 0, seed: int = 0, n_features: int = 500, n_frames: int = 8, *,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if period_ms <= 0:
            raise EdgewiseError(f"period_ms must be positive, got {period_ms}")
        self.period_ms = period_ms
        self.deadline_ms = period_ms if deadline_ms is None else deadline_ms
        self.port = port
        self.frames = [synth_frame(seed, i) for i in range(n_frames)]
        self.sift = cv2.SIFT.create(nfeatures=n_features)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        # bound to loopback: an unbound UDP socket takes 0.0.0.0 at its first send, and
        # would then take datagrams from any interface (issue 28: nothing off loopback)
        self.sock.bind(("127.0.0.1", 0))
        self.clock, self.sleep = clock, sleep

    def process(self, index: int) -> int:
        """One period's work on frame ``index``: SIFT, serialise, JPEG, send; bytes sent."""
        frame = self.frames[index % len(self.frames)]
        grey = cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY)
        kps, desc = self.sift.detectAndCompute(grey, None)
        points = np.array([(k.pt[0], k.pt[1], k.size, k.angle) for k in kps],
                          dtype=np.float32).reshape(-1, 4)
        feats = np.zeros((0, 128), np.float32) if desc is None else np.asarray(desc, np.float32)
        ok, jpeg = cv2.imencode(".jpg", frame, [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
        if not ok:
            raise WireError("JPEG encoding failed")
        message = encode_message(index, encode_features(points, feats), jpeg.tobytes())
        for datagram in split_message(index, message):
            # a full or refused socket loses the datagram, as UDP does
            with contextlib.suppress(OSError):
                self.sock.sendto(datagram, ("127.0.0.1", self.port))
        return len(message)

    def run(self, duration_s: float, stop: StopFlag | None = None,
            on_period: Callable[[float, float, bool], object] | None = None) -> AppStats:
        """Release a period every ``period_ms`` for ``duration_s`` (or until ``stop``, an
        Event, is set); ``on_period(release, exec_ms, met)`` is called after each period."""
        period = self.period_ms / 1000.0
        n_periods = max(1, int(duration_s / period + 1e-9))
        start, k, periods, misses, execs = self.clock(), 0, 0, 0, []
        while k < n_periods and not (stop is not None and stop.is_set()):
            release = start + k * period
            wait = release - self.clock()
            if wait > 0 and stop is not None and stop.wait(wait):
                break
            if wait > 0 and stop is None:
                self.sleep(wait)
            t0 = self.clock()
            self.process(k)
            t1 = self.clock()
            met = (t1 - release) * 1000.0 <= self.deadline_ms
            execs.append((t1 - t0) * 1000.0)
            # an overrun swallows every period released while it ran: skipped, each a miss
            nxt = min(n_periods, max(k + 1, int((t1 - start) / period)))
            periods, misses = periods + nxt - k, misses + (not met) + (nxt - k - 1)
            if on_period is not None:
                on_period(release, execs[-1], met)
            k = nxt
        self.sock.close()
        return summarise(execs, periods, misses)
