"""Tests of emulated links, cut links, byte counters and ``send``/``receive``."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from edgewise.cluster.model import Link
from edgewise.runtime.shaping import ByteCounter, ByteCounts, LinkBytes, LinkDown, ShapedLink
from edgewise.runtime.transport import carry, receive, send
from edgewise.wire.frames import TransportError


class FakeClock:
    """Records every sleep and advances a virtual time instead of waiting."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def _link(bandwidth_mbps: float = 100.0, latency_ms: float = 5.0) -> Link:
    return Link("ps", "w1", bandwidth_mbps=bandwidth_mbps, latency_ms=latency_ms)


@pytest.mark.parametrize(
    ("mbps", "ms", "size"), [(100.0, 5.0, 1_000_000), (8.0, 0.0, 1), (1.0, 20.0, 0)]
)
def test_transfer_time_is_latency_plus_bits_over_bandwidth(
    mbps: float, ms: float, size: int
) -> None:
    clock = FakeClock()
    shaped = ShapedLink(_link(mbps, ms), sleep=clock.sleep)
    waited = shaped.transmit(size)
    assert waited == pytest.approx(ms / 1e3 + size * 8 / (mbps * 1e6))
    assert clock.sleeps == [waited] and clock.now == waited


def test_time_scale_stretches_emulated_time() -> None:
    clock = FakeClock()
    shaped = ShapedLink(_link(100.0, 10.0), sleep=clock.sleep, time_scale=0.5)
    assert shaped.transmit(1_250_000) == pytest.approx(0.5 * (0.01 + 0.1))


def test_cut_link_raises_link_down_and_counts_nothing() -> None:
    clock, counter = FakeClock(), ByteCounter()
    shaped = ShapedLink(_link(), sleep=clock.sleep)
    shaped.cut()
    assert not shaped.is_up
    with pytest.raises(LinkDown):
        send({"x": torch.ones(4)}, shaped, counter)
    assert issubclass(LinkDown, TransportError)
    assert clock.sleeps == [] and counter.snapshot() == ByteCounts()
    shaped.restore()
    send({"x": torch.ones(4)}, shaped, counter)
    assert counter.snapshot().total.frames == 1


def test_send_shapes_counts_and_receive_returns_the_arrays() -> None:
    # Prepare
    clock, counter = FakeClock(), ByteCounter()
    up, down = ShapedLink(_link(), sleep=clock.sleep), ShapedLink(
        Link("w2", "ps", 50.0, 1.0), sleep=clock.sleep)  # fmt: skip
    grad = np.zeros(10_000, dtype=np.float32)
    # Execute
    frames = [send({"g": grad}, up, counter), send({"g": grad}, up, counter),
              send({"g": grad, "h": torch.ones(3)}, down, counter, compression="none")]  # fmt: skip
    snap = counter.snapshot()
    # Assert
    assert np.array_equal(receive(frames[0])["g"], grad)
    assert clock.sleeps == [up.transfer_seconds(len(frames[0]))] * 2 + [
        down.transfer_seconds(len(frames[2]))]  # fmt: skip
    assert snap.per_link[("ps", "w1")] == LinkBytes(2, 80_000, len(frames[0]) + len(frames[1]))
    assert snap.per_link[("ps", "w2")] == LinkBytes(1, 40_012, len(frames[2]))
    assert snap.total == LinkBytes(3, 120_012, sum(map(len, frames)))
    assert snap.compression_ratio < 1.0
    flat = counter.snapshot_dict()
    assert flat["wire_bytes"] == sum(map(len, frames)) and flat["ps<->w2:frames"] == 1


def test_carry_waits_and_counts_a_frame_of_any_codec_and_nothing_on_a_cut_link() -> None:
    """``carry``: the one call the actors send an already encoded frame through (activations,
    gradients, chunks, checkpoints): the link's time for its wire bytes, then its count."""
    clock, counter = FakeClock(), ByteCounter()
    shaped = ShapedLink(_link(8.0, 0.0), sleep=clock.sleep)

    carry(shaped, 1_000, counter, raw_bytes=4_000)
    carry(shaped, 500, counter)  # raw defaults to the wire bytes (a checkpoint's blob)
    carry(shaped, 250)  # timed, not counted (the weights a profiler pulls back)
    shaped.cut()
    with pytest.raises(LinkDown):
        carry(shaped, 1_000, counter)

    assert clock.sleeps == pytest.approx([1e-3, 5e-4, 2.5e-4])
    assert counter.snapshot().per_link[("ps", "w1")] == LinkBytes(2, 4_500, 1_500)


def test_counter_is_thread_safe_and_snapshots_are_frozen() -> None:
    counter = ByteCounter()

    def work() -> None:
        for _ in range(1000):
            counter.record(("a", "b"), raw_bytes=3, wire_bytes=2)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    snap = counter.snapshot()
    assert snap.total == LinkBytes(8000, 24_000, 16_000)
    with pytest.raises(TypeError):
        snap.per_link[("c", "d")] = LinkBytes()  # type: ignore[index]
    counter.record(("a", "b"), raw_bytes=1, wire_bytes=1)
    assert snap.total.frames == 8000


def test_link_key_is_undirected_and_bad_links_are_rejected() -> None:
    assert ShapedLink(Link("z", "a", 1.0, 0.0)).key == ("a", "z")
    with pytest.raises(TransportError):
        ShapedLink(Link("a", "b", 0.0, 1.0))
