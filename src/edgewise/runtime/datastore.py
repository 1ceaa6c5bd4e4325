"""The data store actor: holds a workload's data and ships shards in bounded chunks.

A chunk is one transport frame of at most about :data:`CHUNK_BYTES`, so a data set larger
than a frame (or than the receiver's memory for frames) still trains. For ``images:DIR`` the
store ships the files' encoded bytes and the worker decodes them: the store never decodes an
image and holds only file names, and the link carries compressed images, not float pixels.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import ray
from numpy.typing import NDArray

from edgewise.nn.data import Dataset
from edgewise.nn.workload import DIGITS, Workload, open_data, sample_shape, unpack
from edgewise.nn.workload.sources import Split
from edgewise.wire.frames import Codec, decode, encode

__all__ = ["CHUNK_BYTES", "DataStore", "calibration_ids", "chunks", "read_frames"]

#: Target size of one shipped chunk; far below the transport's 1 GiB decode limit, small
#: enough that a chunk in flight costs little memory, large enough that framing is cheap.
CHUNK_BYTES = 4 << 20


def chunks(positions: NDArray[np.int64], per_chunk: int) -> list[NDArray[np.int64]]:
    """``positions`` cut into consecutive pieces of at most ``per_chunk`` samples."""
    step = max(int(per_chunk), 1)
    return [positions[i : i + step] for i in range(0, len(positions), step)]


def as_workload(dataset: str | Workload) -> Workload:
    """A workload for the store's argument: a Workload, or ``"digits"`` (the default)."""
    if isinstance(dataset, Workload):
        return dataset
    if dataset != "digits":
        raise ValueError(f"unknown dataset {dataset!r}")
    return DIGITS


def calibration_ids(n_train: int, samples: int, seed: int) -> NDArray[np.int64]:
    """The training positions BatchNorm's statistics are re-estimated on before each
    evaluation: a seeded random ``samples`` of the ``n_train``, sorted (the engine's store
    and the benchmark's DDP and one-device arms pick the same)."""
    rng = np.random.default_rng([seed, 0xB7])
    return np.sort(rng.choice(n_train, size=min(samples, n_train), replace=False)).astype(np.int64)


@ray.remote(max_concurrency=8)  # type: ignore[call-overload]
class DataStore:
    """Serves chunks of a workload's training set (and its validation set) as transport
    frames, counting the bytes shipped to each worker."""

    def __init__(self, dataset: str | Workload = "digits", seed: int = 0,
                 compression: Codec = "lz4", chunk_bytes: int = CHUNK_BYTES) -> None:
        self.source = open_data(as_workload(dataset), seed)
        self.compression: Codec = compression
        self.chunk_bytes = chunk_bytes
        self.shipped_bytes: dict[str, int] = {}

    def size(self) -> int:
        return self.source.size("train")

    def chunk_samples(self) -> int:
        """How many samples one chunk carries (at least one)."""
        return max(1, self.chunk_bytes // self.source.bytes_per_sample())

    def _frame(self, split: Split, positions: NDArray[np.int64]) -> bytes:
        arrays, meta = self.source.pack(split, positions)
        return encode(arrays, compression=self.compression, meta=meta)

    def shard(self, worker: str, positions: NDArray[np.int64]) -> bytes:
        """The training samples at ``positions`` as one frame for ``worker`` (ask for one
        chunk at a time: :meth:`chunk_samples` positions)."""
        frame = self._frame("train", positions)
        self.shipped_bytes[worker] = self.shipped_bytes.get(worker, 0) + len(frame)
        return frame

    def validation(self) -> list[bytes]:
        """The validation set as chunk frames."""
        everything = np.arange(self.source.size("val"), dtype=np.int64)
        return [self._frame("val", part) for part in chunks(everything, self.chunk_samples())]

    def calibration(self, samples: int, seed: int) -> list[bytes]:
        """A seeded random ``samples`` of the training set as chunk frames: the few batches
        the parameter server re-estimates BatchNorm statistics on."""
        picked = calibration_ids(self.source.size("train"), samples, seed)
        return [self._frame("train", part) for part in chunks(picked, self.chunk_samples())]

    def shipped(self) -> dict[str, int]:
        return dict(self.shipped_bytes)

    def describe(self) -> dict[str, Any]:
        """The data's classes and sample shape (what the store opened)."""
        return {"classes": list(self.source.classes), "shape": list(self.source.shape)}


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
