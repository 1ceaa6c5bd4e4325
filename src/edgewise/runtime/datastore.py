"""The data store actor: holds the training data and ships each worker its shard."""

from __future__ import annotations

import numpy as np
import ray
from numpy.typing import NDArray

from edgewise.nn.data import Dataset, digits_split
from edgewise.wire.frames import encode

__all__ = ["DataStore"]


@ray.remote(max_concurrency=8)  # type: ignore[call-overload]
class DataStore:
    """Serves shards of the training set (and the validation set) as transport frames,
    counting the bytes shipped to each worker."""

    def __init__(self, dataset: str = "digits", seed: int = 0, compression: str = "lz4") -> None:
        if dataset != "digits":
            raise ValueError(f"unknown dataset {dataset!r}")
        self.train, self.val = digits_split(seed=seed)
        self.compression = compression
        self.shipped_bytes: dict[str, int] = {}

    def size(self) -> int:
        return len(self.train)

    def _frame(self, data: Dataset) -> bytes:
        return encode({"x": data.x, "y": data.y, "ids": data.ids}, compression=self.compression)  # type: ignore[arg-type]

    def shard(self, worker: str, positions: NDArray[np.int64]) -> bytes:
        """The samples at ``positions`` of the training set, as one frame for ``worker``."""
        frame = self._frame(self.train.take(positions))
        self.shipped_bytes[worker] = self.shipped_bytes.get(worker, 0) + len(frame)
        return frame

    def validation(self) -> bytes:
        return self._frame(self.val)

    def shipped(self) -> dict[str, int]:
        return dict(self.shipped_bytes)
