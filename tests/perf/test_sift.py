"""The SIFT background app: wire format, reassembly, a real periodic run, its own process."""

from __future__ import annotations

import itertools
import random
import socket
import time

import cv2
import numpy as np
import pytest

from edgewise.perf.app_process import start_background_app
from edgewise.perf.sift import SiftApp, StitchReceiver, synth_frame
from edgewise.perf.sift_wire import (
    MAX_DATAGRAM,
    Reassembler,
    WireError,
    decode_features,
    decode_message,
    encode_features,
    encode_message,
    split_message,
)


def _features(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(n, 4)).astype(np.float32),
            rng.random((n, 128), dtype=np.float32))


@pytest.mark.parametrize("n", [0, 1, 500])
def test_features_round_trip_exactly(n: int) -> None:
    kp, desc = _features(n)
    kp2, desc2 = decode_features(encode_features(kp, desc))
    assert np.array_equal(kp, kp2) and np.array_equal(desc, desc2)
    assert kp2.dtype == desc2.dtype == np.float32


def test_message_split_and_reassembled_in_any_order() -> None:
    kp, desc = _features(700)
    jpeg = bytes(range(256)) * 220
    message = encode_message(42, encode_features(kp, desc), jpeg)
    datagrams = split_message(7, message)
    assert len(datagrams) > 1 and all(len(d) <= MAX_DATAGRAM for d in datagrams)
    random.Random(0).shuffle(datagrams)
    reassembler = Reassembler()
    results = [reassembler.feed(d) for d in datagrams]
    assert results[:-1] == [None] * (len(datagrams) - 1) and results[-1] == message
    frame_id, kp2, desc2, jpeg2 = decode_message(message)
    assert (frame_id, jpeg2) == (42, jpeg)
    assert np.array_equal(kp, kp2) and np.array_equal(desc, desc2)


def test_malformed_datagrams_are_dropped_and_counted() -> None:
    good = split_message(1, b"x" * 150_000)
    header_only = good[0][:16]
    bad_seq = bytearray(good[0])
    bad_seq[8:10] = (9).to_bytes(2, "little")  # seq beyond count
    wrong_count = bytearray(good[1])
    wrong_count[10:12] = (5).to_bytes(2, "little")  # count inconsistent with total
    reassembler = Reassembler()
    for junk in (b"", b"garbage", b"EWSD", header_only[:10], bytes(bad_seq),
                 bytes(wrong_count), b"ABCD" + good[0][4:]):
        assert reassembler.feed(junk) is None
    assert reassembler.malformed == 7
    with pytest.raises(WireError):
        decode_message(b"EWSM" + bytes(30))
    with pytest.raises(WireError):
        decode_features(encode_features(*_features(3))[:-1])


def test_incomplete_messages_are_evicted_from_the_bounded_buffer() -> None:
    reassembler = Reassembler(max_pending=2)
    for mid in range(5):  # first datagram of five two-datagram messages
        reassembler.feed(split_message(mid, b"y" * 70_000)[0])
    assert len(reassembler.pending) == 2 and reassembler.incomplete_dropped == 3


def test_synthetic_frames_are_deterministic_and_jpeg_about_56_kb() -> None:
    frame = synth_frame(3, 1)
    assert frame.shape == (320, 640, 3) and frame.dtype == np.uint8
    assert np.array_equal(frame, synth_frame(3, 1)) and not np.array_equal(frame, synth_frame(3, 2))
    ok, jpeg = cv2.imencode(".jpg", frame, [cv2.IMWRITE_JPEG_QUALITY, 80])
    assert ok and 35_000 < len(jpeg) < 80_000


