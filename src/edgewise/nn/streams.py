"""Drifting video streams in retraining windows: digits with real drift, or a user's frames."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from edgewise.errors import ConfigError

__all__ = [
    "DIGITS_SHAPE", "IMAGE_SIDE", "N_CLASSES", "DigitsStream", "Drift", "FrameStream", "Stream",
    "Window",
    "apply_drift", "digits_streams", "load_frame_folders", "stream_pools",
]  # fmt: skip

IMAGE_SIDE = 8
N_CLASSES = 10
DIGITS_SHAPE = (1, IMAGE_SIDE, IMAGE_SIDE)
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")


@dataclass(frozen=True, slots=True)
class Drift:
    """One window's scene: class mix (sums to 1), rotation in degrees, brightness gain,
    Gaussian blur sigma in pixels and the occluded fraction of the image side."""

    class_mix: tuple[float, ...]
    rotation_deg: float
    brightness: float
    blur_px: float
    occlusion: float


@dataclass(frozen=True, slots=True)
class Window:
    """One retraining window of a stream: the live frames ``x`` (N, C, H, W) float32 in
    [0, 1] (digits: 1×8×8) with their true labels ``y`` (-1 where unknown), and the frames
    ``train_x``
    accumulated for retraining (labelled later by the golden model; ``train_y`` true labels
    for measuring that labelling)."""

    stream: str
    index: int
    x: NDArray[np.float32]
    y: NDArray[np.int64]
    train_x: NDArray[np.float32]
    train_y: NDArray[np.int64]
    drift: Drift | None = None


def apply_drift(images: NDArray[np.float32], drift: Drift,
                rng: np.random.Generator) -> NDArray[np.float32]:
    """Rotate, darken, blur and occlude ``images`` (N, 1, 8, 8) as ``drift`` says, with a
    little per-image jitter so that no two frames are identical."""
    from scipy import ndimage  # here: SciPy's import is a third of a CPU-second

    out = np.empty_like(images)
    side = images.shape[-1]
    for i, img in enumerate(images[:, 0]):
        angle = drift.rotation_deg + rng.normal(0.0, 4.0)
        im = ndimage.rotate(img, angle, reshape=False, order=1, mode="constant")
        if drift.blur_px > 0:
            im = ndimage.gaussian_filter(im, drift.blur_px)
        im = im * drift.brightness
        occ = round(drift.occlusion * side)
        if occ > 0:
            r, c = rng.integers(0, side - occ + 1, size=2)
            im[r : r + occ, c : c + occ] = 0.0
        out[i, 0] = im
    return np.clip(out, 0.0, 1.0).astype(np.float32)


@cache
def stream_pools(seed: int = 0) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """Disjoint indices into the 1,797 digits: (golden-model pool, retraining-frame pool,
    live-frame pool), so that no live frame was ever trained on by any model."""
    from edgewise.nn.data import _digits
    from edgewise.nn.sklearn_cache import stratified_indices

    full = _digits()
    idx = np.arange(len(full), dtype=np.int64)
    golden, rest = stratified_indices(idx, full.y, 0.5, seed)
    train, live = stratified_indices(rest, full.y[rest], 0.5, seed)
    return (np.sort(golden).astype(np.int64), np.sort(train).astype(np.int64),
            np.sort(live).astype(np.int64))


def _draw(pool: NDArray[np.int64], labels: NDArray[np.int64], mix: NDArray[np.float64],
          n: int, rng: np.random.Generator) -> NDArray[np.int64]:
    """``n`` indices from ``pool`` whose classes follow ``mix``."""
    classes = rng.choice(N_CLASSES, size=n, p=mix)
    by_class = [pool[labels[pool] == c] for c in range(N_CLASSES)]
    return np.array([rng.choice(by_class[c]) for c in classes], dtype=np.int64)


@dataclass(frozen=True, slots=True)
class DigitsStream:
    """A camera whose scene drifts: each window has its own class mix, rotation, brightness,
    blur and occlusion, from a schedule seeded by ``seed``; ``severity`` in [0, 1] scales how
    far the scene moves from the clean digits. Objects stay in view for ``persistence``
    frames on average (so frame sampling loses little, as in video)."""

    name: str
    seed: int
    n_windows: int = 4
    frames_per_window: int = 400
    train_frames: int = 300
    severity: float = 1.0
    persistence: float = 4.0

    def __post_init__(self) -> None:
        if self.n_windows < 1 or self.frames_per_window < 1 or self.train_frames < 1:
            raise ConfigError("windows and frame counts must be >= 1", field="stream")
        if not 0.0 <= self.severity <= 1.0:
            raise ConfigError(f"severity must be in [0, 1], got {self.severity}",
                              field="severity")
        if self.persistence < 1.0:
            raise ConfigError("persistence must be >= 1 frame", field="persistence")

    def schedule(self) -> tuple[Drift, ...]:
        """The drift of every window: a seeded random walk, its steps scaled by severity."""
        rng = np.random.default_rng([self.seed, 7])
        s = self.severity
        drifts: list[Drift] = []
        angle, bright, blur, occ = 0.0, 1.0, 0.0, 0.0
        for _ in range(self.n_windows):
            angle = float(np.clip(angle + rng.choice([-1, 1]) * rng.uniform(15, 35) * s, -60, 60))
            bright = float(np.clip(bright + rng.uniform(-0.35, 0.15) * s, 0.35, 1.0))
            blur = float(np.clip(blur + rng.uniform(-0.3, 0.6) * s, 0.0, 1.2))
            occ = float(np.clip(occ + rng.uniform(-0.15, 0.25) * s, 0.0, 0.45))
            mix = rng.dirichlet(np.full(N_CLASSES, 0.3 + 3.0 * (1.0 - s) + 0.2))
            drifts.append(Drift(tuple(float(m) for m in mix), angle, bright, blur, occ))
        return tuple(drifts)

    def window(self, index: int) -> Window:
        """Window ``index`` (0-based): live frames in object runs and retraining frames."""
        if not 0 <= index < self.n_windows:
            raise ConfigError(f"window {index} out of range 0..{self.n_windows - 1}",
                              field="window")
        from edgewise.nn.data import _digits

        full = _digits()
        _, train_pool, live_pool = stream_pools()
        drift = self.schedule()[index]
        rng = np.random.default_rng([self.seed, index, 11])
        mix = np.asarray(drift.class_mix)
        runs = rng.geometric(1.0 / self.persistence, size=self.frames_per_window)
        objects = _draw(live_pool, full.y, mix, self.frames_per_window, rng)
        live_idx = np.repeat(objects, runs)[: self.frames_per_window]
        x = apply_drift(full.x[live_idx], drift, rng)
        x = np.clip(x + rng.normal(0.0, 0.03, size=x.shape), 0.0, 1.0).astype(np.float32)
        train_idx = _draw(train_pool, full.y, mix, self.train_frames, rng)
        train_x = apply_drift(full.x[train_idx], drift, rng)
        return Window(self.name, index, x, full.y[live_idx].copy(), train_x,
                      full.y[train_idx].copy(), drift)

    def windows(self) -> Iterator[Window]:
        for i in range(self.n_windows):
            yield self.window(i)


def digits_streams(n_streams: int, seed: int = 0, **kwargs: float | int) -> list[DigitsStream]:
    """``n_streams`` streams with their own schedules and severities spread over [0.3, 1]."""
    if n_streams < 1:
        raise ConfigError("need at least one stream", field="n_streams")
    rng = np.random.default_rng([seed, 3])
    severities = rng.uniform(0.3, 1.0, size=n_streams)
    return [DigitsStream(f"cam{i}", seed * 1000 + i, severity=float(severities[i]),
                         **kwargs)  # type: ignore[arg-type]
            for i in range(n_streams)]


def _read_image(path: Path, shape: tuple[int, ...]) -> NDArray[np.float32]:
    """One frame as float32 (C, H, W) in [0, 1]: grey (C=1) or RGB (C=3), resized to H×W."""
    from PIL import Image

    channels, height, width = shape
    mode = {1: "L", 3: "RGB"}.get(channels)
    if mode is None:
        raise ConfigError(f"frames have 1 or 3 channels, not {channels}", field="input_shape")
    try:
        with Image.open(path) as im:
            fitted = im.convert(mode).resize((width, height), Image.Resampling.BILINEAR)
            pixels = np.asarray(fitted, dtype=np.float32) / 255.0
    except Exception as exc:  # Pillow raises OSError, SyntaxError, ValueError, ...
        raise ConfigError(f"cannot read image {path}: {exc}", field="frames") from None
    return pixels.reshape(height, width, channels).transpose(2, 0, 1)


def _labels(folder: Path, names: Sequence[str], classes: int) -> NDArray[np.int64]:
    """Labels from ``labels.csv`` (``filename,label`` lines), -1 for unlabelled frames."""
    table: dict[str, int] = {}
    csv = folder / "labels.csv"
    if csv.is_file():
        for n, line in enumerate(csv.read_text().splitlines(), start=1):
            if not line.strip() or line.startswith("filename"):
                continue
            name, _, label = line.partition(",")
            if not label.strip().lstrip("-").isdigit() or not -1 <= int(label) < classes:
                raise ConfigError(f"{csv}:{n}: expected filename,label with label in "
                                  f"0..{classes - 1}", field="labels.csv")
            table[name.strip()] = int(label)
    return np.array([table.get(n, -1) for n in names], dtype=np.int64)


def load_frame_folders(root: Path, train_fraction: float = 0.5,
                       shape: tuple[int, ...] = DIGITS_SHAPE,
                       classes: int = N_CLASSES) -> list[Window]:
    """A user's own stream: ``root/<window>/`` folders (sorted by name), each with PNG or
    JPEG frames (sorted by name, resized to ``shape``: C, H, W, grey or RGB; 8×8 grey by
    default) and optionally ``labels.csv`` (labels below ``classes``). The first
    ``train_fraction`` of each window's frames are its retraining frames."""
    if not root.is_dir():
        raise ConfigError(f"{root} is not a directory", field="frames")
    if not 0.0 < train_fraction < 1.0:
        raise ConfigError("train_fraction must be in (0, 1)", field="train_fraction")
    if len(shape) != 3:
        raise ConfigError(f"frames decode to (C, H, W), not {list(shape)}", field="input_shape")
    folders = sorted(p for p in root.iterdir() if p.is_dir())
    if not folders:
        raise ConfigError(f"{root} has no window folders (one sub-folder per window)",
                          field="frames")
    windows: list[Window] = []
    for i, folder in enumerate(folders):
        files = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        if len(files) < 2:
            raise ConfigError(f"window folder {folder} needs at least 2 PNG/JPEG frames",
                              field="frames")
        x = np.stack([_read_image(p, shape) for p in files]).astype(np.float32)
        y = _labels(folder, [p.name for p in files], classes)
        cut = max(1, min(len(files) - 1, round(train_fraction * len(files))))
        windows.append(Window(root.name, i, x[cut:], y[cut:], x[:cut], y[:cut]))
    return windows


@dataclass(frozen=True, slots=True)
class FrameStream:
    """A user's stream of frame folders (see :func:`load_frame_folders`), read once: what a
    real run takes where it would take a :class:`DigitsStream`."""

    name: str
    frames: tuple[Window, ...]

    @property
    def n_windows(self) -> int:
        return len(self.frames)

    def window(self, index: int) -> Window:
        if not 0 <= index < len(self.frames):
            raise ConfigError(f"window {index} out of range 0..{len(self.frames) - 1}",
                              field="window")
        return self.frames[index]

    def windows(self) -> Iterator[Window]:
        yield from self.frames


Stream = DigitsStream | FrameStream
"""A stream a real run takes: drifting digits, or a user's frame folders."""
