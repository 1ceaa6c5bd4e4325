"""The parameter server's checkpoint: its weights, buffers and optimiser state in one frame,
and back (``runtime.ps``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from edgewise.runtime.trainstate import FlatState, codec_for
from edgewise.wire.frames import Codec, decode, encode, to_torch

__all__ = ["checkpoint_frame", "restore", "with_statistics"]


def _tensors(flat: FlatState, params: Mapping[str, torch.nn.Parameter],
             opt: torch.optim.Optimizer) -> dict[str, torch.Tensor]:
    """Weights and buffers as ``w.<name>``, the optimiser's state of each flat parameter as
    ``o.<state>.<p.dtype>``."""
    out = {f"w.{name}": t.detach() for name, t in (*flat.params, *flat.buffers)}
    for key, param in params.items():
        for state, value in opt.state.get(param, {}).items():
            if isinstance(value, torch.Tensor):
                out[f"o.{state}.{key}"] = value
    return out


def checkpoint_frame(flat: FlatState, params: Mapping[str, torch.nn.Parameter],
                     opt: torch.optim.Optimizer, compression: Codec,
                     meta: Mapping[str, Any]) -> bytes:
    """The checkpoint frame, LZ4 only where it pays (``trainstate.codec_for``: weights and
    Adam's moments seldom shrink, and the server is often the smallest device)."""
    state = _tensors(flat, params, opt)
    largest = max(state.values(), key=lambda t: t.numel() * t.element_size())
    return encode(state, compression=codec_for(largest, compression), meta=meta)


def restore(frame: bytes, flat: FlatState, params: Mapping[str, torch.nn.Parameter],
            opt: torch.optim.Optimizer) -> int:
    """Weights, buffers and optimiser state from a checkpoint frame, in place; returns the
    server version it was taken at (a restarted server goes on counting from there)."""
    decoded = decode(frame)
    tensors = to_torch(decoded)
    with torch.no_grad():
        for name, t in (*flat.params, *flat.buffers):
            t.copy_(tensors[f"w.{name}"])
    for key, param in params.items():
        prefix, suffix = "o.", f".{key}"
        state = {k[len(prefix) : -len(suffix)]: v for k, v in tensors.items()
                 if k.startswith(prefix) and k.endswith(suffix)}
        if state:
            opt.state[param] = state
    return int(decoded.meta.get("updates", 0))


def with_statistics(frame: bytes, statistics: bytes, compression: Codec) -> bytes:
    """The checkpoint ``frame`` with the buffers of a ``statistics`` frame (BatchNorm's,
    as re-estimated by an evaluation: ``runtime.evaluate.statistics_frame``) in place of its
    own, encoded as :func:`checkpoint_frame` encodes; its weights, optimiser state and meta
    unchanged. A buffer the checkpoint lacks, or of another shape, is a layout mismatch
    (ValueError)."""
    decoded = decode(frame)
    tensors = dict(to_torch(decoded))
    for name, value in to_torch(decode(statistics)).items():
        if name not in tensors or tensors[name].shape != value.shape:
            raise ValueError(f"the statistics' {name} does not match the checkpoint's layout")
        tensors[name] = value
    largest = max(tensors.values(), key=lambda t: t.numel() * t.element_size())
    return encode(tensors, compression=codec_for(largest, compression), meta=decoded.meta)
