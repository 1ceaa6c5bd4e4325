"""Fixtures for the workload spec: a generated image folder, npz files, a user's model file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from edgewise.nn.workload.synthetic import make_shapes_folder

USER_MODEL = '''
import torch
from torch import nn


class Tiny(nn.Module):
    def __init__(self, classes: int = 4, width: int = 8) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.BatchNorm2d(width),
                                  nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"logits": self.head(self.body(x))}


def make(classes: int = 4, width: int = 8) -> nn.Module:
    return Tiny(classes, width)


def not_a_model() -> int:
    return 3
'''


@pytest.fixture(scope="session")
def shapes_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four classes of drawn shapes, 12 PNGs each, 16×16."""
    return make_shapes_folder(tmp_path_factory.mktemp("shapes"), per_class=12, size=16, seed=1)


@pytest.fixture(scope="session")
def user_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A user's model file with a factory ``make`` whose forward returns a dict."""
    path = tmp_path_factory.mktemp("user") / "mymodel.py"
    path.write_text(USER_MODEL)
    return path


@pytest.fixture()
def npz_file(tmp_path: Path) -> Path:
    """60 random 3×4×4 samples of 3 classes (20 each)."""
    rng = np.random.default_rng(0)
    path = tmp_path / "data.npz"
    np.savez(path, x=rng.normal(size=(60, 3, 4, 4)).astype(np.float32),
             y=np.repeat(np.arange(3), 20))
    return path