class FakeClock:
    """An injected clock: ``sleep`` and the app's work advance it, nothing else does."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_overruns_skip_the_periods_they_swallow_and_each_counts_as_a_miss() -> None:
    """Worked example on an injected clock (binary-exact times), period 250 ms, 5 periods:
    period 1 runs 562.5 ms, so it misses, swallows period 2 (a miss without a run), and
    period 3 starts late but still meets its deadline."""
    clock = FakeClock()
    app = SiftApp(period_ms=250, clock=clock, sleep=clock.sleep)
    work_s = {0: 0.0625, 1: 0.5625, 3: 0.0625, 4: 0.0625}
    ran: list[int] = []

    def process(index: int) -> int:
        ran.append(index)
        clock.now += work_s[index]
        return 0

    app.process = process  # type: ignore[method-assign]
    seen: list[tuple[float, float, bool]] = []
    stats = app.run(1.25, on_period=lambda r, e, m: seen.append((r, e, m)))
    assert ran == [0, 1, 3, 4]
    assert seen == [(0.0, 62.5, True), (0.25, 562.5, False), (0.75, 62.5, True),
                    (1.0, 62.5, True)]
    assert (stats.periods, stats.processed, stats.misses) == (5, 4, 2)
    assert stats.miss_rate == 2 / 5 and stats.exec_ms_max == 562.5


def test_app_runs_periodically_and_every_period_is_accounted_for() -> None:
    receiver = StitchReceiver().start()
    # junk on the receiver's port must not crash it
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.sendto(b"not a datagram", ("127.0.0.1", receiver.port))
    records: list[tuple[float, float, bool]] = []
    start = time.monotonic()
    app = SiftApp(period_ms=200, port=receiver.port, seed=1)
    addresses: set[str] = set()

    def on_period(release: float, exec_ms: float, met: bool) -> None:
        records.append((release, exec_ms, met))
        addresses.add(app.sock.getsockname()[0])

    stats = app.run(1.5, on_period=on_period)
    # the sender's socket stays on loopback (unbound, its first send took 0.0.0.0)
    assert addresses == {"127.0.0.1"}
    elapsed = time.monotonic() - start
    # the app sent one frame per processed period; wait for them, not for a quiet socket
    seen = receiver.stop(expect_frames=stats.processed, timeout_s=30.0)
    assert stats.periods == 7 and elapsed >= 6 * 0.2  # period 6 is released at 1.2 s
    # every released period either ran (one record each) or was swallowed by an overrun
    assert len(records) == stats.processed <= stats.periods
    assert stats.misses == (stats.periods - stats.processed) + sum(not m for *_, m in records)
    assert stats.miss_rate == stats.misses / stats.periods
    # releases are on the period grid of one run (ratios, not wall-time windows)
    steps = [(b[0] - a[0]) / 0.2 for a, b in itertools.pairwise(records)]
    assert all(s >= 1 - 1e-9 and abs(s - round(s)) < 1e-6 for s in steps)
    assert stats.exec_ms_p50 > 1.0
    assert stats.exec_ms_p50 <= stats.exec_ms_p95 <= stats.exec_ms_max
    assert seen.frames_complete == stats.processed and seen.malformed == 1
    assert seen.datagrams > stats.processed  # several datagrams per frame, plus the junk


def test_receiver_waits_for_frames_still_in_flight() -> None:
    receiver = StitchReceiver().start()
    assert not receiver.wait_for_frames(1, timeout_s=0.1)  # nothing sent yet
    message = encode_message(0, encode_features(*_features(20)), b"jpeg")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for datagram in split_message(0, message):
            sock.sendto(datagram, ("127.0.0.1", receiver.port))
    assert receiver.stop(expect_frames=1, timeout_s=30.0).frames_complete == 1


def test_background_app_runs_in_its_own_process_and_stops() -> None:
    app = start_background_app("sift", period_ms=100, seed=2)
    assert app.process.is_alive() and app.process.pid is not None
    assert app.wait_for_periods(5, timeout_s=60.0)
    first, last = app.records[0][0], app.records[4][0]
    assert len(app.exec_ms_between(first, last)) >= 5
    stats = app.stop()
    assert not app.process.is_alive()
    assert stats.periods >= 5 and stats.processed == len(app.records)
    assert app.receiver is not None and app.receiver.frames_complete == stats.processed


def test_unknown_background_app_is_refused() -> None:
    with pytest.raises(Exception, match="unknown background app"):
        start_background_app("nope")
