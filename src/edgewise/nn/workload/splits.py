"""Train and validation splits of a workload's labelled samples (image folders and npz files
share it)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from edgewise.errors import ConfigError
from edgewise.nn.sklearn_cache import stratified_indices

__all__ = ["stratified_split"]


def stratified_split(labels: NDArray[np.int64], val_fraction: float,
                     seed: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Sorted train and validation ids, stratified by label; ConfigError if impossible."""
    if not 0 < val_fraction < 1:
        raise ConfigError(f"val_fraction must be in (0, 1), got {val_fraction}",
                          field="data_args.val_fraction")
    ids = np.arange(len(labels), dtype=np.int64)
    try:
        train, val = stratified_indices(ids, np.asarray(labels, dtype=np.int64),
                                        val_fraction, seed)
    except ValueError as exc:
        raise ConfigError(f"cannot split {len(labels)} samples for validation: {exc}",
                          field="data_args.val_fraction") from None
    return np.sort(train), np.sort(val)
