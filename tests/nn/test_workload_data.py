"""The data loaders: image folders (Pillow), npz arrays, digits; splits, chunks and decoding."""

from __future__ import annotations

import io
import shutil
import struct
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from edgewise.errors import ConfigError
from edgewise.nn.data import digits_split
from edgewise.nn.workload import open_data, workload_from_dict
from edgewise.nn.workload.images import decode_image, decode_images, scan_folder, verify_images
from edgewise.nn.workload.sources import DataSource
from edgewise.nn.workload.synthetic import SHAPES


def _images(root: Path, **task: Any) -> DataSource:
    doc = {"model": "digits-cnn", "data": f"images:{root}",
           "task": {"input_shape": [3, 8, 8], **task}}
    return open_data(workload_from_dict(doc))


def _png(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def test_folder_lists_classes_and_files(shapes_dir: Path) -> None:
    folder = scan_folder(shapes_dir)
    assert folder.classes == tuple(sorted(SHAPES))
    assert len(folder) == 48 and np.bincount(folder.labels).tolist() == [12] * 4
    assert all(f.startswith(folder.classes[label]) for f, label in
               zip(folder.files, folder.labels, strict=True))


def test_split_is_stratified_disjoint_and_seeded(shapes_dir: Path) -> None:
    source = _images(shapes_dir)
    assert source.size("train") + source.size("val") == 48
    assert not set(source.train_ids) & set(source.val_ids)
    per_class = np.bincount(source.labels("val"))
    assert per_class.sum() == 10 and set(per_class.tolist()) <= {2, 3}  # ceil(0.2 × 48)
    again = _images(shapes_dir)
    assert np.array_equal(again.val_ids, source.val_ids)


def test_decode_scales_normalises_and_centre_crops() -> None:
    # 16 wide, 8 high: left half white, right half black; covering 8×8 keeps the middle.
    pixels = np.zeros((8, 16, 3), np.uint8)
    pixels[:, :8] = 255
    data = _png(Image.fromarray(pixels))
    out = decode_images(np.frombuffer(data, np.uint8), np.array([0, len(data)]), (3, 8, 8),
                        mean=[0.5], std=[0.5])
    assert out.shape == (1, 3, 8, 8) and out.dtype == np.float32
    assert np.allclose(out[0, :, :, :3], 1.0) and np.allclose(out[0, :, :, 5:], -1.0)
    grey = decode_image(_png(Image.new("RGB", (5, 5), (255, 0, 0))), (1, 4, 4))
    assert grey.shape == (1, 4, 4) and int(grey[0, 0, 0]) == 76  # ITU-R 601 luma of red


def test_pack_ships_file_bytes_and_unpack_decodes(shapes_dir: Path) -> None:
    source = _images(shapes_dir)
    arrays, meta = source.pack("train", np.array([0, 5]))
    assert set(arrays) == {"blob", "offsets", "y", "ids"} and arrays["blob"].dtype == np.uint8
    first = (shapes_dir / meta["files"][0]).read_bytes()
    assert arrays["blob"][: arrays["offsets"][1]].tobytes() == first
    batch = source.read("train", np.array([0, 5]))
    assert batch.x.shape == (2, 3, 8, 8) and batch.x.min() >= -1 and batch.x.max() <= 1
    assert batch.ids.tolist() == source.train_ids[[0, 5]].tolist()
    assert 16 < source.bytes_per_sample() < 8 * 8 * 3 * 4 * 4


def test_corrupt_image_is_named(shapes_dir: Path, tmp_path: Path) -> None:
    root = tmp_path / "pics"
    shutil.copytree(shapes_dir, root)
    (root / "circle" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    with pytest.raises(ConfigError) as info:
        verify_images(scan_folder(root))
    assert info.value.field == "data" and "corrupt image" in str(info.value)
    assert str(root / "circle" / "broken.png") in str(info.value)


def _bad_idat_png() -> bytes:
    """A PNG whose chunks all have valid checksums but whose pixel data is not zlib."""
    header = struct.pack(">IIBBBBB", 4, 4, 8, 2, 0, 0, 0)

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", b"garbage!") + \
        chunk(b"IEND", b"")


def test_image_that_passes_verify_but_not_decoding_is_named() -> None:
    with pytest.raises(ConfigError, match=r"corrupt image shapes/x\.png"):
        decode_image(_bad_idat_png(), (3, 4, 4), "shapes/x.png")


def test_empty_class_folder_and_missing_folder(shapes_dir: Path, tmp_path: Path) -> None:
    root = tmp_path / "pics"
    shutil.copytree(shapes_dir, root)
    (root / "empty").mkdir()
    (root / "empty" / "notes.txt").write_text("not an image")
    with pytest.raises(ConfigError, match="empty class folder") as info:
        _images(root)
    assert info.value.field == "data" and str(root / "empty") in str(info.value)
    with pytest.raises(ConfigError, match="no such folder"):
        _images(tmp_path / "nope")
    (tmp_path / "flat").mkdir()
    with pytest.raises(ConfigError, match="no class subfolders"):
        _images(tmp_path / "flat")


def test_images_need_a_size(shapes_dir: Path) -> None:
    with pytest.raises(ConfigError) as info:
        open_data(workload_from_dict({"model": "digits-cnn", "data": f"images:{shapes_dir}"}))
    assert info.value.field == "task.input_shape"


def _npz(tmp_path: Path, **arrays: Any) -> DataSource:
    np.savez(tmp_path / "d.npz", **arrays)
    return open_data(workload_from_dict({"model": "digits-cnn", "data": f"npz:{tmp_path}/d.npz"}))


def test_npz_split_and_explicit_validation(npz_file: Path, tmp_path: Path) -> None:
    source = open_data(workload_from_dict({"model": "digits-cnn", "data": f"npz:{npz_file}"}))
    assert source.shape == (3, 4, 4) and source.classes == ("0", "1", "2")
    assert (source.size("train"), source.size("val")) == (48, 12)
    with np.load(npz_file) as raw:
        batch = source.read("train", np.arange(3))
        assert np.array_equal(batch.x, raw["x"][batch.ids])
    rng = np.random.default_rng(1)
    own = _npz(tmp_path, x=rng.random((10, 2)), y=np.arange(10) % 2,
               x_val=rng.random((4, 2)), y_val=np.array([0, 1, 1, 0]))
    assert (own.size("train"), own.size("val")) == (10, 4)
    assert own.read("val", np.arange(4)).y.tolist() == [0, 1, 1, 0]


@pytest.mark.parametrize(("arrays", "says"), [
    ({"x": np.zeros((4, 2))}, "no array 'y'"),
    ({"x": np.zeros((4, 2)), "y": np.zeros(3, np.int64)}, "4 samples but y has 3"),
    ({"x": np.zeros((4, 2)), "y": np.array([0, 1, -1, 0])}, "negative"),
    ({"x": np.zeros((4, 2)), "y": np.zeros(4, np.float32)}, "integer labels"),
    ({"x": np.array([{"a": 1}] * 4, dtype=object), "y": np.zeros(4, np.int64)},
     "cannot read"),
    ({"x": np.zeros((4, 2)), "y": np.zeros(4, np.int64), "x_val": np.zeros((2, 2))},
     "come together"),
])
def test_bad_npz(tmp_path: Path, arrays: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError, match=says) as info:
        _npz(tmp_path, **arrays)
    assert info.value.field == "data"


def test_digits_source_is_the_classic_split() -> None:
    source = open_data(workload_from_dict({"model": "digits-cnn"}))
    train, val = digits_split()
    assert np.array_equal(source.train_ids, train.ids) and np.array_equal(source.val_ids, val.ids)
    got = source.read("train", np.arange(len(train)))
    assert np.array_equal(got.x, train.x) and np.array_equal(got.y, train.y)
