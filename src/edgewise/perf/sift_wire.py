"""The SIFT app's wire format (Deep-Edge §V-A): a frame's features and JPEG as one message,
split into UDP datagrams and reassembled in any order; little-endian headers, no pickle."""

from __future__ import annotations

import math
import struct
from collections import OrderedDict
from typing import Final

import numpy as np
from numpy.typing import NDArray

from edgewise.errors import EdgewiseError

__all__ = [
    "MAX_DATAGRAM", "Reassembler", "WireError", "decode_features", "decode_message",
    "encode_features", "encode_message", "split_message",
]  # fmt: skip

MAX_DATAGRAM: Final = 60_000
_FEAT: Final = struct.Struct("<4sHHI")  # magic, version, descriptor length, keypoints
_MSG: Final = struct.Struct("<4sHHIII")  # magic, version, flags, frame id, feature/jpeg bytes
_DGRAM: Final = struct.Struct("<4sIHHI")  # magic, message id, seq, count, message bytes
_CHUNK: Final = MAX_DATAGRAM - _DGRAM.size
F32 = NDArray[np.float32]


class WireError(EdgewiseError):
    """A features blob, message or datagram is malformed."""


def encode_features(keypoints: F32, descriptors: F32) -> bytes:
    """Keypoints (n, 4) float32 x, y, size, angle and descriptors (n, d) float32, behind an
    8+4-byte header (magic ``EWSF``, version, d, n); little-endian, no pickle."""
    n = keypoints.shape[0]
    dim = descriptors.shape[1] if descriptors.ndim == 2 else 0
    if keypoints.shape != (n, 4) or descriptors.shape[0] != n:
        raise WireError(f"keypoints {keypoints.shape} and descriptors {descriptors.shape}")
    return b"".join([_FEAT.pack(b"EWSF", 1, dim, n), keypoints.astype("<f4").tobytes(),
                     descriptors.astype("<f4").tobytes()])


def decode_features(blob: bytes | memoryview) -> tuple[F32, F32]:
    """The (keypoints, descriptors) in a blob made by :func:`encode_features`."""
    if len(blob) < _FEAT.size:
        raise WireError("features blob shorter than its header")
    magic, version, dim, n = _FEAT.unpack_from(blob)
    if magic != b"EWSF" or version != 1 or len(blob) != _FEAT.size + 4 * n * (4 + dim):
        raise WireError("bad features header or length")
    body = np.frombuffer(blob, dtype="<f4", offset=_FEAT.size)
    return body[: 4 * n].reshape(n, 4).copy(), body[4 * n :].reshape(n, dim).copy()


def encode_message(frame_id: int, features: bytes, jpeg: bytes) -> bytes:
    """One frame's message: header, features blob, JPEG bytes."""
    return _MSG.pack(b"EWSM", 1, 0, frame_id, len(features), len(jpeg)) + features + jpeg


def decode_message(message: bytes) -> tuple[int, F32, F32, bytes]:
    """(frame id, keypoints, descriptors, JPEG bytes) of a message."""
    if len(message) < _MSG.size:
        raise WireError("message shorter than its header")
    magic, version, flags, frame_id, n_feat, n_jpeg = _MSG.unpack_from(message)
    if magic != b"EWSM" or version != 1 or flags or len(message) != _MSG.size + n_feat + n_jpeg:
        raise WireError("bad message header or length")
    view = memoryview(message)[_MSG.size :]
    keypoints, descriptors = decode_features(view[:n_feat])
    return frame_id, keypoints, descriptors, bytes(view[n_feat:])


def split_message(message_id: int, message: bytes) -> list[bytes]:
    """Datagrams of at most :data:`MAX_DATAGRAM` bytes, each with a sequence header."""
    count = max(1, math.ceil(len(message) / _CHUNK))
    if count > 0xFFFF:
        raise WireError(f"message of {len(message)} bytes needs too many datagrams")
    return [_DGRAM.pack(b"EWSD", message_id & 0xFFFFFFFF, seq, count, len(message))
            + message[seq * _CHUNK : (seq + 1) * _CHUNK] for seq in range(count)]


class Reassembler:
    """Rebuilds messages from datagrams in any order, holding at most ``max_pending``
    incomplete messages of at most ``max_message_bytes`` each (oldest evicted first)."""

    def __init__(self, max_pending: int = 8, max_message_bytes: int = 4 << 20) -> None:
        self.max_pending = max_pending
        self.max_message_bytes = max_message_bytes
        self.pending: OrderedDict[int, tuple[int, int, dict[int, bytes]]] = OrderedDict()
        self.malformed = 0
        self.incomplete_dropped = 0

    def feed(self, datagram: bytes) -> bytes | None:
        """The whole message when ``datagram`` completes one, else None; malformed datagrams
        are counted and dropped."""
        try:
            magic, mid, seq, count, total = _DGRAM.unpack_from(datagram)
        except struct.error:
            magic = b""
        chunk = datagram[_DGRAM.size :]
        if (magic != b"EWSD" or seq >= count or total > self.max_message_bytes
                or count != max(1, math.ceil(total / _CHUNK)) or len(chunk) > _CHUNK):
            self.malformed += 1
            return None
        entry = self.pending.get(mid)
        if entry is None:
            while len(self.pending) >= self.max_pending:
                self.pending.popitem(last=False)
                self.incomplete_dropped += 1
            entry = self.pending[mid] = (count, total, {})
        if entry[:2] != (count, total):
            self.malformed += 1
            return None
        entry[2][seq] = chunk
        if len(entry[2]) < count:
            return None
        del self.pending[mid]
        message = b"".join(entry[2][i] for i in range(count))
        if len(message) != total:
            self.malformed += 1
            return None
        return message
