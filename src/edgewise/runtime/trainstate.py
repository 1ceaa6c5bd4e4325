"""What the parameter server and the workers exchange besides gradients: the model's state.

Weights travel with the model's buffers (BatchNorm running statistics). A worker pushes its
buffers after each batch beside its gradients, ``~b.<name>``: it pulled them from the server
before the batch, so they are the server's statistics moved one step by this batch, and the
server adopts them (async) or their mean (sync). Without this the server's copy of a
BatchNorm network would never learn its statistics and would validate with wrong ones.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import torch
from torch import nn

from edgewise.nn.data import Dataset
from edgewise.nn.workload import Workload, sample_shape, unpack
from edgewise.runtime.transport import decode

__all__ = ["BUFFER_PREFIX", "apply_buffers", "apply_state", "buffers_of", "mean_buffers",
           "read_frames", "split_buffers", "state_of"]

BUFFER_PREFIX = "~b."


def state_of(model: nn.Module) -> dict[str, torch.Tensor]:
    """Parameters and buffers by name, detached (what a pull returns)."""
    out = {n: p.detach() for n, p in model.named_parameters()}
    out |= {n: b.detach() for n, b in model.named_buffers()}
    return out


def apply_state(model: nn.Module, state: Mapping[str, torch.Tensor]) -> None:
    """Copy pulled parameters and buffers into ``model`` (names absent from ``state`` are
    left alone, so a weights frame without buffers still loads)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(state[name])
    apply_buffers(model, state)


def apply_buffers(model: nn.Module, state: Mapping[str, torch.Tensor]) -> None:
    """Copy the buffers named in ``state`` into ``model`` (the others are left alone)."""
    with torch.no_grad():
        for name, b in model.named_buffers():
            if name in state:
                b.copy_(state[name])


def buffers_of(model: nn.Module) -> dict[str, torch.Tensor]:
    """The model's buffers under :data:`BUFFER_PREFIX` (pushed beside the gradients)."""
    return {BUFFER_PREFIX + n: b.detach() for n, b in model.named_buffers()}


def split_buffers(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Remove and return the pushed buffers (names without the prefix) from ``tensors``."""
    names = [k for k in tensors if k.startswith(BUFFER_PREFIX)]
    return {k[len(BUFFER_PREFIX):]: tensors.pop(k) for k in names}


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
