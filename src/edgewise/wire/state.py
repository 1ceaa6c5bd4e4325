"""Module weights as wire frames: state dicts, and a module's structure apart from its weights.

A stage is "a callable module + its state dict": the module's structure travels with its
tensors on the ``meta`` device (no weights), and the weights follow as one frame, so no
tensor data is pickled by our code.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from edgewise.wire.frames import (
    DEFAULT_MAX_DECODED_BYTES,
    Codec,
    TransportError,
    decode,
    encode,
    to_torch,
)

__all__ = ["decode_state_dict", "encode_state_dict", "materialize", "stage_payload"]

_BUFFER_PREFIX = "~buffer:"  # non-persistent buffers travel under this prefix


def encode_state_dict(
    state: Mapping[str, torch.Tensor],
    *,
    compression: Codec = "lz4",
    meta: Mapping[str, Any] | None = None,
) -> bytes:
    """One frame holding a flat state dict (model weights or gradients), order kept."""
    for key, value in state.items():
        if not isinstance(value, torch.Tensor):
            raise TransportError(f"state dict entry {key!r} is not a tensor")
    return encode(state, compression=compression, meta=meta)


def decode_state_dict(
    frame: bytes | bytearray | memoryview, *, max_decoded_bytes: int = DEFAULT_MAX_DECODED_BYTES
) -> dict[str, torch.Tensor]:
    """The state dict in a frame made by :func:`encode_state_dict`, as torch tensors."""
    return to_torch(decode(frame, max_decoded_bytes=max_decoded_bytes))


def stage_payload(module: nn.Module) -> tuple[nn.Module, bytes]:
    """The module's structure with tensors on ``meta`` (no data) and its weights as a frame.

    The frame holds the state dict plus non-persistent buffers (prefixed), so that
    :func:`materialize` rebuilds the module exactly.
    """
    state: dict[str, torch.Tensor] = dict(module.state_dict())
    for name, buf in module.named_buffers():
        if name not in state:
            state[_BUFFER_PREFIX + name] = buf
    skeleton = copy.deepcopy(module).to("meta")
    return skeleton, encode(state, compression="lz4")


def materialize(skeleton: nn.Module, weights: bytes) -> nn.Module:
    """The inverse of :func:`stage_payload`: a CPU module in eval mode holding the weights."""
    tensors = to_torch(decode(weights))
    module = skeleton.to_empty(device="cpu")
    buffers = {k.removeprefix(_BUFFER_PREFIX): v for k, v in tensors.items()
               if k.startswith(_BUFFER_PREFIX)}  # fmt: skip
    module.load_state_dict({k: v for k, v in tensors.items()
                            if not k.startswith(_BUFFER_PREFIX)}, strict=True)  # fmt: skip
    with torch.no_grad():
        for name, value in buffers.items():
            module.get_buffer(name).copy_(value)
    return module.eval()
