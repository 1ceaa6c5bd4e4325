"""A user's model with dropout for the bundled digits (8x8), for the engine's tests."""

from torch import nn


def make() -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 48), nn.ReLU(), nn.Dropout(0.5),
                         nn.Linear(48, 10))
