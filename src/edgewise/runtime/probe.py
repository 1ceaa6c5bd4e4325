"""An iperf-like bandwidth probe between any two devices over the transport (SEIFER §4.1 (1))."""

from __future__ import annotations

import time
import uuid
from typing import Any

import numpy as np
import ray

from edgewise.cluster.model import Link
from edgewise.errors import ConfigError
from edgewise.runtime.ray_cluster import RayRuntime
from edgewise.runtime.shaping import LinkDown, ShapedLink
from edgewise.wire.frames import decode, encode

__all__ = ["ProbeActor", "measure_bandwidth", "measure_link_matrix"]

_PROBE_MEMORY_MB = 32


@ray.remote
class ProbeActor:
    """One end of a probe: :meth:`blast` sends frames through the shaped link to a peer's
    :meth:`receive`, which timestamps every arrival (on its own clock only); calls run one
    at a time, in the order they were sent."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.arrivals: list[tuple[float, int]] = []

    def ready(self) -> str:
        return self.device

    def receive(self, frame: bytes) -> None:
        """Validate one probe frame and record its arrival time and size."""
        if not decode(frame).meta.get("warmup"):
            self.arrivals.append((time.perf_counter(), len(frame)))

    def reset(self) -> None:
        """Forget the arrivals so far (the actor measures another link next)."""
        self.arrivals = []

    def report(self) -> tuple[int, float]:
        """Bytes that arrived after the first frame, and seconds from first to last arrival."""
        if len(self.arrivals) < 2:
            return 0, 0.0
        nbytes = sum(size for _, size in self.arrivals[1:])
        return nbytes, self.arrivals[-1][0] - self.arrivals[0][0]

    def blast(self, peer: Any, link: Link, size_bytes: int, frame_bytes: int,
              seed: int) -> float:
        """Send ``size_bytes`` of incompressible payload in frames; returns the seconds from
        the first frame handed to the transport to the last (this end's clock)."""
        shaped = ShapedLink(link)
        payload = np.random.default_rng(seed).integers(0, 256, frame_bytes, dtype=np.uint8)
        n = max(2, -(-size_bytes // frame_bytes))
        warmup = encode({"probe": payload}, compression="none", meta={"warmup": True})
        ray.get(peer.receive.remote(warmup))  # one-time costs stay out of the measurement
        refs, due = [], time.perf_counter()
        first = last = 0.0
        for seq in range(n):
            frame = encode({"probe": payload}, compression="none", meta={"seq": seq})
            if not shaped.is_up:
                raise LinkDown(f"link {link.a}-{link.b} is down")
            # Back to back, like a NIC: the call overhead overlaps the next frame's wire time.
            # A sender that fell behind its schedule (a loaded host) starts the frame now, not
            # at the time it missed: a link never catches up above its rate, and catching up
            # had read 51 Mbit/s on a 10 Mbit/s link in a suite run (2026-12-06)
            due = max(due, time.perf_counter()) + shaped.transfer_seconds(len(frame))
            time.sleep(max(0.0, due - time.perf_counter()))
            last = time.perf_counter()
            first = first or last
            refs.append(peer.receive.remote(frame))
        ray.get(refs)
        return last - first


def measure_bandwidth(runtime: RayRuntime, a: str, b: str, size_bytes: int = 1_000_000,
                      frame_bytes: int = 65_536, seed: int = 0) -> float:
    """Measure the bandwidth from device ``a`` to device ``b``, Mbit/s, like an iperf run.

    A probe actor on each device; the one on ``a`` sends ``size_bytes`` in frames of
    ``frame_bytes`` (random bytes, uncompressed) through the emulated link, and the one on
    ``b`` measures the rate at which frames arrive: wire bytes after the first frame over
    the time from the first to the last arrival. Frames leave back to back at the link's
    emulated rate (each one's latency plus serialisation time after the previous one's), so
    the actor-call overhead is hidden unless the transport cannot keep up — then the probe
    shows the lower rate that really gets through, as iperf would.

    Parameters
    ----------
    runtime : RayRuntime
        The Ray instance hosting the cluster.
    a, b : str
        Sending and receiving device.
    size_bytes : int
        Payload to send (at least two frames go).
    frame_bytes : int
        Payload bytes per frame.
    seed : int
        Seed of the random payload.

    Returns
    -------
    float
        Measured Mbit/s (1e6 bits per second).

    Raises
    ------
    ConfigError
        ``a == b`` or a size that is not positive.
    """
    if a == b:
        raise ConfigError("probe needs two different devices", field="devices")
    if size_bytes <= 0 or frame_bytes <= 0:
        raise ConfigError("size_bytes and frame_bytes must be > 0", field="size_bytes")
    tag = uuid.uuid4().hex[:8]
    sender = ProbeActor.options(  # type: ignore[attr-defined]
        **runtime.actor_options(a, _PROBE_MEMORY_MB, f"probe-{a}-{tag}")).remote(a)
    receiver = ProbeActor.options(  # type: ignore[attr-defined]
        **runtime.actor_options(b, _PROBE_MEMORY_MB, f"probe-{b}-{tag}")).remote(b)
    try:
        ray.get([sender.ready.remote(), receiver.ready.remote()])
        sending = ray.get(sender.blast.remote(receiver, runtime.cluster.link(a, b), size_bytes,
                                              frame_bytes, seed))
        nbytes, seconds = ray.get(receiver.report.remote())
        seconds = max(seconds, sending)  # see _rate
    finally:
        ray.kill(sender)
        ray.kill(receiver)
    return _rate(nbytes, seconds)


def _rate(nbytes: int, seconds: float) -> float:
    """Mbit/s of ``nbytes`` over ``seconds``: the longer of the receiver's span (first to
    last arrival) and the sender's (first to last frame sent). The data cannot have crossed
    faster than either end saw it: a receiver delayed by a loaded host takes the frames in a
    burst, and its span alone read 204 Mbit/s on a 10 Mbit/s link in a fresh clone's suite
    (2026-12-05); a sender whose calls return before the bytes leave has the shorter span."""
    return float(nbytes * 8 / seconds / 1e6) if seconds > 0 else float("inf")


def measure_link_matrix(runtime: RayRuntime, devices: list[str], size_bytes: int = 1_000_000,
                        frame_bytes: int = 65_536, seed: int = 0) -> np.ndarray[Any, Any]:
    """Every pair's rate, Mbit/s of wall time, as SEIFER measures its links with iPerf: one
    probe actor per device (started once), each pair probed once in one direction over the
    link the runtime's transport uses (the kernel shapes it on a testbed), the matrix
    symmetric with zeros on its diagonal, rows and columns in ``devices``' order."""
    tag = uuid.uuid4().hex[:8]
    actors = [ProbeActor.options(  # type: ignore[attr-defined]
        **runtime.actor_options(d, _PROBE_MEMORY_MB, f"probe-{d}-{tag}")).remote(d)
        for d in devices]
    out = np.zeros((len(devices), len(devices)))
    try:
        ray.get([a.ready.remote() for a in actors])
        for i, a in enumerate(devices):
            for j in range(i + 1, len(devices)):
                ray.get(actors[j].reset.remote())
                sending = ray.get(actors[i].blast.remote(
                    actors[j], runtime.transport_link(a, devices[j]), size_bytes, frame_bytes,
                    seed))
                nbytes, seconds = ray.get(actors[j].report.remote())
                out[i, j] = out[j, i] = _rate(nbytes, max(seconds, sending))
    finally:
        for actor in actors:
            ray.kill(actor)
    return out
