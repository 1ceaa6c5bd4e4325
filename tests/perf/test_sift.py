"""The SIFT background app: wire format, reassembly, a real periodic run, its own process."""

from __future__ import annotations

import random
import socket
import time

import cv2
import numpy as np
import pytest

from edgewise.perf.app_process import start_background_app
from edgewise.perf.sift import (
    MAX_DATAGRAM,
    Reassembler,
    SiftApp,
    StitchReceiver,
    WireError,
    decode_features,
    decode_message,
    encode_features,
    encode_message,
    split_message,
    synth_frame,
)  # fmt: skip


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


def test_app_runs_periodically_and_every_period_is_accounted_for() -> None:
    receiver = StitchReceiver().start()
    # junk on the receiver's port must not crash it
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.sendto(b"not a datagram", ("127.0.0.1", receiver.port))
    start = time.monotonic()
    stats = SiftApp(period_ms=200, port=receiver.port, seed=1).run(1.5)
    elapsed = time.monotonic() - start
    seen = receiver.stop()
    assert stats.periods == 7 and 1.2 <= elapsed < 2.5
    assert stats.processed + (stats.periods - stats.processed) == stats.periods
    assert stats.misses <= stats.periods and stats.miss_rate == stats.misses / stats.periods
    assert stats.exec_ms_p50 > 1.0
    assert stats.exec_ms_p50 <= stats.exec_ms_p95 <= stats.exec_ms_max < 2000.0
    assert seen.frames_complete == stats.processed and seen.malformed == 1
    assert seen.datagrams > stats.processed  # several datagrams per frame, plus the junk


def test_background_app_runs_in_its_own_process_and_stops() -> None:
    app = start_background_app("sift", period_ms=100, seed=2)
    assert app.process.is_alive() and app.process.pid is not None
    time.sleep(0.8)
    t = time.monotonic()
    assert app.exec_ms_between(t - 0.8, t)
    stats = app.stop()
    assert not app.process.is_alive()
    assert stats.periods >= 5 and stats.processed == len(app.records)
    assert app.receiver is not None and app.receiver.frames_complete == stats.processed


def test_unknown_background_app_is_refused() -> None:
    with pytest.raises(Exception, match="unknown background app"):
        start_background_app("nope")
