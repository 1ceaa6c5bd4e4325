"""Emulated links: bandwidth and latency shaping, cut links, and byte counters."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from edgewise.cluster.model import Link
from edgewise.wire.frames import TransportError

__all__ = ["ByteCounter", "ByteCounts", "LinkBytes", "LinkDown", "ShapedLink"]

LinkKey = tuple[str, str]


class LinkDown(TransportError):
    """The link is cut (by the fault injector); nothing went through."""


@dataclass(frozen=True, slots=True)
class LinkBytes:
    """Frames and bytes sent over one link: ``raw`` before compression, ``wire`` as framed."""

    frames: int = 0
    raw_bytes: int = 0
    wire_bytes: int = 0

    def plus(self, raw_bytes: int, wire_bytes: int) -> LinkBytes:
        return LinkBytes(self.frames + 1, self.raw_bytes + raw_bytes, self.wire_bytes + wire_bytes)


@dataclass(frozen=True, slots=True)
class ByteCounts:
    """A snapshot of a :class:`ByteCounter`: totals and, per link key, its own counts."""

    total: LinkBytes = LinkBytes()
    per_link: Mapping[LinkKey, LinkBytes] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def compression_ratio(self) -> float:
        """Wire bytes over raw bytes (1.0 when nothing was sent)."""
        return self.total.wire_bytes / self.total.raw_bytes if self.total.raw_bytes else 1.0

    def as_dict(self) -> dict[str, int]:
        """Flat counts for metrics: ``frames``, ``raw_bytes``, ``wire_bytes``, and the same
        prefixed ``"a<->b:"`` per link."""
        out = {"frames": self.total.frames, "raw_bytes": self.total.raw_bytes,
               "wire_bytes": self.total.wire_bytes}  # fmt: skip
        for (a, b), c in self.per_link.items():
            prefix = f"{a}<->{b}:"
            out |= {prefix + "frames": c.frames, prefix + "raw_bytes": c.raw_bytes,
                    prefix + "wire_bytes": c.wire_bytes}  # fmt: skip
        return out


class ByteCounter:
    """Thread-safe accumulator of bytes sent, per link and in total."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._per_link: dict[LinkKey, LinkBytes] = {}

    def record(self, key: LinkKey, *, raw_bytes: int, wire_bytes: int) -> None:
        """Count one frame of ``wire_bytes`` carrying ``raw_bytes`` of tensors over ``key``."""
        with self._lock:
            self._per_link[key] = self._per_link.get(key, LinkBytes()).plus(raw_bytes, wire_bytes)

    def snapshot(self) -> ByteCounts:
        """The counts so far, frozen."""
        with self._lock:
            per_link = dict(self._per_link)
        total = LinkBytes(
            sum(c.frames for c in per_link.values()),
            sum(c.raw_bytes for c in per_link.values()),
            sum(c.wire_bytes for c in per_link.values()),
        )
        return ByteCounts(total, MappingProxyType(per_link))

    def snapshot_dict(self) -> dict[str, int]:
        """:meth:`ByteCounts.as_dict` of a fresh snapshot."""
        return self.snapshot().as_dict()


class ShapedLink:
    """A :class:`~edgewise.cluster.model.Link` emulated on one machine.

    A frame of ``n`` bytes takes ``latency_ms / 1e3 + n * 8 / (bandwidth_mbps * 1e6)``
    seconds (``Link.transfer_seconds``), stretched by ``time_scale``; :meth:`transmit`
    sleeps that long. The fault injector cuts and restores the link.

    Parameters
    ----------
    link : Link
        Bandwidth and latency to emulate.
    sleep : Callable[[float], None]
        How to wait; ``time.sleep`` by default, a fake clock's advance in tests.
    time_scale : float
        Multiplies every emulated time (``0.1`` runs ten times faster than the link).
    """

    def __init__(
        self,
        link: Link,
        *,
        sleep: Callable[[float], None] = time.sleep,
        time_scale: float = 1.0,
    ) -> None:
        if link.bandwidth_mbps <= 0 or link.latency_ms < 0 or time_scale < 0:
            raise TransportError(f"link {link.a}-{link.b} needs bandwidth > 0, latency >= 0")
        self.link = link
        self._sleep = sleep
        self._time_scale = time_scale
        self._up = threading.Event()
        self._up.set()

    @property
    def key(self) -> LinkKey:
        """The endpoints, sorted: the link is undirected."""
        a, b = sorted((self.link.a, self.link.b))
        return a, b

    @property
    def is_up(self) -> bool:
        return self._up.is_set()

    def cut(self) -> None:
        """Drop the link: every later :meth:`transmit` raises :class:`LinkDown`."""
        self._up.clear()

    def restore(self) -> None:
        """Bring a cut link back."""
        self._up.set()

    def transfer_seconds(self, size_bytes: int) -> float:
        """Emulated seconds to carry ``size_bytes`` (latency + serialisation)."""
        return self.link.transfer_seconds(size_bytes) * self._time_scale

    def transmit(self, size_bytes: int) -> float:
        """Wait the emulated transfer time of a frame; returns the seconds waited.

        Raises
        ------
        LinkDown
            The link is cut.
        """
        if not self.is_up:
            raise LinkDown(f"link {self.link.a}-{self.link.b} is down")
        seconds = self.transfer_seconds(size_bytes)
        self._sleep(seconds)
        return seconds
