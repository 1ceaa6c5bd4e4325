"""Model-parallel training stages (SROLE §IV, model parallelism of [8]): one actor per layer
partition, forward activations to the next partition, activation gradients back.

Each stage owns its partition's parameters and its own optimizer and steps it as soon as its
part of the backward pass is done. Activations, activation gradients and the labels (in the
frame's JSON meta) travel as transport frames (:func:`~edgewise.wire.activation.
encode_activation`); the sending stage waits the emulated transfer time of the link to the
receiving device (nothing when both partitions share a device). Compute — decoding, the
partition's forward or backward, encoding — runs under ``emulated_compute(stretch)``.
"""

from __future__ import annotations

import time
from typing import Any

import ray
import torch
import torch.nn.functional as F
from torch import nn

from edgewise.cluster.model import Link
from edgewise.nn.models import make_optimizer
from edgewise.runtime.emulation import emulated_compute
from edgewise.runtime.shaping import ByteCounter, ShapedLink
from edgewise.runtime.transport import carry
from edgewise.wire.activation import ActivationCodec, decode_activation, encode_activation
from edgewise.wire.state import encode_state_dict, materialize

__all__ = ["TrainStage"]


@ray.remote(max_concurrency=1)  # type: ignore[call-overload]
class TrainStage:
    """One partition of a model-parallel training job, pinned to its device.

    Parameters
    ----------
    name, device : str
        The actor's name and the device it runs on.
    skeleton : nn.Module
        The partition's structure, tensors on ``meta`` (see ``stage_payload``).
    weights : bytes
        The partition's state dict as a transport frame.
    stretch : float
        Emulated seconds per host CPU second (1.0 on a real device).
    optimizer, lr : str, float
        This stage's optimizer (``make_optimizer``: "sgd" or "adam") and learning rate.
    codec : ActivationCodec
        How outgoing activations and gradients are compressed.
    """

    def __init__(self, name: str, device: str, skeleton: nn.Module, weights: bytes,
                 stretch: float, optimizer: str, lr: float, codec: ActivationCodec) -> None:
        torch.set_num_threads(1)
        self.name, self.device, self.stretch, self.codec = name, device, stretch, codec
        self.module = materialize(skeleton, weights).train()
        self.optimizer = make_optimizer(optimizer, self.module, lr)
        self.counter = ByteCounter()
        self.first = self.last = True
        self._next: ShapedLink | None = None
        self._prev: ShapedLink | None = None
        self._input: ShapedLink | None = None
        self._saved: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        self._seconds: dict[int, list[float]] = {}  # step -> [compute, transfer]

    def connect(self, prev_link: Link | None, next_link: Link | None, *, first: bool,
                last: bool, input_link: Link | None = None) -> str:
        """Set the links to the previous and next partitions' devices (``None``: same device
        or no neighbour), whether this stage is the first or the last one, and (first stage)
        the link from the device where the training batch originates."""
        self._prev = ShapedLink(prev_link) if prev_link is not None else None
        self._next = ShapedLink(next_link) if next_link is not None else None
        self._input = ShapedLink(input_link) if input_link is not None else None
        self.first, self.last = first, last
        return self.name

    def forward(self, frame: bytes) -> bytes:
        """Run the partition on one batch's activation. A middle stage keeps its input and
        output for the backward pass and sends the output on; the last stage computes the
        cross-entropy loss against ``meta["labels"]``, runs its backward pass, steps its
        optimizer and sends the gradient of its input back (loss in ``meta["loss"]``). The
        first stage first waits the batch's transfer time from its origin device, if any."""
        t0 = time.perf_counter()
        if self.first and self._input is not None:
            carry(self._input, len(frame))
        t1 = time.perf_counter()
        with emulated_compute(self.stretch):
            x, meta = decode_activation(frame)
            x.requires_grad_(not self.first)
            y = self.module(x)
            if self.last:
                loss = F.cross_entropy(y, torch.tensor(meta["labels"], dtype=torch.int64))
                back = {k: v for k, v in meta.items() if k != "labels"}  # not needed upstream
                out = self._step(x, y, loss, None, back | {"loss": float(loss.detach())})
            else:
                self._saved[int(meta["step"])] = (x, y)
                out = encode_activation(y, meta, self.codec)
        t2 = time.perf_counter()
        self._send(self._prev if self.last else self._next, out,
                   (x if self.last else y).numel() * 4)
        self._account(int(meta["step"]), t2 - t1, t1 - t0 + time.perf_counter() - t2)
        return out

    def backward(self, frame: bytes) -> bytes:
        """Back-propagate the gradient of this stage's output (from the next stage) through
        the partition, step the optimizer and send the gradient of the input back."""
        t0 = time.perf_counter()
        with emulated_compute(self.stretch):
            grad, meta = decode_activation(frame)
            x, y = self._saved.pop(int(meta["step"]))
            out = self._step(x, y, None, grad, meta)
        t1 = time.perf_counter()
        self._send(self._prev, out, x.numel() * 4)
        self._account(int(meta["step"]), t1 - t0, time.perf_counter() - t1)
        return out

    def _step(self, x: torch.Tensor, y: torch.Tensor, loss: torch.Tensor | None,
              grad: torch.Tensor | None, meta: dict[str, Any]) -> bytes:
        """Backward from ``loss`` (or ``y`` with ``grad``), optimizer step; the input's
        gradient as a frame (an empty tensor on the first stage)."""
        self.optimizer.zero_grad(set_to_none=True)
        if loss is not None:
            loss.backward()  # type: ignore[no-untyped-call]
        else:
            y.backward(grad)  # type: ignore[no-untyped-call]
        self.optimizer.step()
        back = x.grad if (x.grad is not None and not self.first) else torch.zeros(0)
        return encode_activation(back, meta, self.codec)

    def _send(self, link: ShapedLink | None, frame: bytes, raw_bytes: int) -> None:
        """Wait the emulated transfer time of ``frame`` over ``link`` and count its bytes."""
        if link is not None:
            carry(link, len(frame), self.counter, raw_bytes=raw_bytes)

    def _account(self, step: int, compute_s: float, transfer_s: float) -> None:
        seconds = self._seconds.setdefault(step, [0.0, 0.0])
        seconds[0] += compute_s
        seconds[1] += transfer_s

    def gradients(self) -> bytes:
        """The parameter gradients of the last backward pass (the step keeps them), as a
        frame."""
        grads = {k: p.grad for k, p in self.module.named_parameters() if p.grad is not None}
        return encode_state_dict(grads, compression="none")

    def weights(self) -> bytes:
        """The partition's current state dict, as a frame."""
        return encode_state_dict(dict(self.module.state_dict()), compression="none")

    def stats(self) -> dict[str, Any]:
        """Per iteration (in step order) the seconds spent computing (emulated, decoding and
        encoding included) and sending; the frames and bytes sent in total."""
        counts = self.counter.snapshot()
        steps = sorted(self._seconds)
        return {"compute_s": [self._seconds[k][0] for k in steps],
                "transfer_s": [self._seconds[k][1] for k in steps],
                "frames": counts.total.frames, "wire_bytes": counts.total.wire_bytes}
