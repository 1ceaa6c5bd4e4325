"""Generic inference stage actors (SEIFER §4.3): a model partition pinned to a device that
forwards its output over a shaped link, and the dispatcher's IO endpoint."""

from __future__ import annotations

import threading
import time
from typing import Any

import ray
import torch
from torch import nn

from edgewise.cluster.model import Link
from edgewise.nn.slices import SliceWeights, load_slice
from edgewise.perf.limits import memory_peak, process_peak_bytes, reset_memory_peaks
from edgewise.runtime.emulation import emulated_compute
from edgewise.runtime.shaping import ByteCounter, ShapedLink
from edgewise.runtime.transport import carry
from edgewise.wire.activation import ActivationCodec, decode_activation, encode_activation
from edgewise.wire.state import materialize

__all__ = ["DispatchEndpoint", "StageActor"]


class _Hop:
    """What both senders of the pipeline share: the next hop, the shaped link to it (one
    frame at a time on it: its bandwidth) and the bytes sent over it."""

    def _init_hop(self) -> None:
        self.counter = ByteCounter()
        self._wire = threading.Lock()  # the outgoing link; also guards the next hop
        self._next: Any = None
        self._link: ShapedLink | None = None

    @ray.method(concurrency_group="control")
    def connect(self, next_hop: Any, link: Link) -> None:
        """Send frames to ``next_hop`` (an actor with ``process(frame)``) over ``link``."""
        with self._wire:
            self._next, self._link = next_hop, ShapedLink(link)

    def _forward(self, frame: bytes, raw_bytes: int) -> None:
        """Carry ``frame`` (``raw_bytes`` before compression) over the link to the next hop."""
        with self._wire:
            if self._link is None:
                raise RuntimeError(f"{type(self).__name__} is not connected")
            carry(self._link, len(frame), self.counter, raw_bytes=raw_bytes)
            self._next.process.remote(frame)


@ray.remote(concurrency_groups={"control": 2, "data": 8})  # type: ignore[call-overload]
class StageActor(_Hop):
    """One pipeline stage pinned to its device (SEIFER §4.3.1, the inference pod).

    :meth:`process` decodes a frame, runs the partition under ``emulated_compute(stretch)``,
    encodes the result with ``codec`` and forwards it to the next hop's ``process`` after
    waiting the emulated transfer time of the link between the two devices. Compute is one
    request at a time (the device's CPU) and so is the outgoing link (its bandwidth), but the
    two overlap across requests, like SEIFER's separate runtime and IO containers.

    Parameters
    ----------
    name, device : str
        The actor's name and the device it runs on.
    skeleton : nn.Module
        The partition's structure, tensors on ``meta`` (see :func:`stage_payload`).
    weights : bytes or SliceWeights
        The partition's state dict as a transport frame, or where to read exactly its own
        tensors by name (the model's safetensors shards): then no process holds the model.
    stretch : float
        Emulated seconds per host CPU second (1.0 on a real device).
    codec : ActivationCodec
        How outgoing activations are compressed.
    """

    def __init__(self, name: str, device: str, skeleton: nn.Module,
                 weights: bytes | SliceWeights, stretch: float, codec: ActivationCodec) -> None:
        torch.set_num_threads(1)
        self.name, self.device, self.stretch, self.codec = name, device, stretch, codec
        self.node_peak_reset = reset_memory_peaks()  # this stage's peaks, not its vessel's
        self.module = load_slice(skeleton, weights) if isinstance(weights, SliceWeights) \
            else materialize(skeleton, weights)
        self._init_hop()
        self.processed = 0
        self.compute_s = 0.0  # wall seconds computing: on a real device, its own speed
        self._compute = threading.Lock()

    @ray.method(concurrency_group="control")
    def ping(self) -> str:
        """Liveness probe for the dispatcher; answered even while frames are processed."""
        return self.name

    @ray.method(concurrency_group="control")
    def counts(self) -> dict[str, int]:
        """Frames and bytes this stage sent, and how many frames it processed."""
        return self.counter.snapshot_dict() | {"processed": self.processed}

    @ray.method(concurrency_group="control")
    def timing(self) -> dict[str, float]:
        """Frames processed, the wall seconds spent computing them, the partition's
        parameters, the process's peak resident memory since this stage began (its
        high-water mark, reset when it was built: a vessel's process hosts one member after
        another) and, where the process runs in a memory-limited cgroup whose peak it could
        reset then (a testbed node), that cgroup's peak, limit and limit hits
        (``perf.limits.memory_peak``)."""
        peak = process_peak_bytes()
        node = memory_peak() if self.node_peak_reset else None
        cgroup = {} if node is None else {
            "cgroup_peak_bytes": float(node.peak_bytes),
            "cgroup_limit_bytes": float(node.limit_bytes),
            "cgroup_limit_hits": float(node.limit_hits)}
        return {"processed": float(self.processed), "compute_s": self.compute_s,
                "parameters": float(sum(p.numel() for p in self.module.parameters())),
                "peak_rss_bytes": float(peak)} | cgroup

    @ray.method(concurrency_group="data")
    def process(self, frame: bytes) -> None:
        """Run the partition on one request's activation and forward the result."""
        with self._compute:
            started = time.perf_counter()
            with emulated_compute(self.stretch), torch.inference_mode():
                x, meta = decode_activation(frame)
                y = self.module(x)
                out = encode_activation(y, meta, self.codec)
            self.processed += 1
            self.compute_s += time.perf_counter() - started
        self._forward(out, y.numel() * y.element_size())


@ray.remote(concurrency_groups={"control": 2, "data": 8, "collect": 1})  # type: ignore[call-overload]
class DispatchEndpoint(_Hop):
    """The dispatcher's IO on its device (SEIFER §4.3.2): sends request frames to the first
    stage over the shaped link and keeps the results the last stage sends back."""

    def __init__(self) -> None:
        self._init_hop()
        self._ready = threading.Condition()
        self._results: list[bytes] = []

    @ray.method(concurrency_group="control")
    def ping(self) -> str:
        return "endpoint"

    @ray.method(concurrency_group="control")
    def counts(self) -> dict[str, int]:
        return self.counter.snapshot_dict()

    @ray.method(concurrency_group="data")
    def inject(self, frame: bytes, raw_bytes: int) -> None:
        """Carry one request frame over the link to the first stage."""
        self._forward(frame, raw_bytes)

    @ray.method(concurrency_group="data")
    def process(self, frame: bytes) -> None:
        """A result from the last stage (the last stage shaped the link already)."""
        with self._ready:
            self._results.append(frame)
            self._ready.notify_all()

    @ray.method(concurrency_group="collect")
    def collect(self, wait_s: float) -> list[bytes]:
        """The result frames received so far, waiting up to ``wait_s`` for the first one."""
        with self._ready:
            self._ready.wait_for(lambda: bool(self._results), timeout=wait_s)
            out, self._results = self._results, []
        return out
