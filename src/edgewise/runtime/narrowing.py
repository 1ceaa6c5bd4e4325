"""Float32 tensors narrowed for the wire and widened back: half precision, or 8-bit integers
with a scale per block.

``bfloat16`` and ``float16`` are casts. ``int8`` is blockwise absmax quantisation: the
tensor is cut into blocks of :data:`BLOCK` elements, each block travels as signed 8-bit
integers ``round(x / s)`` with its float32 scale ``s = max|x| / 127`` beside them under
``key + SCALE_SUFFIX``, so a value loses at most half of ``s``: a quarter of bfloat16's bytes
(plus 4 bytes a block), 2⁻⁸ of the block's largest value where bfloat16 keeps 2⁻⁹ of each
value's own. That is too coarse for weights (small weights beside large ones round to 0) and
is meant for what error feedback carries over (``FlatState._fed_back``'s pushed gradients,
``runtime.syncdelta``'s replies of changes), as in 1-bit SGD (Seide et al., 2014), QSGD's
blockwise scaling (Alistarh et al., NeurIPS 2017) and 8-bit optimiser states' blocks of 256
(Dettmers et al., ICLR 2022), whose block size this takes.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from edgewise.wire.frames import TransportError, WireDtype

__all__ = ["BLOCK", "SCALE_SUFFIX", "narrow", "rounded", "widen"]

BLOCK = 256
SCALE_SUFFIX = ".scale"
_LEVELS = 127.0


def _blocks(n: int) -> int:
    return -(-n // BLOCK)


def _quantise(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` (flat float32) as int8 codes and one float32 scale per block (the whole blocks
    as one view, the last partial block apart: no padded copy)."""
    n = x.numel()
    whole = n // BLOCK * BLOCK
    main, tail = x[:whole].view(-1, BLOCK), x[whole:]
    peaks = main.abs().amax(dim=1)
    if tail.numel():
        peaks = torch.cat([peaks, tail.abs().amax().reshape(1)])
    scale = peaks.div_(_LEVELS)
    # a division, not a reciprocal's product: the reciprocal of a subnormal scale overflows;
    # |x| / (max|x| / 127) <= 127, so the codes need no clamp
    safe = torch.where(scale > 0, scale, torch.ones_like(scale))
    codes = torch.empty(n, dtype=torch.int8)
    codes[:whole].view(-1, BLOCK).copy_(main.div(safe[: whole // BLOCK, None]).round_())
    if tail.numel():
        codes[whole:] = tail.div(safe[-1]).round_()
    return codes, scale


def _dequantise(codes: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    n = codes.numel()
    if scale.numel() != _blocks(n) or scale.dtype != torch.float32 or codes.dtype != torch.int8:
        raise TransportError(f"int8 codes of {n} values need {_blocks(n)} float32 scales, "
                             f"got {scale.numel()} of {scale.dtype}")
    whole = n // BLOCK * BLOCK
    out = torch.empty(n, dtype=torch.float32)
    torch.mul(codes[:whole].view(-1, BLOCK), scale[: whole // BLOCK, None],
              out=out[:whole].view(-1, BLOCK))
    if whole < n:
        torch.mul(codes[whole:], scale[-1], out=out[whole:])
    return out


def narrow(key: str, x: torch.Tensor, wire: WireDtype) -> dict[str, torch.Tensor]:
    """What a float32 tensor under ``key`` travels as on a ``wire`` wire: itself, a cast, or
    int8 codes under ``key`` and their scales under ``key + SCALE_SUFFIX``."""
    if wire == "float32":
        return {key: x}
    if wire == "int8":
        codes, scale = _quantise(x.reshape(-1))
        return {key: codes.view_as(x), key + SCALE_SUFFIX: scale}
    return {key: x.to(getattr(torch, wire))}


def rounded(x: torch.Tensor, wire: WireDtype) -> torch.Tensor:
    """The float32 value a receiver reads for ``x`` sent on a ``wire`` wire."""
    return widen(narrow("x", x, wire))["x"]


def widen(tensors: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A frame's tensors as the sender meant them: half precision widened to float32, int8
    codes with a scale beside them dequantised (the scales dropped); the rest as they are.
    TransportError for a scale without its codes or codes with scales of the wrong size."""
    out: dict[str, torch.Tensor] = {}
    for key, value in tensors.items():
        if key.endswith(SCALE_SUFFIX):
            if key.removesuffix(SCALE_SUFFIX) not in tensors:
                raise TransportError(f"frame carries {key} without its codes")
            continue
        scale = tensors.get(key + SCALE_SUFFIX)
        if scale is not None:
            out[key] = _dequantise(value.reshape(-1), scale.reshape(-1)).view(value.shape)
        elif value.dtype in (torch.bfloat16, torch.float16):
            out[key] = value.float()
        else:
            out[key] = value
    return out
