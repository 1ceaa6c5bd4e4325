"""What the parameter server and the workers exchange every batch, kept flat for speed.

:class:`FlatState` moves a model's parameters, their gradients and its buffers into one flat
tensor per dtype each (the parameters become views into them, as in DDP's gradient buckets).
Both sides build the same network, so they agree on the order; a frame carries the flat
tensors as they are (``p.float32`` weights or gradients, ``b.float32``/``b.int64`` buffers)
and loading one is a single copy per dtype. Backward accumulates straight into the flat
gradients. A parameter the batch did not reach travels as a zero gradient (as in DDP).

Buffers (BatchNorm running statistics) travel too: a pull carries them, and a push carries
how this batch changed them (the worker's buffers minus those it pulled), which the server
adds to its own, as it applies gradients: every batch's update counts, a stale one moved
from the statistics it started from (the mean of the pushes' changes in a synchronous step;
step counters add the largest). Without this the server's copy of a BatchNorm network would
never learn its statistics and would validate with wrong ones.

``wire_dtype`` (default ``float32``: as they are) sends the floating parameters' frames, a
pull's weights and a push's gradients, in half precision instead (``bfloat16`` or
``float16``): half the bytes on every link, as Horovod's ``Compression.fp16`` and DDP's
``fp16_compress_hook`` do for gradients. The receiver widens them to ``float32`` at once;
the server's weights and optimiser state stay ``float32`` (the workers compute with a
rounded copy, as mixed-precision training does), buffers and ids travel as they are. A
worker's pushes carry their rounding forward (error feedback, :meth:`FlatState._fed_back`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import lz4.block
import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn

from edgewise.runtime.narrowing import SCALE_SUFFIX, narrow, widen
from edgewise.runtime.shards import shard_range
from edgewise.wire.frames import (
    WIRE_DTYPES,
    Codec,
    Decoded,
    TransportError,
    WireDtype,
    decode,
    encode,
    to_torch,
)

__all__ = ["OFFSETS", "FlatState", "Frame", "Pushed", "codec_for", "frame_view", "mean_pushes"]

OFFSETS = "offsets"
"""A frame's meta key for parameters that travel as a range (``runtime.shards``): where each
flat tensor's range starts."""

#: A transport frame as it travels between the server and a worker.
Frame = bytes | NDArray[np.uint8]


def frame_view(frame: Frame) -> memoryview:
    """The frame's bytes without a copy."""
    return frame.data if isinstance(frame, np.ndarray) else memoryview(frame)


_PROBE_WINDOW = 16 << 10  # four windows of this size, evenly spread, are compressed
_PROBE_GAIN = 0.95  # LZ4 is used only if the probe shrinks below this fraction


def codec_for(tensor: torch.Tensor, compression: Codec) -> Codec:
    """``compression``, unless it is LZ4 and four spread 16 KiB windows of ``tensor`` (the
    frame's largest) do not shrink by 5%: float weights and gradients are such noise, and
    compressing 1.6 MB of them costs about 0.6 ms to save about 2% of the bytes. Only what
    is smaller than the windows goes unprobed (a shard's 200 KB range: 0.06 % saved)."""
    data = tensor.detach().reshape(-1).view(torch.uint8).numpy()
    if compression != "lz4" or data.size < 4 * _PROBE_WINDOW:
        return compression
    starts = np.linspace(0, data.size - _PROBE_WINDOW, 4).astype(np.int64)
    probe = np.concatenate([data[s : s + _PROBE_WINDOW] for s in starts])
    packed = lz4.block.compress(probe, store_size=False)
    return "lz4" if len(packed) < _PROBE_GAIN * probe.size else "none"


def _key(prefix: str, dtype: torch.dtype) -> str:
    return f"{prefix}.{str(dtype).removeprefix('torch.')}"


def _flatten(prefix: str, tensors: Sequence[torch.Tensor]) -> dict[str, torch.Tensor]:
    """One flat tensor per dtype holding ``tensors``, which become views into it."""
    groups: dict[torch.dtype, list[torch.Tensor]] = {}
    for t in tensors:
        groups.setdefault(t.dtype, []).append(t)
    flats: dict[str, torch.Tensor] = {}
    for dtype, group in groups.items():
        flat = torch.cat([t.detach().reshape(-1) for t in group])
        offset = 0
        for t in group:
            t.data = flat[offset : offset + t.numel()].view_as(t)
            offset += t.numel()
        flats[_key(prefix, dtype)] = flat
    return flats


