"""Pipeline stages of SEIFER §4.3: model partitions, activation frames and the stage actor.

A stage is "a callable module + its state dict": the module's structure travels to the
actor with its tensors on the ``meta`` device (no weights), and the weights follow as one
transport frame, so no tensor data is pickled by our code. Any ``nn.Module`` works — a slice
of an ``nn.Sequential`` (:func:`split_sequential`) or a ``torch.fx`` ``GraphModule``.
"""

from __future__ import annotations

import copy
import itertools
import threading
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import ray
import torch
from torch import nn

from edgewise.cluster.model import Link
from edgewise.errors import ConfigError
from edgewise.runtime.emulation import emulated_compute
from edgewise.runtime.shaping import ByteCounter, ShapedLink
from edgewise.runtime.transport import Decoded, TransportError, decode, encode, to_torch

__all__ = [
    "ActivationCodec", "Compression", "DispatchEndpoint", "StageActor", "decode_activation",
    "encode_activation", "materialize", "split_sequential", "stage_payload", "zfp_available",
]  # fmt: skip

Compression = Literal["lz4", "zfp", "none"]
_BUFFER_PREFIX = "~buffer:"  # non-persistent buffers travel under this prefix
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


def split_sequential(model: nn.Module, cuts: tuple[int, ...] | list[int]) -> list[nn.Module]:
    """Split an ``nn.Sequential`` at child boundaries into contiguous partitions.

    Parameters
    ----------
    model : nn.Module
        An ``nn.Sequential``; its children are the segments of the chain.
    cuts : sequence of int
        Boundaries as in :class:`~edgewise.pipeline.problem.PipelinePlan`: partition ``k``
        runs children ``cuts[k] .. cuts[k + 1] - 1``; ``cuts[0] == 0`` and ``cuts[-1]`` is the
        number of children, strictly increasing.

    Returns
    -------
    list of nn.Module
        One ``nn.Sequential`` per partition, sharing the model's parameters (not copies).

    Raises
    ------
    ConfigError
        The model is not an ``nn.Sequential`` or the cuts are not valid boundaries.
    """
    if not isinstance(model, nn.Sequential):
        raise ConfigError(f"{type(model).__name__} is not an nn.Sequential; split it with "
                          "torch.fx first", field="model")
    children = list(model.children())
    bounds = list(cuts)
    ok = len(bounds) >= 2 and bounds[0] == 0 and bounds[-1] == len(children)
    if not ok or any(b <= a for a, b in itertools.pairwise(bounds)):
        raise ConfigError(f"cuts {bounds} must rise strictly from 0 to {len(children)}",
                          field="cuts")
    return [nn.Sequential(*children[a:b]) for a, b in itertools.pairwise(bounds)]


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
    """At most four dimensions (ZFP's limit): leading dimensions fold into the first."""
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


@ray.remote(concurrency_groups={"control": 2, "data": 8})  # type: ignore[call-overload]
class StageActor:
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
    weights : bytes
        The partition's state dict as a transport frame.
    stretch : float
        Emulated seconds per host CPU second (1.0 on a real device).
    codec : ActivationCodec
        How outgoing activations are compressed.
    """

    def __init__(self, name: str, device: str, skeleton: nn.Module, weights: bytes,
                 stretch: float, codec: ActivationCodec) -> None:
        torch.set_num_threads(1)
        self.name, self.device, self.stretch, self.codec = name, device, stretch, codec
        self.module = materialize(skeleton, weights)
        self.counter = ByteCounter()
        self.processed = 0
        self._compute = threading.Lock()
        self._wire = threading.Lock()  # the outgoing link; also guards the next hop
        self._next: Any = None
        self._link: ShapedLink | None = None

    @ray.method(concurrency_group="control")
    def connect(self, next_hop: Any, link: Link) -> None:
        """Send results to ``next_hop`` (an actor with ``process(frame)``) over ``link``."""
        with self._wire:
            self._next, self._link = next_hop, ShapedLink(link)

    @ray.method(concurrency_group="control")
    def ping(self) -> str:
        """Liveness probe for the dispatcher; answered even while frames are processed."""
        return self.name

    @ray.method(concurrency_group="control")
    def counts(self) -> dict[str, int]:
        """Frames and bytes this stage sent, and how many frames it processed."""
        return self.counter.snapshot_dict() | {"processed": self.processed}

    @ray.method(concurrency_group="data")
    def process(self, frame: bytes) -> None:
        """Run the partition on one request's activation and forward the result."""
        with self._compute, emulated_compute(self.stretch), torch.inference_mode():
            x, meta = decode_activation(frame)
            y = self.module(x)
            out = encode_activation(y, meta, self.codec)
            self.processed += 1
        with self._wire:
            if self._link is None:
                raise RuntimeError(f"stage {self.name} is not connected")
            self._link.transmit(len(out))
            self.counter.record(self._link.key, raw_bytes=y.numel() * y.element_size(),
                                wire_bytes=len(out))
            self._next.process.remote(out)


@ray.remote(concurrency_groups={"control": 2, "data": 8, "collect": 1})  # type: ignore[call-overload]
class DispatchEndpoint:
    """The dispatcher's IO on its device (SEIFER §4.3.2): sends request frames to the first
    stage over the shaped link and keeps the results the last stage sends back."""

    def __init__(self) -> None:
        self.counter = ByteCounter()
        self._wire = threading.Lock()
        self._ready = threading.Condition()
        self._results: list[bytes] = []
        self._next: Any = None
        self._link: ShapedLink | None = None

    @ray.method(concurrency_group="control")
    def connect(self, next_hop: Any, link: Link) -> None:
        """Send requests to ``next_hop`` (the first stage) over ``link``."""
        with self._wire:
            self._next, self._link = next_hop, ShapedLink(link)

    @ray.method(concurrency_group="control")
    def ping(self) -> str:
        return "endpoint"

    @ray.method(concurrency_group="control")
    def counts(self) -> dict[str, int]:
        return self.counter.snapshot_dict()

    @ray.method(concurrency_group="data")
    def inject(self, frame: bytes, raw_bytes: int) -> None:
        """Carry one request frame over the link to the first stage."""
        with self._wire:
            assert self._link is not None, "endpoint not connected"
            self._link.transmit(len(frame))
            self.counter.record(self._link.key, raw_bytes=raw_bytes, wire_bytes=len(frame))
            self._next.process.remote(frame)

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
