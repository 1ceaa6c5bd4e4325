"""A small learnable image folder for tests, examples and the benchmark: drawn shapes
(circle, square, triangle, cross) in random colours, sizes and positions on noisy
backgrounds, saved as PNGs in one subfolder per class."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

__all__ = ["SHAPES", "draw_shape", "main", "make_shapes_folder", "make_shapes_npz"]

SHAPES = ("circle", "square", "triangle", "cross")


def _colour(rng: np.random.Generator, low: int, high: int) -> tuple[int, int, int]:
    r, g, b = (int(v) for v in rng.integers(low, high, size=3))
    return r, g, b


def draw_shape(shape: str, size: int, rng: np.random.Generator) -> Image.Image:
    """One ``size``×``size`` RGB image of ``shape``: a bright shape of random colour, radius
    (a fifth to a third of the image) and centre on a dark background with pixel noise."""
    background = _colour(rng, 0, 90)
    image = Image.new("RGB", (size, size), background)
    draw = ImageDraw.Draw(image)
    radius = float(rng.uniform(size / 5, size / 3))
    cx, cy = (float(v) for v in rng.uniform(radius, size - radius, size=2))
    fill = _colour(rng, 130, 256)
    box = (cx - radius, cy - radius, cx + radius, cy + radius)
    if shape == "circle":
        draw.ellipse(box, fill=fill)
    elif shape == "square":
        draw.rectangle(box, fill=fill)
    elif shape == "triangle":
        draw.polygon([(cx, cy - radius), (cx - radius, cy + radius), (cx + radius, cy + radius)],
                     fill=fill)
    elif shape == "cross":
        bar = max(radius / 3, 1.0)
        draw.rectangle((cx - radius, cy - bar, cx + radius, cy + bar), fill=fill)
        draw.rectangle((cx - bar, cy - radius, cx + bar, cy + radius), fill=fill)
    else:
        raise ValueError(f"unknown shape {shape!r}; known: {', '.join(SHAPES)}")
    pixels = np.asarray(image, np.int16) + rng.integers(-20, 21, size=(size, size, 3))
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), "RGB")


def make_shapes_folder(root: str | Path, per_class: int = 100, size: int = 32, seed: int = 0,
                       classes: int = 4) -> Path:
    """Write ``per_class`` PNGs of each of the first ``classes`` shapes under
    ``root/<shape>/`` (same seed, same files) and return ``root``."""
    if not 1 <= classes <= len(SHAPES):
        raise ValueError(f"classes must be 1 to {len(SHAPES)}")
    root = Path(root)
    rng = np.random.default_rng(seed)
    for shape in SHAPES[:classes]:
        folder = root / shape
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            draw_shape(shape, size, rng).save(folder / f"{shape}-{i:04d}.png")
    return root


def make_shapes_npz(path: str | Path, per_class: int = 100, size: int = 32, seed: int = 0,
                    classes: int = 4) -> Path:
    """The same images as arrays in an npz file: ``x`` float32 (N, 3, size, size) in [0, 1]
    and ``y`` int64 class indices (the order of :data:`SHAPES`)."""
    rng = np.random.default_rng(seed)
    images, labels = [], []
    for label, shape in enumerate(SHAPES[:classes]):
        for _ in range(per_class):
            images.append(np.asarray(draw_shape(shape, size, rng), np.float32) / 255)
            labels.append(label)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, x=np.stack(images).transpose(0, 3, 1, 2), y=np.asarray(labels, np.int64))
    return path


def main(argv: list[str] | None = None) -> None:
    """``python -m edgewise.nn.workload.synthetic OUT [--npz] [--per-class N] [--size S]``."""
    parser = argparse.ArgumentParser(description="Write a learnable image folder (or npz).")
    parser.add_argument("out", type=Path, help="the folder (or .npz file with --npz) to write")
    parser.add_argument("--per-class", type=int, default=100)
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--npz", action="store_true", help="write arrays x and y instead")
    args = parser.parse_args(argv)
    make = make_shapes_npz if args.npz else make_shapes_folder
    print(make(args.out, per_class=args.per_class, size=args.size, seed=args.seed))


if __name__ == "__main__":
    main()