@dataclass(frozen=True, slots=True)
class Pushed:
    """One decoded push: the flat gradients (``p.*``) and buffer changes (``b.*``) it
    carries, and the ids of the samples it trained."""

    flats: dict[str, torch.Tensor]
    ids: NDArray[np.int64]
    base: int = -1  # the server version the gradients were computed on (-1: not sent)


class FlatState:
    """A model's parameters, gradients and buffers in flat tensors (see the module doc).
    ``shard`` (index, count): a shard of a parameter server (``runtime.shards``) steps,
    sends and reads only its range of each flat parameter tensor (:attr:`ranges`)."""

    def __init__(self, model: nn.Module, wire_dtype: WireDtype = "float32",
                 shard: tuple[int, int] = (0, 1)) -> None:
        if wire_dtype not in WIRE_DTYPES:
            raise TransportError(f"wire dtype must be one of {', '.join(WIRE_DTYPES)}, "
                                 f"got {wire_dtype!r}")
        self.model = model
        self.wire: WireDtype = wire_dtype
        self.params = [(n, p) for n, p in model.named_parameters()]
        self.buffers = [(n, b) for n, b in model.named_buffers()]
        self.flats = _flatten("p", [p for _, p in self.params])
        self.flats |= _flatten("b", [b for _, b in self.buffers])
        self.grads: dict[str, torch.Tensor] = {}
        for key, flat in list(self.flats.items()):
            if key.startswith("p."):
                self.grads[key] = torch.zeros_like(flat)
        self.shard = shard
        self.ranges = {k: shard_range(g.numel(), *shard) for k, g in self.grads.items()}
        self._attach_grads()
        self.pulled = {k: v.clone() for k, v in self.flats.items() if k.startswith("b.")}
        self.residuals: dict[str, torch.Tensor] = {}  # a narrowed wire's error feedback
        self.nbytes = sum(t.numel() * t.element_size() for t in self.flats.values())

    def _attach_grads(self) -> None:
        """Point every parameter's ``.grad`` at its slice of the flat gradients."""
        offsets: dict[str, int] = {}
        for _, p in self.params:
            key = _key("p", p.dtype)
            start = offsets.get(key, 0)
            offsets[key] = start + p.numel()
            p.grad = self.grads[key][start : offsets[key]].view_as(p)
        self._grad_ptrs = [p.grad.data_ptr() for _, p in self.params if p.grad is not None]

    def owned(self, key: str, tensor: torch.Tensor | None = None) -> torch.Tensor:
        """This state's range of the flat ``key`` (all of it unless a shard), or of
        ``tensor``, a tensor of its layout: a view."""
        lo, hi = self.ranges[key]
        return (self.flats[key] if tensor is None else tensor)[lo:hi]

    def layout(self) -> dict[str, list[str]]:
        """The parameters' names in each flat parameter tensor, in order."""
        out: dict[str, list[str]] = {}
        for name, p in self.params:
            out.setdefault(_key("p", p.dtype), []).append(name)
        return out

    def optimizer_parameters(self) -> dict[str, nn.Parameter]:
        """The flat parameters as Parameters (sharing storage, with the flat gradients), one
        per dtype, a shard's range of them alone: an element-wise optimiser (Adam, SGD with
        momentum) stepping them updates every parameter exactly as it would one by one, in
        a few large operations instead of a few per parameter (0.7 ms instead of 6 ms for
        MobileNetV2 ×0.35's 314)."""
        out = {}
        for key, flat in self.flats.items():
            if key.startswith("p.") and flat.is_floating_point():
                out[key] = nn.Parameter(self.owned(key))
                out[key].grad = self.owned(key, self.grads[key])
        return out

    def zero_grad(self) -> None:
        for flat in self.grads.values():
            flat.zero_()

    def check_grads(self) -> None:
        """Make sure backward accumulated into the flat gradients (it does in place unless
        something replaced a ``.grad``); re-attach and copy in any that moved."""
        moved = [(p, p.grad) for (_, p), ptr in zip(self.params, self._grad_ptrs, strict=True)
                 if p.grad is None or p.grad.data_ptr() != ptr]
        if moved:
            self._attach_grads()
            with torch.no_grad():
                for p, grad in moved:
                    if grad is not None and p.grad is not None:
                        p.grad.copy_(grad)

    def _narrowed(self, tensors: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """``tensors`` with the float32 parameters' (``p.float32``) in the wire dtype."""
        out: dict[str, torch.Tensor] = {}
        for key, value in tensors.items():
            if key.startswith("p.") and value.dtype == torch.float32:
                out |= narrow(key, value, self.wire)
            else:
                out[key] = value
        return out

    def frame(self, tensors: Mapping[str, torch.Tensor], compression: Codec,
              meta: Mapping[str, Any], narrow: bool = True) -> bytes:
        """A frame of ``tensors`` (this model's flat tensors, or ones of their layout), the
        float32 parameters' narrowed to the wire dtype with ``narrow``; LZ4 where it pays. A
        shard sends its range of each whole flat parameter tensor, and says where it
        starts."""
        if self.shard[1] > 1:
            tensors = {k: self.owned(k, v) if k in self.ranges and
                       v.numel() == self.grads[k].numel() else v for k, v in tensors.items()}
            meta = {**meta, OFFSETS: {k: lo for k, (lo, _) in self.ranges.items()}}
        tensors = self._narrowed(tensors) if narrow else dict(tensors)
        sizes = {k: int(v.numel()) for k, v in tensors.items() if k != "ids"}
        largest = max(tensors.values(), key=lambda t: t.numel() * t.element_size())
        return encode(tensors, compression=codec_for(largest, compression),
                      meta={**meta, "sizes": sizes})

    def weights_frame(self, compression: Codec, meta: Mapping[str, Any], *,
                      narrow: bool = True) -> bytes:
        """Parameters and buffers (what a pull returns); ``narrow=False``: the parameters
        at float32 whatever the wire dtype (what an evaluation of the server's weights
        reads)."""
        return self.frame(self.flats, compression, meta, narrow)

    def gradients_frame(self, ids: NDArray[np.int64], compression: Codec,
                        base: int | None = None) -> bytes:
        """Gradients, the buffers' change since the last pull and the trained samples' ids
        (what a push sends); ``base``: the server version the weights came from."""
        return self.gradients_frames(ids, compression, base)[0]

    def gradients_frames(self, ids: NDArray[np.int64], compression: Codec,
                         base: int | None = None, shards: int = 1) -> list[bytes]:
        """:meth:`gradients_frame` for each of ``shards`` servers (``runtime.shards``): each
        carries its range of the gradients, where it starts, the buffers' change and ids."""
        buffers = {k: self.flats[k] - pulled for k, pulled in self.pulled.items()}
        frames = []
        for index in range(shards):
            bounds = {k: shard_range(g.numel(), index, shards) for k, g in self.grads.items()}
            meta: dict[str, Any] = {} if base is None else {"base": int(base)}
            if shards > 1:
                meta[OFFSETS] = {k: lo for k, (lo, _) in bounds.items()}
            frames.append(self.frame({**self._fed_back(bounds), **buffers,
                                      "ids": torch.from_numpy(ids)},
                                     compression, meta, narrow=False))  # _fed_back narrowed
        return frames

    def _fed_back(self, bounds: Mapping[str, tuple[int, int]]) -> dict[str, torch.Tensor]:
        """The gradients to push, each flat tensor's range in ``bounds``: as they are at
        float32; in a narrower wire dtype with error feedback (Seide et al., 1-bit SGD,
        2014; Karimireddy et al., EF-SGD, 2019): the rounding the last push lost is added
        before rounding this one, and this one's is kept for the next, so the server
        receives every gradient in full over time."""
        if self.wire == "float32":
            return {k: g[slice(*bounds[k])] for k, g in self.grads.items()}
        out = {}
        for key, grad in self.grads.items():
            lo, hi = bounds[key]
            if grad.dtype != torch.float32:
                out[key] = grad[lo:hi]
                continue
            if key not in self.residuals:  # once: setdefault would allocate every push
                self.residuals[key] = torch.zeros_like(grad)
            residual = self.residuals[key][lo:hi]
            residual.add_(grad[lo:hi])
            sent = narrow(key, residual, self.wire)
            residual.sub_(widen(sent)[key])
            out |= sent
        return out

    def _span(self, decoded: Decoded, key: str) -> tuple[int, int]:
        """Where the frame's ``key`` goes in this state's flat tensor: all of it, or the
        range its meta's offsets say (a shard's, which must be this shard's own if this
        state is one); TransportError for a frame that does not fit this model's layout."""
        array = decoded.arrays.get(key)
        want = self.grads.get(key) if key.startswith("p.") else self.flats.get(key)
        sizes = decoded.meta.get("sizes", {})
        if array is None or want is None or sizes.get(key) != array.size:
            raise TransportError(f"frame's {key} does not match this model's layout")
        offsets = decoded.meta.get(OFFSETS, {})
        lo = int(offsets.get(key, 0)) if key in self.ranges else 0
        span = (lo, lo + array.size)
        expected = self.ranges[key] if key in self.ranges and self.shard[1] > 1 else None
        if span[1] > want.numel() or (expected is not None and span != expected) or \
                (key not in offsets and array.size != want.numel()):
            raise TransportError(f"frame's {key} does not match this model's layout")
        return span

    def _check(self, decoded: Decoded, keys: Iterable[str]) -> dict[str, tuple[int, int]]:
        return {key: self._span(decoded, key) for key in keys}

    def load_weights(self, frame: Frame | Decoded, *, change: bool = False) -> None:
        """Copy a weights frame into the model, in place (one copy per flat tensor); with
        ``change``, add its floating parameters instead (``runtime.syncdelta``)."""
        decoded = frame if isinstance(frame, Decoded) else decode(frame_view(frame))
        spans = self._check(decoded, self.flats)
        keys = [*self.flats, *(k + SCALE_SUFFIX for k in self.flats
                               if k + SCALE_SUFFIX in decoded.arrays)]
        owned = widen(to_torch(Decoded({k: decoded.arrays[k] for k in keys}, decoded.dtypes,
                                       decoded.meta)))
        with torch.no_grad():
            for key, whole in self.flats.items():
                flat = whole[slice(*spans[key])]
                if change and key.startswith("p.") and flat.is_floating_point():
                    flat.add_(owned[key])
                else:
                    flat.copy_(owned[key])
            for key, pulled in self.pulled.items():
                pulled.copy_(self.flats[key])

    def read_push(self, frame: Frame) -> Pushed:
        """A gradients frame's flat tensors (owned copies) and ids."""
        decoded = decode(frame_view(frame))
        self._check(decoded, [*self.grads, *(k for k in self.flats if k.startswith("b."))])
        if "ids" not in decoded.arrays:
            raise TransportError("a gradients frame carries the ids of its samples")
        owned = widen(to_torch(decoded))
        ids = owned.pop("ids").numpy().astype(np.int64, copy=False)
        return Pushed(owned, ids, int(decoded.meta.get("base", -1)))

    def apply_push(self, flats: Mapping[str, torch.Tensor]) -> None:
        """Set the gradients a push carried (before a step) and add its buffer changes."""
        with torch.no_grad():
            for key, flat in flats.items():
                if key.startswith("p."):
                    self.owned(key, self.grads[key]).copy_(flat)
                else:
                    self.flats[key].add_(flat)


def mean_pushes(pushes: Sequence[Pushed]) -> dict[str, torch.Tensor]:
    """Sample-weighted mean gradients and the mean buffer changes (the largest for integer
    buffers, which count steps) of the pushes of one synchronous step."""
    total = sum(len(p.ids) for p in pushes)
    out: dict[str, torch.Tensor] = {}
    for key in pushes[0].flats:
        values = [p.flats[key] for p in pushes]
        if key.startswith("p."):
            # accumulated in place, in the pushes' order: one tensor allocated instead of
            # two a push (MobileNetV2 x0.35's four pushes: 0.14 ms instead of 0.67 on this
            # host, and the server of a synchronous step runs on the slowest device)
            mean = torch.zeros_like(values[0])
            for value, push in zip(values, pushes, strict=True):
                mean.add_(value, alpha=len(push.ids) / total)
            out[key] = mean
        elif values[0].is_floating_point():
            out[key] = torch.stack(values).mean(0)
        else:
            out[key] = torch.stack(values).max(0).values
    return out
