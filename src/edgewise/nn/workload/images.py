"""Image folders (one subfolder per class) read with Pillow: listing, checking, decoding."""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from edgewise.errors import ConfigError

__all__ = ["IMAGE_SUFFIXES", "ImageFolder", "decode_image", "decode_images", "scan_folder",
           "verify_images"]

IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff"})


@dataclass(frozen=True, slots=True)
class ImageFolder:
    """The images of a folder: class names (sorted subfolder names), every image's path
    relative to ``root`` (sorted within its class) and its class index."""

    root: Path
    classes: tuple[str, ...]
    files: tuple[str, ...]
    labels: NDArray[np.int64]

    def __len__(self) -> int:
        return len(self.files)


def scan_folder(root: Path) -> ImageFolder:
    """List ``root``; ConfigError (field ``data``) if it is missing, has no class folders or
    a class folder holds no image."""
    if not root.is_dir():
        raise ConfigError(f"{root}: no such folder", field="data")
    classes = sorted(d.name for d in root.iterdir() if d.is_dir() and not d.name.startswith("."))
    if not classes:
        raise ConfigError(f"{root}: no class subfolders (images:DIR wants one folder per "
                          "class)", field="data")
    files: list[str] = []
    labels: list[int] = []
    for label, name in enumerate(classes):
        found = sorted(p.name for p in (root / name).iterdir()
                       if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
        if not found:
            raise ConfigError(f"{root / name}: empty class folder (no images)", field="data")
        files += [f"{name}/{f}" for f in found]
        labels += [label] * len(found)
    return ImageFolder(root, tuple(classes), tuple(files), np.asarray(labels, np.int64))


def verify_images(folder: ImageFolder) -> None:
    """Check every file's container without decoding pixels (Pillow's ``verify``: headers,
    and chunk checksums for PNG); ConfigError (field ``data``) names the first corrupt one."""
    from PIL import Image  # here, not at the top: 0.1 CPU-s of every member's start

    for rel in folder.files:
        path = folder.root / rel
        try:
            with Image.open(path) as image:
                image.verify()
        except Exception as exc:  # Pillow raises OSError, SyntaxError, ValueError, ...
            raise ConfigError(f"corrupt image {path}: {exc}", field="data") from None


def decode_image(data: bytes, shape: tuple[int, ...], name: str = "image") -> NDArray[np.uint8]:
    """One encoded image as uint8 (C, H, W): converted to grey (C=1) or RGB (C=3), resized
    so that it covers H×W and centre-cropped (the usual resize-and-crop). ConfigError (field
    ``data``) names the file if it cannot be decoded."""
    channels, height, width = shape
    mode = {1: "L", 3: "RGB", 4: "RGBA"}.get(channels)
    if mode is None:
        raise ConfigError(f"images have 1, 3 or 4 channels, not {channels}",
                          field="task.input_shape")
    try:
        from PIL import Image, ImageOps

        with Image.open(io.BytesIO(data)) as image:
            fitted = ImageOps.fit(image.convert(mode), (width, height),
                                  method=Image.Resampling.BILINEAR)
            array = np.asarray(fitted, dtype=np.uint8)
    except Exception as exc:  # Pillow raises OSError, SyntaxError, ValueError, ...
        raise ConfigError(f"corrupt image {name}: {exc}", field="data") from None
    return array.reshape(height, width, channels).transpose(2, 0, 1)


def decode_images(blob: NDArray[np.uint8], offsets: NDArray[np.int64], shape: tuple[int, ...],
                  mean: Sequence[float], std: Sequence[float],
                  names: Sequence[str] = ()) -> NDArray[np.float32]:
    """Images packed back to back in ``blob`` (image ``i`` is ``blob[offsets[i]:offsets[i+1]]``)
    as float32 (N, C, H, W): pixels scaled to [0, 1], then ``(x - mean) / std`` per channel."""
    n = len(offsets) - 1
    out = np.empty((n, *shape), np.float32)
    for i in range(n):
        data = blob[offsets[i] : offsets[i + 1]].tobytes()
        out[i] = decode_image(data, shape, names[i] if i < len(names) else f"#{i}")
    scale = np.float32(1 / 255)
    m = np.asarray(mean, np.float32).reshape(-1, 1, 1)
    s = np.asarray(std, np.float32).reshape(-1, 1, 1)
    out *= scale
    out -= m
    out /= s
    return out
