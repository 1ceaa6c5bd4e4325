"""Activation frames: one tensor and a meta dict per frame, lossless (LZ4) or ZFP-bounded."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch

from edgewise.errors import ConfigError
from edgewise.wire.frames import Decoded, TransportError, decode, encode, to_torch

__all__ = ["ActivationCodec", "Compression", "decode_activation", "encode_activation",
           "zfp_available"]

Compression = Literal["lz4", "zfp", "none"]
_ZFP_MAX_NDIM = 4


def zfp_available() -> bool:
    """Whether the optional ``zfpy`` package (ZFP compression) can be imported."""
    try:
        import zfpy  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class ActivationCodec:
    """How activations are compressed on the wire.

    ``"lz4"`` is lossless; ``"zfp"`` applies ZFP in fixed-accuracy mode to float32/float64
    tensors — every element decodes within ``tolerance`` (absolute) of the original — then
    LZ4 on the ZFP stream, as SEIFER §4.3 does; other dtypes, and tensors whose ZFP stream
    would not be smaller than their raw bytes, go lossless with LZ4. The bound holds for
    finite values and applies per hop (each stage decodes and re-encodes). ``"none"``
    sends raw buffers.
    """

    compression: Compression = "lz4"
    tolerance: float = 1e-3

    def __post_init__(self) -> None:
        if self.compression not in ("lz4", "zfp", "none"):
            raise ConfigError(f"unknown compression {self.compression!r}; use lz4, zfp or "
                              "none", field="compression")
        if self.compression == "zfp":
            if not self.tolerance > 0:
                raise ConfigError("the ZFP error bound must be > 0", field="tolerance")
            if not zfp_available():
                raise ConfigError("ZFP needs the zfpy package (pip install zfpy)",
                                  field="compression")


def encode_activation(tensor: torch.Tensor | np.ndarray[Any, Any], meta: dict[str, Any],
                      codec: ActivationCodec) -> bytes:
    """One frame holding ``tensor`` (as ``"x"``, or its ZFP stream) and ``meta``."""
    array = tensor.detach().cpu().numpy() if isinstance(tensor, torch.Tensor) else tensor
    if (codec.compression == "zfp" and array.dtype in (np.float32, np.float64)
            and array.size > 0):
        import zfpy

        flat = array.reshape(_zfp_shape(array.shape))
        stream = zfpy.compress_numpy(np.ascontiguousarray(flat), tolerance=codec.tolerance)
        if len(stream) < array.nbytes:  # else (tiny or padded shapes) lossless is smaller
            zfp = {"shape": list(array.shape), "tolerance": codec.tolerance}
            return encode({"zfp": np.frombuffer(stream, np.uint8)}, compression="lz4",
                          meta=meta | {"zfp": zfp})
    lossless: Literal["lz4", "none"] = "none" if codec.compression == "none" else "lz4"
    return encode({"x": array}, compression=lossless, meta=meta)


def _zfp_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    """At most four dimensions (ZFP's limit), none of size 1 (ZFP pads every dimension to
    blocks of 4, so a batch of one would cost four times its size): leading dimensions fold
    into the first."""
    shape = tuple(n for n in shape if n != 1) or (1,)
    if len(shape) <= _ZFP_MAX_NDIM:
        return shape
    keep = shape[-(_ZFP_MAX_NDIM - 1):]
    return (int(np.prod(shape[: -(_ZFP_MAX_NDIM - 1)])), *keep)


def decode_activation(frame: bytes) -> tuple[torch.Tensor, dict[str, Any]]:
    """The activation tensor and the meta dict of a frame made by :func:`encode_activation`.

    Raises
    ------
    TransportError
        A malformed frame, or a ZFP stream whose size does not match its header.
    """
    decoded: Decoded = decode(frame)
    meta = dict(decoded.meta)
    zfp = meta.pop("zfp", None)
    if zfp is None:
        return to_torch(decoded)["x"], meta
    import zfpy

    array = zfpy.decompress_numpy(decoded.arrays["zfp"].tobytes())
    shape = tuple(int(n) for n in zfp["shape"])
    if array.size != int(np.prod(shape)):
        raise TransportError(f"ZFP stream of {array.size} values, header says {shape}")
    return torch.from_numpy(array.reshape(shape).copy()), meta
