"""``npz:FILE``: samples ``x`` and integer labels ``y`` (optionally ``x_val``/``y_val``)."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from edgewise.errors import ConfigError
from edgewise.nn.data import Dataset
from edgewise.nn.workload.splits import stratified_split

__all__ = ["read_npz"]


def _fail(path: Path, problem: str) -> ConfigError:
    return ConfigError(f"{path}: {problem}", field="data")


def _pair(path: Path, x: NDArray[Any], y: NDArray[Any], suffix: str) -> tuple[
        NDArray[np.float32], NDArray[np.int64]]:
    """``x`` as float32 and ``y`` as int64 after checking kinds and lengths."""
    if x.dtype.kind not in "fiub" or x.ndim < 2:
        raise _fail(path, f"x{suffix} must be a numeric array of samples (N, ...), "
                          f"got {x.dtype} with shape {x.shape}")
    if y.dtype.kind not in "iub" or y.ndim != 1:
        raise _fail(path, f"y{suffix} must be a 1-D array of integer labels, got {y.dtype} "
                          f"with shape {y.shape}")
    if len(x) != len(y):
        raise _fail(path, f"x{suffix} has {len(x)} samples but y{suffix} has {len(y)} labels")
    if len(y) and y.min() < 0:
        raise _fail(path, f"y{suffix} holds negative labels")
    return x.astype(np.float32, copy=False), y.astype(np.int64, copy=False)


def _load(path: Path) -> dict[str, NDArray[Any]]:
    if not path.is_file():
        raise _fail(path, "no such file")
    try:
        with np.load(path, allow_pickle=False) as npz:
            if not hasattr(npz, "files"):
                raise _fail(path, "not an .npz archive (arrays x and y)")
            return {name: npz[name] for name in npz.files}
    except ConfigError:
        raise
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise _fail(path, f"cannot read the arrays ({exc})") from None


def read_npz(path: Path, val_fraction: float, seed: int) -> tuple[Dataset, Dataset, int]:
    """Train and validation sets and the number of classes (largest label + 1). Without
    ``x_val``/``y_val`` the validation set is a stratified ``val_fraction`` of ``x``/``y``.
    Arrays are read with ``allow_pickle=False``: an object array is refused."""
    arrays = _load(path)
    for key in ("x", "y"):
        if key not in arrays:
            raise _fail(path, f"has no array {key!r} (found: {', '.join(arrays) or 'none'})")
    x, y = _pair(path, arrays["x"], arrays["y"], "")
    if len(y) == 0:
        raise _fail(path, "holds no samples")
    if ("x_val" in arrays) != ("y_val" in arrays):
        raise _fail(path, "x_val and y_val come together")
    if "x_val" in arrays:
        xv, yv = _pair(path, arrays["x_val"], arrays["y_val"], "_val")
        if xv.shape[1:] != x.shape[1:]:
            raise _fail(path, f"x_val samples are {xv.shape[1:]}, x samples {x.shape[1:]}")
        ids = np.arange(len(y) + len(yv), dtype=np.int64)
        train = Dataset(x, y, ids[: len(y)])
        val = Dataset(xv, yv, ids[len(y):])
    else:
        train_ids, val_ids = stratified_split(y, val_fraction, seed)
        train = Dataset(x[train_ids], y[train_ids], train_ids)
        val = Dataset(x[val_ids], y[val_ids], val_ids)
    n_classes = int(max(train.y.max(), val.y.max(initial=0))) + 1
    return train, val, n_classes
