"""Micro-benchmarks of the transport: LZ4 throughput and a frame's round trip."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import lz4.block
import numpy as np

from edgewise.wire.frames import Array, TransportError, decode, encode

__all__ = ["lz4_compress_mb_s", "roundtrip_via", "transport_roundtrip_ms_1mb"]


def _gradient_like(size_bytes: int, seed: int, sparsity: float = 0.9) -> Array:
    """Benchmark payload: float32 N(0, 1e-3) with ``sparsity`` of entries zero.

    Like a ReLU-gated or top-k gradient; dense float32 noise (trained weights) barely
    compresses with LZ4 (ratio ~1.0) and would measure only the incompressible path.
    """
    rng = np.random.default_rng(seed)
    values = rng.normal(0.0, 1e-3, size_bytes // 4).astype(np.float32)
    values[rng.random(values.size) < sparsity] = 0.0
    return values


def lz4_compress_mb_s(size_mb: float = 16.0, seed: int = 0, repeats: int = 5) -> float:
    """Median LZ4 compression throughput, MB/s (1e6 bytes) of input, gradient-like payload."""
    data = _gradient_like(int(size_mb * 1e6), seed)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        lz4.block.compress(data, store_size=False)
        times.append(time.perf_counter() - t0)
    return data.nbytes / 1e6 / statistics.median(times)


def roundtrip_via(
    echo: Callable[[bytes], bytes], *, repeats: int = 20, size_mb: float = 1.0, seed: int = 0
) -> float:
    """Median ms of encode (LZ4) -> ``echo(frame)`` -> decode for a gradient-like tensor.

    ``echo`` carries the frame somewhere and back, e.g. through a Ray actor.
    """
    tensors = {"grad": _gradient_like(int(size_mb * 1e6), seed)}
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        decoded = decode(echo(encode(tensors)))
        times.append(time.perf_counter() - t0)
    if not np.array_equal(decoded.arrays["grad"], tensors["grad"]):
        raise TransportError("round trip changed the tensor")
    return statistics.median(times) * 1e3


def transport_roundtrip_ms_1mb(repeats: int = 20) -> float:
    """Median ms to encode (LZ4) and decode a 1 MB float32 tensor in-process."""
    return roundtrip_via(lambda frame: frame, repeats=repeats)
