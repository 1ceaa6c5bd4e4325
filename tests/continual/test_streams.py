"""Drifting digits streams, the frame-folder loader, and the edge/golden models."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from edgewise.errors import ConfigError
from edgewise.nn.continual_models import (
    EdgeCNN,
    accuracy,
    model_from_frame,
    model_to_frame,
    pretrained_edge,
    retrain,
)
from edgewise.nn.streams import DigitsStream, apply_drift, digits_streams, load_frame_folders


def test_same_seed_same_frames_and_streams_differ() -> None:
    a, b = DigitsStream("a", 1, n_windows=2), DigitsStream("a", 1, n_windows=2)
    wa, wb = a.window(1), b.window(1)
    assert np.array_equal(wa.x, wb.x) and np.array_equal(wa.y, wb.y)
    other = DigitsStream("b", 2, n_windows=2)
    assert a.schedule() != other.schedule()


def test_schedule_moves_class_mix_and_appearance() -> None:
    stream = DigitsStream("cam", 5, n_windows=4, frames_per_window=300)
    drifts = stream.schedule()
    assert len({round(d.rotation_deg, 3) for d in drifts}) == 4
    mixes = [np.bincount(stream.window(i).y, minlength=10) / 300 for i in range(2)]
    assert np.abs(mixes[0] - mixes[1]).sum() > 0.2  # class mix really changes
    w = stream.window(0)
    assert w.x.shape == (300, 1, 8, 8) and w.x.dtype == np.float32
    assert w.x.min() >= 0.0 and w.x.max() <= 1.0
    assert w.train_x.shape[0] == stream.train_frames


def test_drift_hurts_the_clean_model_and_retraining_recovers() -> None:
    model = pretrained_edge(0)
    stream = DigitsStream("cam", 3, n_windows=3, severity=1.0)
    worst = min(range(3), key=lambda i: accuracy(model, stream.window(i).x, stream.window(i).y))
    w = stream.window(worst)
    before = accuracy(model, w.x, w.y)
    after = accuracy(retrain(model, w.train_x, w.train_y, epochs=10, batch_size=16, neurons=64,
                             frozen_layers=0), w.x, w.y)
    assert before < 0.8
    assert after > before + 0.1


def test_apply_drift_changes_images() -> None:
    from edgewise.nn.streams import Drift

    x = DigitsStream("c", 0).window(0).train_x[:5]
    rng = np.random.default_rng(0)
    dark = apply_drift(x, Drift((0.1,) * 10, 0.0, 0.4, 0.0, 0.0), rng)
    assert dark.max() <= 0.4 + 1e-6 and not np.allclose(dark, x)


def test_streams_have_distinct_severities() -> None:
    streams = digits_streams(4, seed=1)
    assert len({s.name for s in streams}) == 4
    assert len({s.severity for s in streams}) == 4
    with pytest.raises(ConfigError):
        digits_streams(0)
    with pytest.raises(ConfigError, match="severity"):
        DigitsStream("x", 0, severity=2.0)
    with pytest.raises(ConfigError, match="window"):
        DigitsStream("x", 0, n_windows=2).window(2)


def _write_frames(folder: Path, n: int, labels: bool) -> None:
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for i in range(n):
        Image.fromarray(rng.integers(0, 255, (16, 16), dtype=np.uint8)).save(folder / f"f{i}.png")
    if labels:
        (folder / "labels.csv").write_text("filename,label\n" +
                                           "".join(f"f{i}.png,{i % 10}\n" for i in range(n)))


def test_frame_folder_loader(tmp_path: Path) -> None:
    _write_frames(tmp_path / "w0", 6, labels=True)
    _write_frames(tmp_path / "w1", 4, labels=False)
    windows = load_frame_folders(tmp_path)
    assert [w.index for w in windows] == [0, 1]
    assert windows[0].x.shape == (3, 1, 8, 8) and windows[0].train_x.shape == (3, 1, 8, 8)
    assert windows[0].train_y.tolist() == [0, 1, 2]
    assert (windows[1].y == -1).all()


def test_frame_folder_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a directory"):
        load_frame_folders(tmp_path / "missing")
    with pytest.raises(ConfigError, match="no window folders"):
        load_frame_folders(tmp_path)
    (tmp_path / "w0").mkdir()
    (tmp_path / "w0" / "a.png").write_bytes(b"not a png")
    (tmp_path / "w0" / "b.png").write_bytes(b"not a png")
    with pytest.raises(ConfigError, match="cannot read image"):
        load_frame_folders(tmp_path)
    bad = tmp_path / "other"
    _write_frames(bad / "w0", 3, labels=False)
    (bad / "w0" / "labels.csv").write_text("f0.png,eleven\n")
    with pytest.raises(ConfigError, match=r"labels\.csv"):
        load_frame_folders(bad)


def test_weights_round_trip_through_frames() -> None:
    model = EdgeCNN(neurons=16)
    back = model_from_frame(model_to_frame(model))
    assert back.neurons == 16
    x = DigitsStream("c", 0).window(0).x[:20]
    import torch

    with torch.no_grad():
        assert torch.allclose(model(torch.from_numpy(x)), back(torch.from_numpy(x)))
    with pytest.raises(ConfigError):
        retrain(model, x, np.zeros(20, dtype=np.int64), epochs=1, batch_size=4, neurons=16,
                frozen_layers=4)
