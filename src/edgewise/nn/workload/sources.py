"""A workload's data as train and validation splits that ship in chunks and decode on arrival.

The holder of the data (the data store) calls :meth:`DataSource.pack` to get a chunk's
arrays: the samples themselves for ``digits`` and ``npz``, the image files' encoded bytes
for ``images:DIR`` (so the store never decodes an image and holds only file names). The
receiver calls :func:`unpack` to get float32 samples; a worker thus decodes only its shard.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from edgewise.errors import ConfigError
from edgewise.nn.data import Dataset, digits_split
from edgewise.nn.workload.images import ImageFolder, decode_images, scan_folder
from edgewise.nn.workload.spec import DataSpec, Workload
from edgewise.nn.workload.splits import stratified_split

__all__ = ["Arrays", "DataSource", "Split", "open_data", "sample_shape", "unpack"]

Split = Literal["train", "val"]
Arrays = dict[str, NDArray[Any]]


@dataclass(frozen=True, slots=True)
class DataSource:
    """The samples of a data spec split into train and validation. ``arrays`` holds the
    decoded samples (digits, npz) or ``folder`` the image files; ``index`` maps a split's
    positions to sample ids (positions into ``arrays``/``folder``)."""

    spec: DataSpec
    classes: tuple[str, ...]
    shape: tuple[int, ...]
    train_ids: NDArray[np.int64]
    val_ids: NDArray[np.int64]
    arrays: Dataset | None = None
    folder: ImageFolder | None = None

    def size(self, split: Split = "train") -> int:
        return len(self._ids(split))

    def _ids(self, split: Split) -> NDArray[np.int64]:
        return self.train_ids if split == "train" else self.val_ids

    def bytes_per_sample(self) -> int:
        """The largest number of bytes one sample takes in a chunk (for chunk sizing)."""
        if self.folder is not None:
            return max((self.folder.root / f).stat().st_size for f in self.folder.files) + 16
        return int(np.prod(self.shape)) * 4 + 16

    def labels(self, split: Split = "train") -> NDArray[np.int64]:
        ids = self._ids(split)
        return self.folder.labels[ids] if self.folder is not None else \
            self._data().y[np.searchsorted(self._data().ids, ids)]

    def _data(self) -> Dataset:
        assert self.arrays is not None
        return self.arrays

    def pack(self, split: Split, positions: NDArray[np.int64]) -> tuple[Arrays, dict[str, Any]]:
        """The arrays (and JSON meta) that carry the samples at ``positions`` of ``split``."""
        ids = self._ids(split)[np.asarray(positions, np.int64)]
        if self.folder is None:
            data = self._data()
            rows = np.searchsorted(data.ids, ids)
            return {"x": data.x[rows], "y": data.y[rows], "ids": data.ids[rows]}, {}
        names = [self.folder.files[i] for i in ids]
        blobs = [(self.folder.root / name).read_bytes() for name in names]
        offsets = np.cumsum([0, *map(len, blobs)]).astype(np.int64)
        blob = np.frombuffer(b"".join(blobs), np.uint8)
        return ({"blob": blob, "offsets": offsets, "y": self.folder.labels[ids], "ids": ids},
                {"files": names})

    def read(self, split: Split, positions: NDArray[np.int64]) -> Dataset:
        """The decoded samples at ``positions`` (what a receiver gets from :meth:`pack`)."""
        arrays, meta = self.pack(split, positions)
        return unpack(arrays, meta, self.spec, self.shape)


def unpack(arrays: Arrays, meta: dict[str, Any], spec: DataSpec,
           shape: tuple[int, ...]) -> Dataset:
    """Samples as float32 ``x``, int64 ``y`` and ``ids`` from a packed chunk."""
    y = np.asarray(arrays["y"], np.int64)
    ids = np.asarray(arrays["ids"], np.int64)
    if "blob" not in arrays:
        return Dataset(np.asarray(arrays["x"], np.float32), y, ids)
    names = meta.get("files", ())
    x = decode_images(arrays["blob"], arrays["offsets"], shape, spec.mean, spec.std,
                      [str(spec.path / n) for n in names] if spec.path else ())
    return Dataset(x, y, ids)


def sample_shape(workload: Workload) -> tuple[int, ...] | None:
    """One sample's shape as the model sees it: the task's ``input_shape``, else what the
    data fixes (8×8 digits, npz arrays), else a transformers config's image size."""
    if workload.task.input_shape is not None:
        return workload.task.input_shape
    data = workload.data
    if data is not None and data.kind == "digits":
        return (1, 8, 8)
    size = workload.model.args.get("image_size")
    if isinstance(size, int):
        return (int(workload.model.args.get("num_channels", 3)), size, size)
    return None


def open_data(workload: Workload, seed: int = 0) -> DataSource:
    """The workload's data split into train and validation (stratified, seeded by ``seed``).

    Raises
    ------
    ConfigError
        Missing files, empty class folders, npz arrays that are not ``x``/``y`` with one
        label per sample, or a split that leaves a class without samples.
    """
    spec = workload.data
    if spec is None:
        raise ConfigError("this workload has no data", field="data")
    if spec.kind == "digits":
        train, val = digits_split(spec.val_fraction, seed)
        return _arrays_source(spec, train, val, tuple(str(d) for d in range(10)))
    if spec.kind == "npz":
        from edgewise.nn.workload.npzdata import read_npz

        train, val, n_classes = read_npz(Path(str(spec.path)), spec.val_fraction, seed)
        return _arrays_source(spec, train, val, tuple(str(c) for c in range(n_classes)))
    folder = scan_folder(Path(str(spec.path)))
    shape = sample_shape(workload)
    if shape is None:
        raise ConfigError("images:DIR needs the size to decode to, e.g. [3, 32, 32]",
                          field="task.input_shape")
    train_ids, val_ids = stratified_split(folder.labels, spec.val_fraction, seed)
    return DataSource(spec, folder.classes, shape, train_ids, val_ids, folder=folder)


def _arrays_source(spec: DataSpec, train: Dataset, val: Dataset,
                   classes: tuple[str, ...]) -> DataSource:
    both = Dataset(np.concatenate([train.x, val.x]), np.concatenate([train.y, val.y]),
                   np.concatenate([train.ids, val.ids]))
    order = np.argsort(both.ids, kind="stable")
    return DataSource(spec, classes, tuple(train.x.shape[1:]), train.ids, val.ids,
                      arrays=both.take(order))


