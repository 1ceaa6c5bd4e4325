"""The parameter server's checkpoint: its weights, buffers and optimiser state in one frame,
and back (``runtime.ps``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from edgewise.runtime.shards import LAYOUT, SHARD, shard_range
from edgewise.runtime.trainstate import FlatState, codec_for
from edgewise.wire.frames import Codec, decode, encode, to_torch

__all__ = ["checkpoint_frame", "merge_checkpoints", "restore", "with_statistics"]


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
    Adam's moments seldom shrink, and the server is often the smallest device). A shard's
    (``runtime.shards``) holds its range's optimiser state, and says which shard it is and
    the flat parameters' layout, for :func:`merge_checkpoints`."""
    state = _tensors(flat, params, opt)
    largest = max(state.values(), key=lambda t: t.numel() * t.element_size())
    if flat.shard[1] > 1:
        meta = {**meta, SHARD: list(flat.shard), LAYOUT: flat.layout()}
    return encode(state, compression=codec_for(largest, compression), meta=meta)


def restore(frame: bytes, flat: FlatState, params: Mapping[str, torch.nn.Parameter],
            opt: torch.optim.Optimizer) -> int:
    """Weights, buffers and optimiser state from a checkpoint frame, in place; returns the
    server version it was taken at (a restarted server goes on counting from there). A
    shard takes its range of the per-value optimiser state (one server's checkpoint, or
    shards' merged: :func:`merge_checkpoints`)."""
    decoded = decode(frame)
    tensors = to_torch(decoded)
    with torch.no_grad():
        for name, t in (*flat.params, *flat.buffers):
            t.copy_(tensors[f"w.{name}"])
    for key, param in params.items():
        prefix, suffix = "o.", f".{key}"
        lo, hi = flat.ranges[key]
        state = {k[len(prefix) : -len(suffix)]: v[lo:hi].clone() if v.dim() > 0 else v
                 for k, v in tensors.items() if k.startswith(prefix) and k.endswith(suffix)}
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


def _flat_of(tensors: Mapping[str, torch.Tensor], names: Sequence[str]) -> torch.Tensor:
    return torch.cat([tensors[f"w.{n}"].reshape(-1) for n in names])


def _split_into(out: dict[str, torch.Tensor], flat: torch.Tensor, names: Sequence[str]) -> None:
    offset = 0
    for name in names:
        shape = out[f"w.{name}"].shape
        n = out[f"w.{name}"].numel()
        out[f"w.{name}"] = flat[offset : offset + n].reshape(shape).clone()
        offset += n


def merge_checkpoints(frames: Sequence[bytes], compression: Codec) -> bytes:
    """One server's checkpoint (``runtime.pscheckpoint``) from the checkpoints of its
    shards, in any order: each parameter's values from the shard whose range holds them,
    the optimiser's per-value state put together in range order, its step count and the
    buffers (the same on every shard) from shard 0. One frame is returned as it is."""
    if len(frames) == 1:
        return frames[0]
    decoded = sorted((decode(f) for f in frames), key=lambda d: int(d.meta[SHARD][0]))
    count = len(decoded)
    if [int(d.meta[SHARD][0]) for d in decoded] != list(range(count)) or \
            any(int(d.meta[SHARD][1]) != count for d in decoded):
        raise ValueError(f"the checkpoints are not the {count} shards of one server")
    parts = [dict(to_torch(d)) for d in decoded]
    out = dict(parts[0])
    layout: dict[str, list[str]] = decoded[0].meta[LAYOUT]
    for key, names in layout.items():
        flats = [_flat_of(p, names) for p in parts]
        merged = flats[0].clone()
        for index, flat in enumerate(flats):
            lo, hi = shard_range(merged.numel(), index, count)
            merged[lo:hi] = flat[lo:hi]
        _split_into(out, merged, names)
        for name in [k for k in out if k.startswith("o.") and k.endswith(f".{key}")]:
            if out[name].dim() > 0:  # per-value state; a step count is a scalar
                out[name] = torch.cat([p[name].reshape(-1) for p in parts])
    meta: dict[str, Any] = {k: v for k, v in decoded[0].meta.items() if k not in (SHARD, LAYOUT)}
    largest = max(out.values(), key=lambda t: t.numel() * t.element_size())
    return encode(out, compression=codec_for(largest, compression), meta=meta)
