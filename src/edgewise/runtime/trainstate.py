"""What the parameter server and the workers exchange every batch, packed flat for speed.

Both sides build the same network, so they agree on the order of its parameters and
buffers (:class:`Layout`); a frame therefore carries one flat array per dtype (``p.float32``
for weights or gradients, ``b.float32``/``b.int64`` for buffers) instead of one tensor per
name, which makes encoding, decoding and loading a handful of memory copies rather than
hundreds of small ones. The frame's meta holds each flat array's length, checked on arrival.

Buffers (BatchNorm running statistics) travel both ways: a worker pushes its buffers beside
its gradients; it pulled them from the server before the batch, so they are the server's
statistics moved one step by this batch, and the server adopts them (async) or their mean
(sync). Without this the server's copy of a BatchNorm network would never learn its
statistics and would validate with wrong ones.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn

from edgewise.nn.data import Dataset
from edgewise.nn.workload import Workload, sample_shape, unpack
from edgewise.runtime.transport import Codec, Decoded, TransportError, decode, encode, to_torch

__all__ = ["Layout", "Pushed", "mean_buffers", "read_frames"]


@dataclass(frozen=True, slots=True)
class Pushed:
    """One decoded push: gradients by parameter (None where the batch gave none), the
    worker's buffers by name, and the ids of the samples it trained."""

    grads: dict[str, torch.Tensor | None]
    buffers: dict[str, torch.Tensor]
    ids: NDArray[np.int64]


class Layout:
    """A model's parameters and buffers in a fixed order, and their flat encodings."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.params = [(n, p) for n, p in model.named_parameters()]
        self.buffers = [(n, b) for n, b in model.named_buffers()]
        self.nbytes = sum(t.numel() * t.element_size() for _, t in (*self.params, *self.buffers))

    @staticmethod
    def _pack(prefix: str, tensors: Sequence[torch.Tensor]) -> dict[str, torch.Tensor]:
        groups: dict[torch.dtype, list[torch.Tensor]] = {}
        for t in tensors:
            groups.setdefault(t.dtype, []).append(t.detach().reshape(-1))
        return {f"{prefix}.{str(dtype).removeprefix('torch.')}": torch.cat(parts)
                for dtype, parts in groups.items()}

    def _frame(self, first: Sequence[torch.Tensor], compression: Codec,
               extra: dict[str, Any], meta: dict[str, Any]) -> bytes:
        tensors = self._pack("p", first) | self._pack("b", [b for _, b in self.buffers])
        sizes = {k: int(v.numel()) for k, v in tensors.items()}
        return encode(tensors | extra, compression=compression, meta=meta | {"sizes": sizes})

    def weights_frame(self, compression: Codec, meta: dict[str, Any]) -> bytes:
        """Parameters and buffers (what a pull returns)."""
        return self._frame([p for _, p in self.params], compression, {}, meta)

    def gradients_frame(self, ids: NDArray[np.int64], compression: Codec) -> bytes:
        """Gradients (zeros where none, listed in ``nograd``), buffers and sample ids."""
        missing = [i for i, (_, p) in enumerate(self.params) if p.grad is None]
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for _, p in self.params]
        return self._frame(grads, compression, {"ids": ids}, {"nograd": missing})

    @staticmethod
    def _walk(decoded: Decoded, prefix: str, entries: Sequence[tuple[str, torch.Tensor]]
              ) -> Iterable[tuple[int, str, int]]:
        """(index, flat array key, start offset) of every entry, in order; TransportError if
        the frame's flat arrays do not match the layout."""
        offsets: dict[str, int] = {}
        sizes = decoded.meta.get("sizes", {})
        for i, (name, t) in enumerate(entries):
            key = f"{prefix}.{str(t.dtype).removeprefix('torch.')}"
            flat = decoded.arrays.get(key)
            if flat is None or sizes.get(key) != flat.size:
                raise TransportError(f"frame lacks {key} for {name} or its size is off")
            start = offsets.get(key, 0)
            offsets[key] = start + t.numel()
            if offsets[key] > flat.size:
                raise TransportError(f"frame's {key} is shorter than the model's layout")
            yield i, key, start

    def load_weights(self, frame: bytes | Decoded) -> None:
        """Copy a weights frame into the model, in place."""
        decoded = decode(frame) if isinstance(frame, bytes | bytearray | memoryview) else frame
        owned = to_torch(decoded)
        with torch.no_grad():
            for prefix, entries in (("p", self.params), ("b", self.buffers)):
                for i, key, start in self._walk(decoded, prefix, entries):
                    target = entries[i][1]
                    target.copy_(owned[key][start : start + target.numel()].view(target.shape))

    def read_push(self, frame: bytes) -> Pushed:
        """A gradients frame as tensors (one copy per flat array; the rest are views)."""
        decoded = decode(frame)
        owned = to_torch(decoded)
        nograd = set(decoded.meta.get("nograd", []))

        def view(key: str, start: int, like: torch.Tensor) -> torch.Tensor:
            return owned[key][start : start + like.numel()].view(like.shape)

        grads: dict[str, torch.Tensor | None] = {
            self.params[i][0]: None if i in nograd else view(key, start, self.params[i][1])
            for i, key, start in self._walk(decoded, "p", self.params)}
        buffers = {self.buffers[i][0]: view(key, start, self.buffers[i][1])
                   for i, key, start in self._walk(decoded, "b", self.buffers)}
        if "ids" not in owned:
            raise TransportError("a gradients frame carries the ids of its samples")
        return Pushed(grads, buffers, owned["ids"].numpy().astype(np.int64, copy=False))


def mean_buffers(pushed: Iterable[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """The mean of floating buffers and the largest of integer ones (step counters)."""
    items = [p for p in pushed if p]
    if not items:
        return {}
    out: dict[str, torch.Tensor] = {}
    for name in items[0]:
        values = torch.stack([p[name] for p in items])
        out[name] = values.mean(0) if values.is_floating_point() else values.max(0).values
    return out


def read_frames(frames: Iterable[bytes], workload: Workload) -> Dataset:
    """The samples in data-store frames, decoded (images decoded here, at the receiver)."""
    shape = sample_shape(workload) or ()
    spec = workload.data
    parts = []
    for frame in frames:
        decoded = decode(frame)
        if spec is None or "blob" not in decoded.arrays:
            arrays = decoded.arrays
            parts.append(Dataset(np.asarray(arrays["x"], np.float32).copy(),
                                 arrays["y"].astype(np.int64), arrays["ids"].astype(np.int64)))
        else:
            parts.append(unpack(decoded.arrays, decoded.meta, spec, shape))
    if not parts:
        return Dataset(np.zeros((0, *shape), np.float32), np.zeros(0, np.int64),
                       np.zeros(0, np.int64))
    return Dataset(np.concatenate([p.x for p in parts]), np.concatenate([p.y for p in parts]),
                   np.concatenate([p.ids for p in parts]))
