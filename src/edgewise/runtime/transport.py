"""Tensor transport between actors over (emulated) links: a frame, its transfer time, its bytes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from edgewise.wire.frames import (
    DEFAULT_MAX_DECODED_BYTES,
    Array,
    Codec,
    TensorLike,
    decode,
    encode,
    raw_nbytes,
)

if TYPE_CHECKING:  # shaping imports the wire errors; send only needs the types
    from edgewise.runtime.shaping import ByteCounter, ShapedLink

__all__ = ["carry", "receive", "send"]


def carry(link: ShapedLink, wire_bytes: int, counter: ByteCounter | None = None, *,
          raw_bytes: int | None = None) -> None:
    """The one shaped-link call every actor sends through: wait the link's emulated
    transfer time for ``wire_bytes`` (a frame encoded, and compressed, by its own codec),
    then count them, and the ``raw_bytes`` they carry (default: as many), on ``counter``.

    Raises
    ------
    LinkDown
        The link is cut; nothing is counted.
    """
    link.transmit(wire_bytes)
    if counter is not None:
        counter.record(link.key, raw_bytes=wire_bytes if raw_bytes is None else raw_bytes,
                       wire_bytes=wire_bytes)


def send(
    tensors: Mapping[str, TensorLike],
    link: ShapedLink,
    counter: ByteCounter | None = None,
    *,
    compression: Codec = "lz4",
    meta: Mapping[str, Any] | None = None,
) -> bytes:
    """Encode and compress, wait the link's emulated transfer time, count bytes; the frame.

    Raises
    ------
    LinkDown
        The link is cut; nothing is counted.
    TransportError
        The tensors cannot be encoded (see :func:`encode`).
    """
    frame = encode(tensors, compression=compression, meta=meta)
    carry(link, len(frame), counter, raw_bytes=raw_nbytes(tensors))
    return frame


def receive(
    frame: bytes | bytearray | memoryview, *, max_decoded_bytes: int = DEFAULT_MAX_DECODED_BYTES
) -> dict[str, Array]:
    """The numpy arrays in a frame (see :func:`decode`)."""
    return decode(frame, max_decoded_bytes=max_decoded_bytes).arrays
