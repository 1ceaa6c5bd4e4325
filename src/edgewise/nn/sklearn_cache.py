"""scikit-learn's deterministic results kept on disk: the bundled digits and stratified
splits (``train_test_split(..., stratify=...)``).

Importing scikit-learn imports SciPy: 1.5 CPU-seconds on the 2-core host (measured
2026-11-28: a ``DataStore`` of the digits took 1.50 CPU-seconds to construct, nearly all of
it that import), paid again by every process that opens the digits or splits a workload: each
data store, worker, profiler and command. On a Raspberry Pi it is several seconds per
process. A result here is computed once with scikit-learn and read back by later processes
as arrays (``np.load`` without pickles); its key covers the inputs and scikit-learn's version,
so a changed input or library never reads a stale entry."""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import zipfile
from collections.abc import Callable
from functools import cache
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

__all__ = ["cache_root", "cached_arrays", "sklearn_version", "stratified_indices"]

Arrays = dict[str, NDArray[np.generic]]


def cache_root() -> Path:
    """``$EDGEWISE_CACHE_DIR``, else ``~/.cache/edgewise``."""
    root = os.environ.get("EDGEWISE_CACHE_DIR")
    return Path(root) if root else Path.home() / ".cache" / "edgewise"


@cache
def sklearn_version() -> str:
    """scikit-learn's installed version, read without importing it."""
    try:
        return importlib.metadata.version("scikit-learn")
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def cached_arrays(key: str, compute: Callable[[], Arrays]) -> Arrays:
    """The arrays stored under ``key`` in ``cache_root()/sklearn``, else ``compute()``'s,
    stored for next time. An unreadable entry is computed again; a cache that cannot be
    written is skipped (the result is the same either way)."""
    folder = cache_root() / "sklearn"
    path = folder / f"{key}.npz"
    try:
        with np.load(path, allow_pickle=False) as stored:
            return {name: stored[name] for name in stored.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile):
        pass
    arrays = compute()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        partial = folder / f"{key}.{os.getpid()}.tmp.npz"
        np.savez(partial, **arrays)  # type: ignore[arg-type]
        partial.replace(path)
    except OSError:
        pass
    return arrays


def stratified_indices(ids: NDArray[np.int64], labels: NDArray[np.int64],
                       test_fraction: float, seed: int
                       ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """``train_test_split(ids, test_size=test_fraction, random_state=seed,
    stratify=labels)``: the same two arrays, in the same order; scikit-learn's ValueError
    when the split is impossible."""
    digest = hashlib.sha256(f"{test_fraction!r}|{seed}|{sklearn_version()}|".encode())
    for array in (ids, labels):
        digest.update(f"{array.dtype.str}{array.shape}".encode())
        digest.update(np.ascontiguousarray(array).tobytes())

    def split() -> Arrays:
        from sklearn.model_selection import train_test_split

        train, test = train_test_split(ids, test_size=test_fraction, random_state=seed,
                                       stratify=labels)
        return {"train": np.asarray(train), "test": np.asarray(test)}

    found = cached_arrays(f"split-{digest.hexdigest()[:20]}", split)
    return found["train"].astype(np.int64), found["test"].astype(np.int64)
