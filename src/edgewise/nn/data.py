"""Datasets: scikit-learn's bundled digits (no download), splits and per-worker shards."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np
from numpy.typing import NDArray

from edgewise.errors import ConfigError
from edgewise.nn.sklearn_cache import cached_arrays, sklearn_version, stratified_indices

__all__ = ["Dataset", "digits_split", "shard_indices"]


@dataclass(frozen=True, slots=True)
class Dataset:
    """Images ``x`` (N, 1, H, W) float32 in [0, 1], labels ``y`` (N,) int64 and stable
    sample ids ``ids`` (N,) int64, so that a trained sample can be accounted for."""

    x: NDArray[np.float32]
    y: NDArray[np.int64]
    ids: NDArray[np.int64]

    def __len__(self) -> int:
        return int(self.y.shape[0])

    def take(self, index: NDArray[np.int64]) -> Dataset:
        return Dataset(self.x[index], self.y[index], self.ids[index])


def _load_digits() -> dict[str, NDArray[np.generic]]:
    from sklearn.datasets import load_digits

    bunch = load_digits()
    return {"x": (np.asarray(bunch.images, dtype=np.float32) / 16.0)[:, None, :, :],
            "y": np.asarray(bunch.target, dtype=np.int64)}


@cache
def _digits() -> Dataset:
    """The digits, from scikit-learn once, then from the cache (no scikit-learn import)."""
    # the key names the form _load_digits gives (float32 in [0, 1], N×1×8×8): a new form
    # needs a new name, or it would read the old arrays
    arrays = cached_arrays(f"digits-f32-n1hw-{sklearn_version()}", _load_digits)
    x, y = arrays["x"].astype(np.float32), arrays["y"].astype(np.int64)
    return Dataset(x, y, np.arange(len(y), dtype=np.int64))


def digits_split(val_fraction: float = 0.2, seed: int = 0) -> tuple[Dataset, Dataset]:
    """Stratified train/validation split of the 1,797 digits (8x8 grey images, 10 classes)."""
    full = _digits()
    train_idx, val_idx = stratified_indices(np.arange(len(full), dtype=np.int64), full.y,
                                            val_fraction, seed)
    return full.take(np.sort(train_idx)), full.take(np.sort(val_idx))


def shard_indices(
    n_samples: int, shards: dict[str, int], rng: np.random.Generator
) -> dict[str, NDArray[np.int64]]:
    """Disjoint random shards of ``range(n_samples)`` with the given sizes (Deep-Edge d_i).

    The sizes must be non-negative and sum to at most ``n_samples``; every sample lands in at
    most one shard, so an epoch trains each sample exactly once.
    """
    sizes = list(shards.values())
    if any(s < 0 for s in sizes):
        raise ConfigError("shard sizes must be non-negative", field="shards")
    if sum(sizes) > n_samples:
        raise ConfigError(
            f"shards hold {sum(sizes)} samples but the dataset has {n_samples}", field="shards"
        )
    order = rng.permutation(n_samples).astype(np.int64)
    bounds = np.cumsum([0, *sizes])
    return {
        name: np.sort(order[bounds[i] : bounds[i + 1]]) for i, name in enumerate(shards)
    }
