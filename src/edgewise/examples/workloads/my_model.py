"""A user's own PyTorch model, named in a workload as ``py:my_model.py:make``."""

from torch import nn


def make(classes: int = 4, width: int = 24) -> nn.Module:
    """A small CNN with BatchNorm for small RGB images (any size: it pools globally)."""
    return nn.Sequential(
        nn.Conv2d(3, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(width, 2 * width, 3, padding=1), nn.BatchNorm2d(2 * width), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2 * width, classes))
